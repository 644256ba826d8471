"""A URDF from a modified (Craig) Denavit–Hartenberg table, for robots published as DH tables.

Convention (Craig 1989, "modified" DH): row ``i`` holds ``(a_i, alpha_i, d_i, theta_i)`` and
the transform from frame ``i-1`` to frame ``i`` is

    T_i(q_i) = Rot_x(alpha_i) Trans_x(a_i) Rot_z(theta_i + q_i) Trans_z(d_i)

so ``z_i`` is joint ``i``'s axis and frame ``i`` moves with link ``i``. As a URDF joint that is
the fixed origin ``Trans_x(a_i) Rot_x(alpha_i) Trans_z(d_i) Rot_z(theta_i)`` (``Rot_x`` and
``Trans_x`` commute, so do ``Rot_z`` and ``Trans_z``) followed by the joint's rotation about its
own ``z``: the URDF link frame of link ``i`` *is* DH frame ``i``. Link ``i``'s inertial
parameters given "in the DH link frame" therefore go into the URDF unchanged.

A row marked ``fixed`` (e.g. a flange) becomes a fixed joint with the same origin.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pinocchio as pin
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import ModelError
from inertial_id.core.joint_torque.link_urdf import inertial_xml
from inertial_id.core.parameters import BodyParameters


@dataclass(frozen=True)
class DHRow:
    """One modified-DH row: lengths in m, angles in rad; ``fixed`` for a rigid frame."""

    a: float
    alpha: float
    d: float
    theta: float = 0.0
    fixed: bool = False


def dh_transform(row: DHRow, q: float = 0.0) -> NDArray[np.float64]:
    """The 4x4 homogeneous transform ``T_{i-1,i}(q)`` of one modified-DH row."""
    ca, sa = np.cos(row.alpha), np.sin(row.alpha)
    angle = row.theta + (0.0 if row.fixed else q)
    ct, st = np.cos(angle), np.sin(angle)
    return np.array([[ct, -st, 0.0, row.a],
                     [st * ca, ct * ca, -sa, -sa * row.d],
                     [st * sa, ct * sa, ca, ca * row.d],
                     [0.0, 0.0, 0.0, 1.0]])


def forward_kinematics(rows: Sequence[DHRow], q: ArrayLike) -> list[NDArray[np.float64]]:
    """Base-to-frame transforms of every row (moving rows take the next entry of ``q``)."""
    q = iter(np.asarray(q, dtype=float).ravel())
    out, pose = [], np.eye(4)
    for row in rows:
        pose = pose @ dh_transform(row, 0.0 if row.fixed else next(q))
        out.append(pose)
    return out


def _f(x: float) -> str:
    return f"{x:.12g}"


def modified_dh_urdf(
    name: str,
    rows: Sequence[DHRow],
    bodies: Sequence[BodyParameters | None],
    effort_limits: Sequence[float] | None = None,
    velocity_limits: Sequence[float] | None = None,
    position_limits: Sequence[tuple[float, float]] | None = None,
) -> str:
    """URDF text of a serial chain: links ``{name}_link0`` (base) .. ``{name}_link{n}``,
    joints ``{name}_joint{i}`` (revolute about z; ``fixed`` rows fixed).

    ``bodies[i]`` is link ``i+1``'s inertial in DH frame ``i+1`` (None: massless, written as a
    link without ``<inertial>``). Limits are per moving joint (defaults: +-pi rad, 10 rad/s,
    100 N m).
    """
    if len(bodies) != len(rows):
        raise ModelError(f"{len(rows)} DH rows but {len(bodies)} bodies")
    moving = [r for r in rows if not r.fixed]
    n = len(moving)
    efforts = list(effort_limits or [100.0] * n)
    velocities = list(velocity_limits or [10.0] * n)
    positions = list(position_limits or [(-np.pi, np.pi)] * n)
    if not len(efforts) == len(velocities) == len(positions) == n:
        raise ModelError(f"limits must have one entry per moving joint ({n})")
    parts = [f'<?xml version="1.0"?>\n<robot name="{name}">\n  <link name="{name}_link0"/>\n']
    k = 0
    for i, (row, body) in enumerate(zip(rows, bodies, strict=True), start=1):
        link = f"{name}_link{i}"
        inertial = f"    {inertial_xml(body, '    ', digits=12)}\n" if body else ""
        parts.append(f'  <link name="{link}">\n{inertial}  </link>\n')
        # origin = Trans_x(a) Rot_x(alpha) Trans_z(d) Rot_z(theta): xyz and rpy (roll alpha,
        # then yaw theta about the rotated z: URDF rpy is Rz(y) Ry(p) Rx(r) in the parent).
        roll = pin.utils.rotate("x", row.alpha)
        xyz = np.array([row.a, 0.0, 0.0]) + roll @ np.array([0.0, 0.0, row.d])
        rpy = pin.rpy.matrixToRpy(roll @ pin.utils.rotate("z", row.theta))
        kind = "fixed" if row.fixed else "revolute"
        joint = [f'  <joint name="{name}_joint{i}" type="{kind}">\n',
                 f'    <parent link="{name}_link{i - 1}"/>\n    <child link="{link}"/>\n',
                 f'    <origin xyz="{_f(xyz[0])} {_f(xyz[1])} {_f(xyz[2])}" '
                 f'rpy="{_f(rpy[0])} {_f(rpy[1])} {_f(rpy[2])}"/>\n']
        if not row.fixed:
            lower, upper = positions[k]
            joint.append('    <axis xyz="0 0 1"/>\n'
                         f'    <limit lower="{_f(lower)}" upper="{_f(upper)}" '
                         f'effort="{_f(efforts[k])}" velocity="{_f(velocities[k])}"/>\n')
            k += 1
        joint.append("  </joint>\n")
        parts.extend(joint)
    parts.append("</robot>\n")
    return "".join(parts)
