"""An estimate re-expressed in another frame rigidly attached to the sensor.

The frame is given by its placement ``sensor_M_frame`` (a ``pinocchio.SE3``): the rotation
``R`` holds the frame's axes in sensor coordinates and the translation ``p`` its origin in
sensor coordinates (m), so a point ``x_f`` of the frame is ``x_s = R x_f + p`` in the sensor
frame. :func:`frame_placement` reads it from a URDF model.

- ``pi`` (the papers' order, about the frame origin): the pseudo-inertia ``J`` is the second
  moment of the density in homogeneous coordinates, so ``J_f = T^-1 J_s T^-T`` with
  ``T = [[R, p], [0, 1]]``. ``J`` is linear in ``pi``, so the change is one constant 10x10
  matrix (:func:`pi_transform`): exact, and its own Jacobian.
- The F/T offset ``[f; tau]`` (N, N m), a wrench about the sensor origin, becomes the same
  wrench about the frame origin in the frame's axes: ``f_f = R^T f``,
  ``tau_f = R^T (tau - p x f)`` (:func:`wrench_transform`).
- The 16x16 covariance over ``[pi; offset]`` goes through the block-diagonal of the two
  matrices, ``G C G^T``: exact, since both maps are linear.

Mass, centre of mass (``R^T (c - p)``) and inertia about the CoM (``R^T I_c R``) follow from
the new ``pi`` through :class:`~inertial_id.core.parameters.BodyParameters`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pinocchio as pin
from numpy.typing import NDArray
from scipy.linalg import block_diag

from inertial_id.core.covariance import derived_covariance
from inertial_id.core.errors import ModelError
from inertial_id.core.estimate import N_PI, Estimate
from inertial_id.core.kinematics import require_frame
from inertial_id.core.parameters import (
    BodyParameters,
    pi_from_pseudo_inertia,
    pseudo_inertia,
    skew,
)


def frame_placement(model: pin.Model, sensor_frame: str, frame: str) -> pin.SE3:
    """``sensor_M_frame``: the placement of ``frame`` in ``sensor_frame`` (module docstring).

    Both frames must be in the model and rigidly attached: no joint may move between them
    (pinocchio gives them the same parent joint). :class:`ModelError` otherwise.
    """
    sensor = model.frames[require_frame(model, sensor_frame, "sensor frame")]
    target = model.frames[require_frame(model, frame, "frame")]
    if sensor.parentJoint != target.parentJoint:
        raise ModelError(
            f"frame {frame!r} is not rigidly attached to {sensor_frame!r}: joint "
            f"{model.names[target.parentJoint]!r} moves it and joint "
            f"{model.names[sensor.parentJoint]!r} moves the sensor"
        )
    return sensor.placement.inverse() * target.placement


def pi_transform(sensor_M_frame: pin.SE3) -> NDArray[np.float64]:
    """The 10x10 matrix taking ``pi`` about the sensor origin (sensor axes) to ``pi`` about the
    frame origin (frame axes); both in the papers' order, SI units."""
    homogeneous = sensor_M_frame.inverse().homogeneous  # T^-1
    return np.column_stack([
        pi_from_pseudo_inertia(homogeneous @ pseudo_inertia(unit) @ homogeneous.T)
        for unit in np.eye(N_PI)
    ])


def pi_in_frame(pi: NDArray[np.float64], frame: str, sensor_frame: str,
                model: pin.Model | None) -> NDArray[np.float64]:
    """``pi`` given in ``frame`` (about its origin, its axes) re-expressed in
    ``sensor_frame``; as it is when the frames are the same (or ``frame`` is unstated, or
    ``pi`` is zero). :class:`ModelError` when they differ and no ``model`` relates them."""
    if not frame or frame == sensor_frame or not np.any(pi):
        return pi
    if model is None:
        raise ModelError(f"it is in {frame!r}, the wrench in {sensor_frame!r}, and there is "
                         "no URDF to relate them")
    return pi_transform(frame_placement(model, sensor_frame, frame).inverse()) @ pi


def wrench_transform(sensor_M_frame: pin.SE3) -> NDArray[np.float64]:
    """The 6x6 matrix taking a wrench ``[f; tau]`` about the sensor origin (sensor axes) to the
    same wrench about the frame origin (frame axes)."""
    rotation_t = sensor_M_frame.rotation.T
    return np.block([
        [rotation_t, np.zeros((3, 3))],
        [-rotation_t @ skew(sensor_M_frame.translation), rotation_t],
    ])


def express_in_frame(estimate: Estimate, sensor_M_frame: pin.SE3) -> Estimate:
    """``estimate`` (sensor frame) re-expressed in the frame placed at ``sensor_M_frame``:
    ``pi``, offset and covariance (module docstring); everything else is kept."""
    pi_map = pi_transform(sensor_M_frame)
    wrench_map = wrench_transform(sensor_M_frame)
    return dataclasses.replace(
        estimate,
        body=BodyParameters.from_pi(pi_map @ estimate.pi),
        offset=wrench_map @ estimate.offset,
        covariance=derived_covariance(block_diag(pi_map, wrench_map), estimate.covariance),
    )


class OutputFrame:
    """Expresses estimates made in a sensor frame in one ``frame`` of a URDF model (empty: the
    sensor frame itself); the placement is read once per sensor frame."""

    def __init__(self, model: pin.Model | None, frame: str) -> None:
        self.model = model
        self.frame = frame
        self._placements: dict[str, pin.SE3] = {}

    def express(self, estimate: Estimate, sensor_frame: str) -> tuple[Estimate, str]:
        """``estimate`` (about ``sensor_frame``) in the output frame, and that frame's name.

        :class:`ModelError` when there is no model, or the frames are missing or not rigidly
        attached (:func:`frame_placement`).
        """
        if not self.frame or self.frame == sensor_frame:
            return estimate, sensor_frame
        if sensor_frame not in self._placements:
            if self.model is None:
                raise ModelError(f"output frame {self.frame!r} needs the URDF")
            self._placements[sensor_frame] = frame_placement(self.model, sensor_frame,
                                                             self.frame)
        return express_in_frame(estimate, self._placements[sensor_frame]), self.frame
