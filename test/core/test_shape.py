"""Shape priors: enclosing ellipsoid, uniform-density prior, URDF collision geometry."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import physical_bodies

from inertial_id.core.errors import InertialIdError
from inertial_id.core.parameters import BodyParameters, is_physically_consistent, pseudo_inertia
from inertial_id.core.shape import (
    Ellipsoid,
    equivalent_box,
    uniform_density_prior,
    urdf_collision_points,
)
from inertial_id.core.simulation import bundled_urdf_path

BOX_URDF = """<robot name="r">
  <link name="base"/>
  <joint name="j" type="revolute"><parent link="base"/><child link="flange"/>
    <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <link name="flange"/>
  <joint name="s" type="fixed"><parent link="flange"/><child link="sensor"/>
    <origin xyz="0 0 0.1"/></joint>
  <link name="sensor"/>
  <joint name="g" type="fixed"><parent link="sensor"/><child link="tool"/>
    <origin xyz="0 0 0.05" rpy="0 0 1.5707963267948966"/></joint>
  <link name="tool"><collision><origin xyz="0.01 0 0"/>
    <geometry><box size="0.04 0.02 0.1"/></geometry></collision></link>
</robot>"""


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000))
def test_enclosing_ellipsoid_contains_the_points_and_the_body_passes_thm4(seed: int) -> None:
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(300, 3)) * rng.uniform(0.01, 0.2, 3) + rng.normal(size=3) * 0.1
    ellipsoid = Ellipsoid.enclosing(points)
    assert ellipsoid.contains(points, tolerance=1e-6).all()
    pi = uniform_density_prior(points, 2.0)
    assert is_physically_consistent(pi)
    # Wensing Thm 4: a density inside the ellipsoid has tr(J Q) >= 0.
    assert np.trace(pseudo_inertia(pi) @ ellipsoid.q_matrix()) >= -1e-12
    # A point mass outside violates it.
    far = ellipsoid.centre + 3.0 * np.sqrt(np.linalg.eigvalsh(ellipsoid.shape)).max()
    outside = BodyParameters.from_mass_com_inertia(1.0, far, np.eye(3) * 1e-9).pi
    assert np.trace(pseudo_inertia(outside) @ ellipsoid.q_matrix()) < 0


def test_uniform_prior_of_a_box_grid_matches_the_box_formula() -> None:
    a, b, c, n = 0.1, 0.06, 0.2, 20
    axes = [(np.arange(n) + 0.5) / n * s - s / 2 for s in (a, b, c)]
    points = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    body = BodyParameters.from_pi(uniform_density_prior(points, 3.0))
    expected = 3.0 / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])
    np.testing.assert_allclose(body.inertia_com, expected, rtol=5e-3, atol=1e-9)


def test_volumes_weight_the_points() -> None:
    points = np.array([[0.0, 0, 0], [0.1, 0, 0]])
    pi = uniform_density_prior(points, 1.0, volumes=[3.0, 1.0])
    assert pi[1] == pytest.approx(0.025)
    with pytest.raises(InertialIdError):
        uniform_density_prior(points, -1.0)


def test_urdf_collision_points_are_in_the_sensor_frame() -> None:
    points, volumes = urdf_collision_points(BOX_URDF, "sensor", spacing=0.002)
    # The box (4 x 2 x 10 cm, offset 1 cm along the tool x) is turned 90 deg about z and 5 cm
    # above the sensor: in the sensor frame its centre is at (0, 0.01, 0.05).
    np.testing.assert_allclose(points.mean(axis=0), [0.0, 0.01, 0.05], atol=1e-9)
    np.testing.assert_allclose(np.ptp(points, axis=0), [0.018, 0.038, 0.098], atol=1e-9)
    assert volumes.sum() == pytest.approx(0.04 * 0.02 * 0.1, rel=1e-9)


def test_urdf_without_collision_geometry_below_the_frame_is_an_error() -> None:
    with pytest.raises(InertialIdError, match="no box, cylinder or sphere"):
        urdf_collision_points(bundled_urdf_path(), "ft_sensor")


@settings(max_examples=80, deadline=None)
@given(body=physical_bodies())
def test_the_equivalent_box_has_the_bodys_inertia(body: tuple) -> None:
    mass, _, inertia = body
    box = equivalent_box(mass, inertia)
    np.testing.assert_allclose(box.rotation @ box.rotation.T, np.eye(3), atol=1e-12)
    assert np.linalg.det(box.rotation) == pytest.approx(1.0)
    assert np.all(box.size > 0.0)
    np.testing.assert_allclose(box.inertia(mass), inertia, rtol=0,
                               atol=1e-10 * np.abs(inertia).max())


def test_a_known_box_gives_back_its_sides() -> None:
    """2 kg, 0.3 x 0.2 x 0.1 m along x, y, z: Ixx = m (b^2 + c^2) / 12, ..."""
    a, b, c, m = 0.3, 0.2, 0.1, 2.0
    inertia = m / 12.0 * np.diag([b**2 + c**2, a**2 + c**2, a**2 + b**2])
    box = equivalent_box(m, inertia)
    order = np.argsort(np.abs(box.rotation).argmax(axis=0))  # box axis along x, y, z
    np.testing.assert_allclose(box.size[order], [a, b, c], rtol=1e-12)
    with pytest.raises(InertialIdError):
        equivalent_box(0.0, inertia)
