"""The documentation builds strictly (every link, anchor and page resolves) and the README's
links point at files that exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_build_strictly(tmp_path: Path) -> None:
    """``mkdocs build --strict``: a broken link or anchor, or a page left out of the
    navigation, is a warning and fails the build."""
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "robot" / "index.html").is_file()


def test_the_readme_links_resolve() -> None:
    """Every relative link of the README names a file of the repository, and the README
    stays short (the rest lives in docs/)."""
    text = (ROOT / "README.md").read_text()
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text)
               if not re.match(r"[a-z]+:", t)]
    assert targets, "no relative links found"
    missing = [t for t in targets if t and not (ROOT / t).exists()]
    assert not missing, missing
    assert len(text.splitlines()) <= 200


def test_the_parameter_reference_is_the_table() -> None:
    """``docs/parameters.md`` is what the parameter table writes: a parameter added, removed
    or changed in the table without regenerating the page fails here."""
    from inertial_id.params.table import reference_markdown

    page = (ROOT / "docs" / "parameters.md").read_text()
    assert page == reference_markdown(), (
        "docs/parameters.md differs from the parameter table: regenerate it with "
        "`python -m inertial_id.params.table > docs/parameters.md`")


def test_the_messages_page_holds_every_message_verbatim() -> None:
    """``docs/messages.md`` lists every field of every message: each ``msg/*.msg`` file's
    text is on the page, whole (a field added to a message and not to the page fails)."""
    page = (ROOT / "docs" / "messages.md").read_text()
    files = sorted((ROOT / "msg").glob("*.msg"))
    assert files
    for path in files:
        assert f"## {path.stem}" in page, f"docs/messages.md has no section {path.stem}"
        assert path.read_text().rstrip("\n") in page, f"docs/messages.md: {path.name} differs"
