"""`inertial-id trends`: the statistics by hand, then two simulated series of joint-torque
recordings over 11 months identified by the identify-links workflow (bench/_trends_data.py):
a Coulomb drift injected on one joint is flagged on that joint only, at its size; warm-up and
a tool change without wear flag nothing (and would, compared without the controls)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau, theilslopes

from bench import _trends_data as td
from inertial_id.core.joint_torque.trends import (
    MONTH,
    TrendOptions,
    drift_tests,
    friction_points,
    holm,
    tools,
    trend_test,
)
from inertial_id.tools.cli import main

DRIFT = 0.03  # of the first Coulomb level per month


def test_mann_kendall_and_theil_sen_by_hand() -> None:
    rng = np.random.default_rng(1)
    t = np.sort(rng.uniform(0, 12, 15)) * MONTH
    y = 5.0 + 0.1 * t / MONTH + rng.normal(0, 0.2, t.size)
    test = trend_test([(t, y)])
    tau = kendalltau(t, y).statistic
    assert test.s == pytest.approx(tau * t.size * (t.size - 1) / 2)
    assert test.variance == pytest.approx(15 * 14 * 35 / 18)
    sen = theilslopes(y, t / MONTH, alpha=0.95)  # Sen's 95 % interval, as scipy has it
    assert test.slope == pytest.approx(sen.slope)
    level = np.median(y) / 100  # the relative slope is in % of the median level
    assert [test.low, test.high] == pytest.approx([sen.low_slope / level, sen.high_slope / level])
    assert test.z == pytest.approx((75 - 1) / np.sqrt(test.variance)) and test.p < 1e-3
    # Two strata at different levels, each without a trend: S sums to little, no drift.
    flat = trend_test([(t, 5 + rng.normal(0, 1, 15)), (t, 10 + rng.normal(0, 1, 15))])
    assert flat.strata == 2 and flat.n == 30 and flat.p > 0.05
    # Pooled, the same two levels one after the other look like a trend.
    pooled = trend_test([(t, np.where(t < 6 * MONTH, 10.0, 1.0) + rng.normal(0, 0.1, 15))])
    assert pooled.p < 0.01 and pooled.percent < 0


def test_holm_and_tools() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert tools([0.5, 2.5, 0.51, 2.48, 1.0], TrendOptions()) == [0, 2, 0, 2, 1]


@pytest.fixture(scope="module")
def series() -> dict[str, list[dict]]:
    identifier = td.Identifier()
    return {"drifting": td.table_rows(td.Series(drift=DRIFT), "drifting", identifier),
            "warm-up": td.table_rows(td.Series(), "warm-up", identifier)}


def test_drift_flagged_on_its_joint_only_and_warm_up_never(series: dict) -> None:
    options = TrendOptions()
    joint = td.Identifier().model.joint_names[td.Series().drift_joint]
    drifting = drift_tests(friction_points(series["drifting"], options), options)
    flagged = [(r.joint, r.term) for r in drifting if r.flagged]
    assert flagged == [(joint, "fc")]
    found = next(r for r in drifting if r.flagged)
    # +3 % of the first level per month is 2.41 % of each stratum's median level per month.
    expected = td.injected(series["drifting"], td.Series(drift=DRIFT), options)
    assert expected == pytest.approx(2.41, abs=0.01)
    assert found.test.low <= expected <= found.test.high
    assert found.test.percent == pytest.approx(expected, abs=0.2)
    assert found.test.strata == 5 and found.test.n == 24  # 3 phases x 2 tools, one too short
    warm = drift_tests(friction_points(series["warm-up"], options), options)
    assert len(warm) == 12 and not any(r.flagged for r in warm)
    assert min(r.p_adjusted for r in warm) > 0.05
    # Without the controls (phases and tools pooled) warm-up and the tool change look like wear.
    naive = drift_tests(friction_points(series["warm-up"], options), options, stratify=False)
    assert sum(r.flagged for r in naive) >= 3


def test_command_writes_the_report(series: dict, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    from inertial_id.tools.batch import write_table

    table = tmp_path / "fleet.parquet"
    write_table(series["drifting"] + series["warm-up"], table)
    before = table.read_bytes()
    out = tmp_path / "report"
    assert main(["trends", str(table), "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "drifting: 12 bags, 2 tools" in printed and "1 drifting" in printed
    assert "warm-up: 12 bags" in printed and "0 drifting" in printed
    assert table.read_bytes() == before  # read only
    doc = json.loads((out / "trends.json").read_text())
    assert doc["settings"]["alpha"] == 0.05 and "phase" in doc["settings"]["controlled_for"][0]
    tests = doc["robots"]["drifting"]["friction"]["tests"]
    assert [t["joint"] for t in tests if t["flagged"]] == ["elbow_joint"]
    assert len(doc["robots"]["drifting"]["payload"]) == 2
    for name in ("index.html", "drifting_friction.png", "drifting_payload.png",
                 "drifting_contacts.png", "warm-up_friction.png"):
        assert (out / name).stat().st_size > 1000, name
    assert "elbow_joint fc" in (out / "index.html").read_text()
    # CSV gives the same verdicts; --fail-on-drift turns a drift into exit status 1.
    write_table(series["drifting"], tmp_path / "fleet.csv")
    assert main(["trends", str(tmp_path / "fleet.csv"), "--output", str(tmp_path / "csv"),
                 "--fail-on-drift"]) == 1


def test_unusable_tables_are_one_line_errors(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trends", str(tmp_path / "none.parquet"), "--output", str(tmp_path)]) == 3
    assert "no table" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    with bad.open("w", newline="") as handle:
        csv.writer(handle).writerows([["robot", "bag", "mass"], ["r", "b", "1.0"]])
    assert main(["trends", str(bad), "--output", str(tmp_path / "out")]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "friction" in err and "columns differ" in err
