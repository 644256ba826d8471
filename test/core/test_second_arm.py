"""The second arm of the rates bench (inertial_id/resources/arm6_spherical_ft.urdf): an
anthropomorphic 6R arm whose three wrist axes meet in one point, the F/T sensor 35 mm past the
flange and turned 45 degrees about the tool axis."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pinocchio as pin
import pytest

from inertial_id.core.kinematics import SensorKinematics

URDF = str(resources.files("inertial_id") / "resources" / "arm6_spherical_ft.urdf")
HOME = (0.0, 0.3, 0.3, 0.5, 0.9, 0.3)


def test_the_sensor_is_35_mm_past_the_flange_turned_45_degrees() -> None:
    kinematics = SensorKinematics(URDF, "ft_sensor")
    assert kinematics.joint_names == [f"joint_{k}" for k in range(1, 7)]
    model, data = kinematics.model, kinematics.data
    pin.framesForwardKinematics(model, data, kinematics.configuration(np.array(HOME)))
    flange = data.oMf[model.getFrameId("tool0")]
    relative = flange.actInv(data.oMf[kinematics.frame_id])
    assert relative.translation == pytest.approx([0.0, 0.0, 0.035], abs=1e-9)
    angle = np.arctan2(relative.rotation[1, 0], relative.rotation[0, 0])
    assert angle == pytest.approx(np.pi / 4, abs=1e-4)


def test_the_wrist_axes_meet_in_one_point() -> None:
    """Joints 4, 5 and 6 pass through one point (a spherical wrist, unlike the bundled arm's
    offset wrist): its position does not move when only they turn."""
    kinematics = SensorKinematics(URDF, "ft_sensor")
    model, data = kinematics.model, kinematics.data
    centres = []
    for wrist in ((0.0, 0.9, 0.3), (1.0, -0.4, 2.0)):
        pin.forwardKinematics(model, data, kinematics.configuration(np.array((0.0, 0.3, 0.3,
                                                                              *wrist))))
        centres.append(data.oMi[model.getJointId("joint_5")].translation.copy())
    assert centres[0] == pytest.approx(centres[1], abs=1e-9)
    jacobian = kinematics.jacobians(np.array([HOME]))[0]
    assert np.linalg.matrix_rank(jacobian) == 6  # the bench's home pose is not singular
