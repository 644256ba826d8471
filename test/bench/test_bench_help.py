"""Every benchmark starts: ``bench/NAME.py --help`` imports what the script needs and prints
its usage (a re-layout once left ``bench/solve_speed.py`` importing a module that had moved,
and nothing noticed).

The scripts run as ``__main__`` one after the other in one fresh interpreter (each as
``python bench/NAME.py --help`` would: its own ``sys.argv`` and ``sys.path[0]``), so the
heavy modules (rclpy, pinocchio, cvxpy) load once: a process per script took about 2 s of CPU
each.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_"))

RUN_EACH = """
import contextlib, io, json, runpy, sys
results = {}
for path in sys.argv[1:]:
    sys.argv, out = [path, "--help"], io.StringIO()
    sys.path[0] = path.rsplit("/", 1)[0]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            runpy.run_path(path, run_name="__main__")
        code = "returned without exiting"
    except SystemExit as exc:
        code = exc.code or 0
    except BaseException as exc:
        code = f"{type(exc).__name__}: {exc}"
    text = out.getvalue()
    results[path] = [code, "usage:" in text, text[:1500]]
print(json.dumps(results))
"""


def test_there_are_benchmarks() -> None:
    assert {"solve_speed.py", "stop_soak.py", "replay_speed.py"} <= {p.name for p in SCRIPTS}


def test_every_benchmark_prints_its_usage(ros_env: dict[str, str]) -> None:
    done = subprocess.run([sys.executable, "-c", RUN_EACH, *map(str, SCRIPTS)], cwd=ROOT,
                          env=ros_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout.splitlines()[-1])
    assert set(results) == set(map(str, SCRIPTS))
    failures = [f"{Path(path).name}: {code}\n{output}"
                for path, (code, usage, output) in results.items()
                if code != 0 or not usage]
    assert not failures, "\n\n".join(failures)
