"""Saved calibrations: what ``~/save`` writes reads back as the same estimate, the URDF
``<inertial>`` is the same body, and a bad file is refused naming what is wrong."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from strategies import physical_bodies, vectors

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import N_UNKNOWNS, Estimate
from inertial_id.core.parameters import BodyParameters, symmetric_from_vector
from inertial_id.io import calibration
from inertial_id.params.settings import initial_payload, online_config

FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def make_estimate(body: tuple, offset: np.ndarray, seed: int) -> Estimate:
    mass, com, inertia = body
    rng = np.random.default_rng(seed)
    root = rng.normal(size=(N_UNKNOWNS, N_UNKNOWNS)) * 1e-3
    return Estimate(body=BodyParameters.from_mass_com_inertia(mass, com, inertia),
                    offset=offset, covariance=root @ root.T + 1e-9 * np.eye(N_UNKNOWNS),
                    samples=1234.0, condition_number=12.0, method="lmi_sdp",
                    covariance_type="block-robust")


@FAST
@given(body=physical_bodies(), offset=vectors(6, -5.0, 5.0))
def test_a_saved_calibration_reads_back_as_the_same_estimate(tmp_path: Path, body: tuple,
                                                              offset: np.ndarray) -> None:
    estimate = make_estimate(body, offset, seed=1)
    path = tmp_path / "cal" / "payload.yaml"
    snippet = calibration.save(path, estimate, "ft_sensor", {"mass": True, "com": False})
    loaded, frame = calibration.load(path)
    assert frame == "ft_sensor"
    np.testing.assert_array_equal(loaded.pi, estimate.pi)
    np.testing.assert_array_equal(loaded.offset, estimate.offset)
    np.testing.assert_allclose(loaded.covariance, estimate.covariance, rtol=1e-12, atol=0)
    np.testing.assert_allclose(loaded.com_std, estimate.com_std, rtol=1e-9)
    doc = yaml.safe_load(path.read_text())
    assert doc["converged"] == {"mass": True, "com": False}
    assert doc["estimate"]["mass"] == pytest.approx(body[0])
    assert snippet == path.with_name("payload.inertial.xml") and snippet.exists()


@FAST
@given(body=physical_bodies())
def test_the_urdf_inertial_is_the_same_body(body: tuple) -> None:
    estimate = make_estimate(body, np.zeros(6), seed=2)
    element = ET.fromstring(calibration.urdf_inertial(estimate))
    origin = element.find("origin").attrib
    assert origin["rpy"] == "0 0 0"
    com = [float(v) for v in origin["xyz"].split()]
    mass = float(element.find("mass").attrib["value"])
    i = {k: float(v) for k, v in element.find("inertia").attrib.items()}
    inertia = symmetric_from_vector([i[k] for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")])
    # 6 significant digits per number
    assert mass == pytest.approx(estimate.body.mass, rel=1e-5)
    np.testing.assert_allclose(com, estimate.body.com, rtol=1e-5, atol=1e-12)
    largest = np.abs(estimate.body.inertia_com).max()
    np.testing.assert_allclose(inertia, estimate.body.inertia_com, rtol=0, atol=1e-5 * largest)


def test_a_replay_output_reads_back_with_its_std(tmp_path: Path) -> None:
    """A replay's YAML has no covariance: its std (and offset std) become a diagonal one."""
    estimate = make_estimate((1.2, [0.0, 0.01, 0.05], np.diag([0.01, 0.012, 0.008])),
                             np.ones(6), seed=3)
    path = tmp_path / "replay.yaml"
    path.write_text(yaml.safe_dump({"estimate": calibration.estimate_document(estimate, "tool0"),
                                    "contacts": [], "samples_used": 10}))
    loaded, frame = calibration.load(path)
    assert frame == "tool0"
    np.testing.assert_allclose(loaded.std, estimate.std, rtol=1e-12)
    np.testing.assert_allclose(loaded.offset_std, estimate.offset_std, rtol=1e-12)
    assert np.count_nonzero(loaded.covariance - np.diag(np.diag(loaded.covariance))) == 0


GOOD_PI = BodyParameters.from_mass_com_inertia(1.0, [0, 0, 0.05], np.diag([1e-3] * 3)).pi


@pytest.mark.parametrize(("content", "expected"), [
    (None, "cannot read"),
    ("a: [unclosed", "cannot read"),
    ("just text", "no estimate"),
    ("estimate: null", "no estimate"),
    (yaml.safe_dump({"estimate": {"pi": [1.0, 2.0], "wrench_offset": [0.0] * 6,
                                  "std": [0.1] * 10}}), "pi needs 10"),
    (yaml.safe_dump({"estimate": {"pi": [float("nan")] * 10, "wrench_offset": [0.0] * 6,
                                  "std": [0.1] * 10}}), "pi needs 10 finite"),
    (yaml.safe_dump({"estimate": {"pi": [float(v) for v in -GOOD_PI],
                                  "wrench_offset": [0.0] * 6, "std": [0.1] * 10}}),
     "not physically consistent"),
    (yaml.safe_dump({"estimate": {"pi": [float(v) for v in GOOD_PI],
                                  "wrench_offset": [0.0] * 6, "std": [0.1] * 10},
                     "covariance": [[1.0, 2.0]]}), "covariance must be 16 x 16"),
], ids=["missing", "not-yaml", "text", "null", "short-pi", "nan", "inconsistent", "bad-cov"])
def test_a_bad_file_is_refused_naming_it(tmp_path: Path, content: str | None,
                                         expected: str) -> None:
    path = tmp_path / "saved.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InertialIdError, match=expected) as info:
        calibration.load(path)
    assert str(path) in str(info.value)


def test_a_saved_payload_becomes_the_solvers_prior(tmp_path: Path) -> None:
    estimate = make_estimate((0.5, [0.01, 0.0, 0.04], np.diag([2e-3, 2e-3, 1e-3])),
                             np.zeros(6), seed=4)
    path = tmp_path / "payload.yaml"
    calibration.save(path, estimate, "ft_sensor", {})
    initial, frame = initial_payload({"initial_payload_file": str(path)})
    assert initial is not None and frame == "ft_sensor"
    config = online_config({"initial_payload_weight": 0.01}, initial)
    np.testing.assert_array_equal(config.payload.prior, estimate.pi)
    assert config.payload.prior_weight == 0.01
    assert online_config({}).payload.prior is None
    assert initial_payload({"initial_payload_file": ""}) == (None, "")
