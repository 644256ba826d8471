"""``inertial-id demo --apply ur``: the loop from identification to the robot and back.

The simulator stands in for a UR driver (``driver: ur``, :mod:`inertial_id.nodes.ur_driver`),
the applier (``target: ur``, ``auto_apply``) sends the converged payload A to it, and from then
on the simulated wrench is compensated for A, as a UR's is. The solver adds A back
(:mod:`inertial_id.nodes.compensation`) and keeps publishing A. :class:`ApplyLoop` then mounts
payload B (``~/change_payload``), which the solver identifies as B and the applier applies;
if the solver has not seen the change :data:`DETECT` s after the mount, the loop resets it, as
a user would after a tool change.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rclpy.parameter import Parameter

from inertial_id.core.errors import InertialIdError
from inertial_id.core.simulation import bundled_urdf_path
from inertial_id.msg import InertialParameters
from inertial_id.nodes.applier import Applier
from inertial_id.nodes.requests import service_type
from inertial_id.nodes.simulator import Simulator
from inertial_id.nodes.solver import Solver
from inertial_id.nodes.ur_driver import SERVICE_TYPE

HOLD = 3.0
"""s the loop shows the estimate staying the payload after an apply before it mounts B."""
DETECT = 4.0
"""s after the mount within which the solver is expected to see the new payload by itself."""
BUILD_HINT = ("source a workspace that has it (the UR driver's), or, in a source checkout, "
              "build the test copy: python test/interface_packages.py --env > ur_msgs.env "
              "&& . ./ur_msgs.env")


def missing_interface() -> str:
    """"" when ``ur_msgs/srv/SetPayload`` can be loaded, else one line naming what is missing
    and how to get it."""
    try:
        service_type(SERVICE_TYPE)
    except InertialIdError:
        return (f"inertial-id demo --apply ur needs {SERVICE_TYPE} (package ur_msgs), which "
                f"is not installed: {BUILD_HINT}")
    return ""


def applier(directory: Path) -> Applier:
    """The demo's applier: UR, automatic, quick gates, the record in ``directory``."""
    return Applier(parameter_overrides=[Parameter(k, value=v) for k, v in {
        "target": "ur", "urdf_path": bundled_urdf_path(), "auto_apply": True,
        "stable_s": 1.5, "min_interval": 2.0,
        "applied_file": str(directory / "applied.yaml")}.items()])


@dataclass
class ApplyLoop:
    """Follows the applies, mounts B once A has stayed the estimate for :data:`HOLD` s after
    its last apply (the applier may refine A first: on a loaded machine it re-applied A 4 s
    after the first apply), and says each step in one line."""

    simulator: Simulator
    applier: Applier
    solver: Solver
    print_line: Callable[[str], None]
    applied_at: list[float] = field(default_factory=list)  # monotonic s of each apply
    mounted_at: float | None = None
    _applied_before_mount: int = 0  # applies of A
    _changes: int = 0  # the solver's payload changes at the mount
    _reset: bool = False

    @property
    def b_applied_at(self) -> float | None:
        """Monotonic s of the first apply after B was mounted (None: not yet)."""
        if self.mounted_at is None or len(self.applied_at) <= self._applied_before_mount:
            return None
        return self.applied_at[self._applied_before_mount]

    @property
    def done(self) -> bool:
        """B was identified and applied, and :data:`HOLD` s have shown the estimate after."""
        applied = self.b_applied_at
        return applied is not None and time.monotonic() - applied >= HOLD

    def residual_force(self) -> float:
        """N: the simulated wrench's force less the bias, now (no noise): the payload's weight
        before an apply, the residual after."""
        sim = self.simulator.sim
        wrench = sim.wrench(np.array([self.simulator.elapsed()]), noise=False)[0]
        return float(np.linalg.norm(wrench[:3] - sim.offset[:3]))

    def status(self) -> str:
        """The driver's payload and the wrench it publishes, for the progress line."""
        received = self.simulator.driver.received if self.simulator.driver else []
        held = f"{received[-1][0].mass:.3f} kg" if received else "nothing"
        return f"  | driver subtracts {held}, |F - bias| {self.residual_force():5.2f} N"

    def step(self, latest: InertialParameters | None) -> None:
        """One look at the loop (the monitor's period)."""
        now = time.monotonic()
        if self.applier.counts["applied"] > len(self.applied_at):
            self.applied_at.append(now)
            body, _ = self.simulator.driver.received[-1]
            self.print_line(
                f"applied to the UR driver: {body.mass:.4f} kg, CoG ["
                + ", ".join(f"{c * 1e3:.1f}" for c in body.com) + "] mm in tool0; its wrench "
                "is now compensated for it, and the solver adds it back")
        if self.applied_at and self.mounted_at is None and latest is not None \
                and now - self.applied_at[-1] >= HOLD:
            self.print_line(f"the estimate stayed {latest.mass:.4f} kg after the apply "
                            f"(|F - bias| now {self.residual_force():.2f} N); tool change: "
                            + self.simulator.change_payload())
            self.mounted_at = now
            self._applied_before_mount = len(self.applied_at)
            self._changes = len(self.solver.online.payload_changes)
        elif (self.mounted_at is not None and self.b_applied_at is None and not self._reset
              and now - self.mounted_at >= DETECT
              and len(self.solver.online.payload_changes) == self._changes):
            self.solver.online.reset()
            self._reset = True
            self.print_line(f"the solver did not see the new payload within {DETECT:g} s: "
                            "reset, as after a tool change (~/reset)")
