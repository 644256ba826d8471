"""``inertial-id tune``: a tiny search on a real (local, one-worker) Dask cluster, the parameter
file it writes, and the labels and scores it is built on."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from inertial_id.core.errors import InertialIdError
from inertial_id.params.spec import check_known
from inertial_id.params.table import NODE_PARAMS
from inertial_id.tools.cli import main
from inertial_id.tools.replay import ReplayOptions, load_params, replay
from inertial_id.tools.tune import SEARCHED, TuneOptions, TuneResult, run_tune, with_values
from inertial_id.tools.tuning import (
    BagOutcome,
    Label,
    load_labels,
    match_contacts,
    score,
    split_bags,
    write_params,
)


@pytest.fixture(scope="module")
def bags(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two short synthetic bags and their labels (payloads, no contacts)."""
    root = tmp_path_factory.mktemp("tune")
    for name, seed, mass in (("a", "1", "1.2"), ("b", "2", "2.0")):
        assert main(["simulate", "--duration", "5", "--output", str(root / name), "--seed",
                     seed, "--mass", mass]) == 0
    (root / "labels.yaml").write_text(
        "bags:\n"
        "  a: {payload: {mass: 1.2, com: [0.012, -0.018, 0.065]}, contacts: []}\n"
        "  b: {payload: {mass: 2.0, com: [0.012, -0.018, 0.065]}, contacts: []}\n")
    return root


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """A local Dask cluster of one worker process, as ``--workers 1`` makes."""
    from inertial_id.tools.batch import dask_client

    with dask_client(1, None, 1) as c:
        yield c


@pytest.fixture(scope="module")
def searches(bags: Path, client: Any) -> tuple[TuneResult, TuneResult, TuneOptions]:
    """The same 3-trial search twice (seed 5)."""
    options = TuneOptions(inputs=(str(bags),), output=bags / "tuned.yaml",
                          labels=bags / "labels.yaml", trials=3, seed=5, parallel=2,
                          progress=False)
    return run_tune(options, client), run_tune(options, client), options


def _summary(result: TuneResult) -> list[Any]:
    return [(r.number, r.values, r.score.loss, r.score.parts) for r in result.trials] + [
        result.tuning, result.held_out, result.tuned, result.defaults.score.loss,
        result.default_held_out, result.tuned_held_out]


def test_a_tiny_search_completes_and_repeats_exactly(searches: tuple[Any, ...]) -> None:
    first, second, _ = searches
    assert len(first.trials) == 3 and first.kind == "labelled"
    assert len(first.tuning) == len(first.held_out) == 1
    assert all(math.isfinite(r.score.loss) for r in first.trials)
    assert first.defaults.score.parts["mass_error_percent"] < 1.0
    assert first.default_held_out is not None and first.tuned_held_out is not None
    assert _summary(first) == _summary(second)


def test_the_written_file_loads_in_replay_and_changes_the_result(
        searches: tuple[Any, ...], bags: Path, tmp_path: Path) -> None:
    first, _, _ = searches
    trial = first.trials[0]
    path = tmp_path / "tuned.yaml"
    write_params(with_values({}, trial.values), path, "a header\nof two lines")
    doc = yaml.safe_load(path.read_text())
    assert set(doc) == {"/**/gatherer", "/**/solver"}
    for node, values in load_params(path).items():
        check_known(NODE_PARAMS[node], values, node)  # the nodes refuse unknown names
        assert set(values) == set(SEARCHED[node])
    bag = Path(first.held_out[0])
    tuned = replay(ReplayOptions(bag=bag, params=path, progress=False))
    default = replay(ReplayOptions(bag=bag, progress=False))
    assert tuned.estimate is not None and default.estimate is not None
    assert tuned.estimate.body.mass != default.estimate.body.mass


def test_with_values_keeps_the_base_and_puts_the_tuned_sections_last() -> None:
    base = {"/**/solver": {"ros__parameters": {"method": "manifold", "confidence": 0.99}},
            "/**": {"ros__parameters": {"use_sim_time": True}}}
    doc = with_values(base, {"solver": {"confidence": 0.9}, "gatherer": {"polyorder": 2}})
    assert list(doc) == ["/**", "/**/solver", "/**/gatherer"]
    assert doc["/**/solver"]["ros__parameters"] == {"method": "manifold", "confidence": 0.9}
    assert base["/**/solver"]["ros__parameters"]["confidence"] == 0.99


@pytest.mark.parametrize(("text", "message"), [
    ("[1, 2]", "expected a mapping 'bags:"),
    ("bags:\n  nothere: {}\n", "nothere: not one of the bags given"),
    ("bags:\n  a: {payload: {com: [0, 0, 0]}}\n", "a.payload: expected {mass"),
    ("bags:\n  a: {payload: {mass: -1}}\n", "a.payload.mass: must be positive"),
    ("bags:\n  a: {payload: {mass: 1, com: [0, 0]}}\n", "a.payload.com: expected"),
    ("bags:\n  a: {contacts: [[2, 1]]}\n", "ends before it starts"),
    ("bags:\n  a: {contacts: [[1, x]]}\n", "expected a finite number, got 'x'"),
    ("bags:\n  a: {contact: []}\n", "unknown key(s) contact"),
    ("bags: {a: [unclosed\n", "cannot read labels"),
])
def test_label_errors_are_one_line(bags: Path, tmp_path: Path, text: str, message: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    labels = tmp_path / "labels.yaml"
    labels.write_text(text.replace("  a:", f"  {bags / 'a'}:").replace(
        "  nothere:", f"  {bags / 'nothere'}:"))
    with pytest.raises(InertialIdError, match=None) as caught:
        load_labels(labels, [bags / "a", bags / "b"])
    assert message in str(caught.value) and "\n" not in str(caught.value)
    # The command fails on it before any cluster starts: exit 3, one line.
    assert main(["tune", str(bags / "a"), str(bags / "b"), "--labels", str(labels),
                 "--output", str(tmp_path / "out.yaml"), "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_contacts_are_matched_with_a_tolerance() -> None:
    labelled = [(5.0, 5.4), (10.0, 10.5)]
    found = [(5.05, 5.3), (7.0, 7.1), (10.6, 10.8)]
    hits, false, delays = match_contacts(found, labelled, tolerance=0.2)
    assert (hits, false) == (2, 1) and delays == pytest.approx([0.05, 0.6])
    labels = {"x": Label(contacts=tuple(labelled))}
    result = score([BagOutcome("x", contacts=tuple(found), duration=3600.0)], labels,
                   "labelled")
    assert result.parts["recall"] == 1.0 and result.parts["false_alarms_per_hour"] == 1.0
    assert result.loss == pytest.approx(0.01 + (0.05 + 0.6) / 2)
    failed = score([BagOutcome("x", error="boom")], labels, "labelled")
    assert failed.loss == math.inf and failed.failed == ["x"]


def test_the_split_is_seeded_and_holds_out_at_least_one() -> None:
    bags = [f"b{i}" for i in range(10)]
    assert split_bags(bags, 0.5, 3) == split_bags(bags, 0.5, 3)
    tuning, held = split_bags(bags, 0.5, 3)
    assert len(tuning) == len(held) == 5 and sorted(tuning + held) == bags
    assert split_bags(["a", "b"], 0.1, 0) in ((["a"], ["b"]), (["b"], ["a"]))
    assert split_bags(["a", "b"], 0.0, 0) == (["a", "b"], [])
    with pytest.raises(InertialIdError, match="holdout"):
        split_bags(bags, 1.0, 0)
