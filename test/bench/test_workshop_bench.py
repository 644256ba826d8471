"""Tests of bench/workshop_tools.py: conventions of the data set, metrics, output, exact recovery.

The data set lives outside the repository (``../shared/data/workshop_tools``); tests that need
it are skipped when it is absent.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bench import _workshop_data as wd
from bench import workshop_tools as bench
from inertial_id.core.estimation.estimators import ConsistentEstimator, least_squares
from inertial_id.core.estimation.payload import PayloadConfig, PayloadIdentifier
from inertial_id.core.parameters import BodyParameters
from inertial_id.core.regressor import regressor

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"

# Tools whose stored pi_sensor reproduces the data to rounding (Bent_Jaw_Pliers and Box_Wrench
# carry a ppm-level mismatch in the stored mass; the Ruler's pseudo-inertia margin, 7e-10, is
# below the SDP's epsilon, so the LMI cannot return it exactly).
EXACT_TOOLS = ("Hammer", "Allen_Key", "Clamp")


@pytest.fixture(scope="module")
def data_dir() -> Path:
    if not (wd.DEFAULT_DATA_DIR / wd.GROUND_TRUTH_FILE).is_file():
        pytest.skip("workshop_tools data set not found next to the repository "
                    "(../shared/data/workshop_tools)")
    return wd.DEFAULT_DATA_DIR


# --- conventions ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Hammer", "Ruler", "C_Clamp"])
def test_zero_noise_residual_is_rounding_level(data_dir: Path, name: str) -> None:
    tool = wd.load_tool(data_dir, name)
    assert wd.zero_noise_residual(tool) < 1e-8
    assert bench.check_status(bench.convention_check(tool)) == "ok"


def test_check_detects_a_wrong_convention(data_dir: Path) -> None:
    """Using the classical acceleration in place of the spatial one must show up."""
    tool = wd.load_tool(data_dir, "Hammer")
    twist, proper, wrench = tool.sensor_samples
    classical = proper.copy()
    classical[:, :3] += np.cross(twist[:, 3:], twist[:, :3])
    residual = np.max(np.abs(regressor(twist, classical) @ tool.pi_true - wrench))
    assert residual > 1e-3
    flipped = replace(tool, wrench=-tool.wrench)
    assert wd.zero_noise_residual(flipped) > 1.0
    assert bench.check_status(bench.convention_check(flipped)) == "FAIL"


def test_check_command_passes(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--check", "--tools", "Hammer,Box_Wrench", "--data", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert "Box_Wrench" in out and "truth off" in out and "PASS" in out


def test_point_cloud_in_sensor_frame(data_dir: Path) -> None:
    tool = wd.load_tool(data_dir, "Allen_Key")
    # The stored mesh pose agrees with the object pose logged in the trajectory.
    columns = wd._read_csv(data_dir / "Allen_Key.csv")
    r_wm = np.column_stack([columns[f"obj_R{i}{j}"] for i in range(3) for j in range(3)])
    p_wm = np.column_stack([columns[f"obj_p{a}"] for a in "xyz"])
    r_sm = tool.rotation[0].T @ r_wm[0].reshape(3, 3)
    np.testing.assert_allclose(r_sm, tool.rotation_sensor_mesh, atol=1e-8)
    np.testing.assert_allclose(tool.rotation[0].T @ (p_wm[0] - tool.position[0]),
                               tool.position_sensor_mesh, atol=1e-8)
    points, volumes = wd.load_point_cloud_sensor(tool)
    assert points.shape == (volumes.size, 3) and np.all(volumes > 0)
    # Axis-aligned mesh frame: the point cloud's extents are the stored ones.
    np.testing.assert_allclose(np.ptp(points, axis=0), np.abs(tool.extents), rtol=1e-4)
    # A one-material tool: the uniform-density centroid is the true CoM (to 1 mm).
    com = volumes @ points / volumes.sum()
    assert np.linalg.norm(com - tool.pi_true[1:4] / tool.pi_true[0]) < 1e-3


# --- metrics --------------------------------------------------------------------------------

EXTENTS = np.array([0.2, 0.1, -0.05])
TRUTH = BodyParameters.from_mass_com_inertia(
    0.5, [0.03, -0.01, 0.02], [2e-3, 1e-5, -2e-5, 3e-3, 4e-5, 4e-3]
).pi


def test_metrics_of_the_truth_are_zero() -> None:
    assert wd.mass_error_pct(TRUTH, TRUTH) == 0.0
    assert wd.com_error_pct(TRUTH, TRUTH, EXTENTS) == 0.0
    assert wd.inertia_error_pct(TRUTH, TRUTH, EXTENTS) == 0.0
    assert wd.inertia_error_pct(TRUTH, TRUTH, EXTENTS, about="origin") == 0.0


def test_metrics_hand_cases() -> None:
    body = BodyParameters.from_pi(TRUTH)
    heavier = BodyParameters.from_mass_com_inertia(1.01 * body.mass, body.com, body.inertia_com)
    assert wd.mass_error_pct(heavier.pi, TRUTH) == pytest.approx(1.0)
    assert wd.com_error_pct(heavier.pi, TRUTH, EXTENTS) == pytest.approx(0.0, abs=1e-12)
    assert wd.inertia_error_pct(heavier.pi, TRUTH, EXTENTS) == pytest.approx(0.0, abs=1e-9)

    # CoM 1 mm off along x, extents 0.2 m: 0.5 % on x, 0 on y and z -> mean 1/6 %.
    shifted = BodyParameters.from_mass_com_inertia(
        body.mass, body.com + [1e-3, 0, 0], body.inertia_com)
    assert wd.com_error_pct(shifted.pi, TRUTH, EXTENTS) == pytest.approx(0.5 / 3)

    # Izz about the CoM off by 1 % of its box scale (m/12)(a_x^2 + a_y^2) -> mean 1/6 %.
    scale_zz = body.mass / 12 * (0.2**2 + 0.1**2)
    inertia = body.inertia_com.copy()
    inertia[2, 2] += 0.01 * scale_zz
    off = BodyParameters.from_mass_com_inertia(body.mass, body.com, inertia)
    assert wd.inertia_error_pct(off.pi, TRUTH, EXTENTS) == pytest.approx(1.0 / 6)
    # An off-diagonal entry is scaled by |m a_x a_y / 12| (the sign of the extents is ignored).
    inertia = body.inertia_com.copy()
    inertia[0, 1] = inertia[1, 0] = inertia[0, 1] + 0.06 * body.mass * 0.2 * 0.1 / 12
    off = BodyParameters.from_mass_com_inertia(body.mass, body.com, inertia)
    assert wd.inertia_error_pct(off.pi, TRUTH, EXTENTS) == pytest.approx(1.0)


def test_tool_metrics_consistency_flag() -> None:
    tool = type("T", (), {"pi_true": TRUTH, "extents": EXTENTS})()
    assert wd.tool_metrics(TRUTH, tool)["consistent"] == 1.0
    negative_inertia = TRUTH.copy()
    negative_inertia[4] = -1e-3
    assert wd.tool_metrics(negative_inertia, tool)["consistent"] == 0.0
    failed = wd.tool_metrics(np.full(10, np.nan), tool)
    assert failed["consistent"] == 0.0 and np.isnan(failed["mass"])


# --- command line ---------------------------------------------------------------------------


def test_estimates_json_has_every_tool_and_method(data_dir: Path, tmp_path: Path) -> None:
    estimates, summary = tmp_path / "estimates.json", tmp_path / "summary.json"
    code = bench.main(["--data", str(data_dir), "--tools", "Hammer,Ruler", "--noise", "low",
                       "--seed", "0", "--no-progress", "--estimates", str(estimates),
                       "--json", str(summary)])
    assert code == 0
    doc = json.loads(estimates.read_text())
    assert set(doc) == {"Hammer", "Ruler"}
    for per_method in doc.values():
        assert set(per_method) == set(bench.METHODS)
        for pi in per_method.values():
            assert len(pi) == 10 and all(np.isfinite(pi))
    levels = json.loads(summary.read_text())["levels"]
    assert levels["low"]["summary"]["lmi"]["consistent"] == 100.0


def test_zero_noise_recovers_the_truth(data_dir: Path, tmp_path: Path) -> None:
    estimates = tmp_path / "estimates.json"
    code = bench.main(["--data", str(data_dir), "--tools", ",".join(EXACT_TOOLS),
                       "--noise", "none", "--no-progress", "--estimates", str(estimates)])
    assert code == 0
    doc = json.loads(estimates.read_text())
    truth = wd.load_ground_truth(data_dir)
    for name in EXACT_TOOLS:
        pi_true = np.asarray(truth[name]["pi_sensor"])
        for method in ("ols", "lmi"):
            pi = np.asarray(doc[name][method])
            error = np.max(np.abs(pi - pi_true)) / np.max(np.abs(pi_true))
            assert error < 1e-6, (name, method, error)


def test_unknown_method_is_a_usage_error(data_dir: Path) -> None:
    with pytest.raises(SystemExit):
        bench.main(["--data", str(data_dir), "--tools", "Hammer", "--methods", "nope"])


# Their stored mass is about 2 ppm off the simulated body (0.2547474 vs 0.254747 kg and
# 0.2063895 vs 0.20639 kg): the clean wrench is reproduced by a fit to 1e-12 but differs from
# the stored truth by that much (see ``bench/workshop_tools.py --check``).
TRUTH_OFF = {"Bent_Jaw_Pliers": 5e-6, "Box_Wrench": 5e-6}


def test_every_clean_tool_is_recovered_exactly(data_dir: Path) -> None:
    """All 20 tools, clean data: least squares and the LMI SDP (with a margin below the
    thinnest tool's, the Ruler's 7e-10 kg m^2) give the stored pi to 1e-6 relative."""
    truth = wd.load_ground_truth(data_dir)
    sdp = ConsistentEstimator(epsilon=1e-12, prior_weight=0.0, known_offset=np.zeros(6))
    for name in wd.tool_names(data_dir):
        tool = wd.load_tool(data_dir, name, truth)
        identifier = PayloadIdentifier(PayloadConfig(wrench_sign="sensor_on_payload",
                                                     force_noise_std=0.05,
                                                     torque_noise_std=0.0025))
        identifier.add(*tool.sensor_samples)
        tolerance = TRUTH_OFF.get(name, 1e-6)
        for estimate in (least_squares(identifier.statistics, np.zeros(6)),
                         sdp.solve(identifier.statistics)):
            error = np.linalg.norm(estimate.pi - tool.pi_true) / np.linalg.norm(tool.pi_true)
            assert error < tolerance, (name, estimate.method, error)
            assert estimate.physically_consistent or estimate.method == "least_squares"
