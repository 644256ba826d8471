"""Joint friction and offsets, linear in their coefficients (effort units): the friction part
``F_j(qd) phi_j`` of the joint model of :mod:`inertial_id.core.joint_torque.links`."""


from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError, SampleError

# ------------------------------------------------------------------------------- friction


COULOMB_MODELS = ("asymmetric", "symmetric", "none")


@dataclass(frozen=True)
class FrictionModel:
    """Friction and offset per joint, linear in its coefficients (effort units).

    - ``coulomb="asymmetric"`` (Traversaro et al. 2013): ``fc+ [qd > v0] - fc- [qd < -v0]``,
      separate levels for positive and negative motion (both positive when dissipative);
      ``"symmetric"``: ``fc sign(qd)`` (zero inside the dead band ``v0``);
    - ``viscous``: ``fv qd``; ``offset``: a constant ``o`` (sensor or controller bias);
    - ``armature``: ``Ia qdd``, the reflected rotor inertia of the drive (needs ``qdd``);
      it is collinear with a base parameter when that one only multiplies ``qdd_j`` (the
      axis inertia of the first joint, typically): then only their sum is identifiable.

    Without rest samples (``|qd| <= v0``) ``fc+``, ``fc-`` and ``o`` are collinear: only
    ``fc+ + o`` and ``fc- - o`` are identifiable (the statistics then report an infinite
    sigma for them); use ``symmetric`` with an offset, the same model, for such data.
    ``velocity_threshold`` is ``v0`` (rad/s or m/s). With ``smooth`` the sign is
    ``tanh(qd / v0)`` instead of the dead band (``fc+ max(tanh, 0) + fc- min(tanh, 0)`` when
    asymmetric): a continuous Coulomb term, less sensitive to the velocity noise near rest.

    **Direction memory** (``presliding`` ``x0`` > 0, rad or m): the sign is replaced by a
    state ``z`` in [-1, 1] that keeps the direction of the last motion through rest (the
    assumption: a held joint keeps the friction level it last overcame; presliding
    hysteresis). ``z`` follows Dahl's model ``dz/dx = (1 - z sign(dx)) / x0`` in the joint
    displacement ``x``, integrated exactly per row: with ``d = qd sample_period`` (zero
    inside the dead band ``|qd| <= v0``, so velocity noise at rest leaves ``z`` alone),
    ``z[n] = sign(d) - (sign(d) - z[n-1]) exp(-|d| / x0)``, ``z[-1] = 0`` (direction unknown
    before the first row). A displacement of a few ``x0`` in one direction takes ``z`` to
    that sign; reversing moves it continuously to the other. Asymmetric:
    ``fc+ max(z, 0) + fc- min(z, 0)``. The regressor then depends on the history: its
    ``qd`` rows must be **one record in time order at ``sample_period``** (a subset of a
    problem keeps the states computed on the whole record, see
    :meth:`LinkIdentification.subset`; :meth:`LinkIdentification.with_friction` recomputes
    them from its own first row). With ``smooth`` as well the sign is
    ``m + (1 - |m|) z``, ``m = tanh(qd / v0)``: the tanh while moving, the memory near rest.

    **Memory at rest only** (``rest_time`` ``T`` > 0, s, ``presliding`` 0): the sign is
    ``m + (1 - |m|) d w`` with ``m`` the Coulomb term's own sign (dead band or tanh), ``d`` the
    sign of the last row beyond ``v0`` and ``w = clip(s / T - 1, 0, 1)``, ``s`` the time (s)
    since that row: a joint standing still keeps its last direction's Coulomb level once it
    has stood for ``2 T``, while a velocity reversal (inside ``v0`` for less than ``T``) keeps
    the memory-free shape exactly. Its state (:meth:`state_after`) is ``[d, s]`` per joint (2, nv).
    """

    coulomb: str = "asymmetric"
    viscous: bool = True
    offset: bool = True
    velocity_threshold: float = 1e-3
    armature: bool = False
    smooth: bool = False
    presliding: float = 0.0
    sample_period: float = 0.01
    rest_time: float = 0.0

    def __post_init__(self) -> None:
        if self.coulomb not in COULOMB_MODELS:
            raise InertialIdError(f"unknown Coulomb model {self.coulomb!r}: {COULOMB_MODELS}")
        if self.smooth and not self.velocity_threshold > 0:
            raise InertialIdError("a smooth Coulomb term needs a velocity scale v0 > 0")
        if self.presliding < 0:
            raise InertialIdError("the presliding displacement of the memory must be >= 0")
        if self.rest_time < 0:
            raise InertialIdError("the rest time of the memory at rest must be >= 0")
        if self.presliding > 0 and self.rest_time > 0:
            raise InertialIdError("give a presliding x0 or a rest time, not both")
        if (self.presliding > 0 or self.rest_time > 0) and not self.sample_period > 0:
            raise InertialIdError("direction memory needs a sample period > 0")

    def settings(self) -> dict[str, str | bool | float]:
        """The model as plain values (the link model YAML's ``friction_model``)."""
        return {"coulomb": self.coulomb, "viscous": self.viscous, "offset": self.offset,
                "armature": self.armature, "smooth": self.smooth,
                "velocity_threshold": self.velocity_threshold,
                "presliding": self.presliding, "sample_period": self.sample_period,
                "rest_time": self.rest_time}

    @classmethod
    def from_settings(cls, values: Mapping[str, object]) -> FrictionModel:
        """The model of :meth:`settings` (a document without ``presliding`` has no memory)."""
        return cls(str(values["coulomb"]), bool(values["viscous"]), bool(values["offset"]),
                   float(values["velocity_threshold"]), bool(values["armature"]),
                   bool(values["smooth"]), float(values.get("presliding", 0.0)),
                   float(values.get("sample_period", 0.01)),
                   float(values.get("rest_time", 0.0)))

    def direction(self, qd: ArrayLike, initial: ArrayLike | None = None
                  ) -> NDArray[np.float64]:
        """The direction-memory state ``z`` (N, nv) of velocity rows in time order (see the
        class docstring); starts from ``initial`` (nv,), the state before the first row
        (default 0: direction unknown), so a record processed in consecutive chunks gets the
        states of the whole."""
        qd = np.atleast_2d(np.asarray(qd, dtype=float))
        step = np.where(np.abs(qd) > self.velocity_threshold, qd * self.sample_period, 0.0)
        sign = np.sign(step)
        decay = np.exp(-np.abs(step) / self.presliding)
        z = np.zeros_like(qd)
        state = (np.zeros(qd.shape[1]) if initial is None
                 else np.asarray(initial, dtype=float).reshape(qd.shape[1]))
        for n in range(qd.shape[0]):
            state = sign[n] - (sign[n] - state) * decay[n]
            z[n] = state
        return z

    def _rest_direction(self, qd: NDArray[np.float64], initial: ArrayLike | None
                        ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The memory at rest's ``d w`` (N, nv) and its state ``[d, s]`` (2, nv) after the
        last row (class docstring), from ``initial`` (default: no direction, moving)."""
        n, nv = qd.shape
        state = (np.zeros((2, nv)) if initial is None
                 else np.asarray(initial, dtype=float).reshape(2, nv).copy())
        moving = np.abs(qd) > self.velocity_threshold
        out = np.zeros_like(qd)
        for k in range(n):
            state[0] = np.where(moving[k], np.sign(qd[k]), state[0])
            state[1] = np.where(moving[k], 0.0, state[1] + self.sample_period)
            out[k] = state[0] * np.clip(state[1] / self.rest_time - 1.0, 0.0, 1.0)
        return out, state

    def state_after(self, qd: ArrayLike, initial: ArrayLike | None = None
                    ) -> NDArray[np.float64]:
        """The memory's state after velocity rows ``qd`` in time order, from ``initial``:
        ``z`` (nv,) of the direction memory, ``[d, s]`` (2, nv) of the memory at rest (the
        ``initial`` of the next rows)."""
        qd = np.atleast_2d(np.asarray(qd, dtype=float))
        if self.rest_time > 0:
            return self._rest_direction(qd, initial)[1]
        return self.direction(qd, initial)[-1]

    def with_rest_time(self, rest_time: float) -> FrictionModel:
        """The same model with memory at rest only, after ``rest_time`` s (0: none)."""
        return replace(self, presliding=0.0, rest_time=float(rest_time))

    @property
    def terms(self) -> list[str]:
        """Names of the per-joint coefficients, in column order."""
        names = {"asymmetric": ["fc+", "fc-"], "symmetric": ["fc"], "none": []}[self.coulomb]
        return (names + (["fv"] if self.viscous else []) + (["offset"] if self.offset else [])
                + (["Ia"] if self.armature else []))

    def names(self, joints: Sequence[str]) -> list[str]:
        """``joint.term`` for every column (joint-major)."""
        return [f"{j}.{t}" for j in joints for t in self.terms]

    def with_presliding(self, presliding: float) -> FrictionModel:
        """The same model with direction memory of presliding ``x0`` (0: none; either way
        no memory at rest only)."""
        return replace(self, presliding=float(presliding), rest_time=0.0)

    @property
    def memory(self) -> bool:
        """Whether the Coulomb sign has direction memory (the regressor depends on history)."""
        return (self.presliding > 0 or self.rest_time > 0) and self.coulomb != "none"

    def regressor(self, qd: ArrayLike, qdd: ArrayLike | None = None,
                  initial: ArrayLike | None = None) -> NDArray[np.float64]:
        """(N, nv) velocities (and accelerations) -> (N, nv, nv * terms), block-diagonal.

        With direction memory the rows are one record in time order (class docstring),
        continuing from the state ``initial`` (:meth:`direction`)."""
        qd = np.atleast_2d(np.asarray(qd, dtype=float))
        n, nv = qd.shape
        if self.rest_time > 0 and self.memory:
            moving = (np.tanh(qd / self.velocity_threshold) if self.smooth
                      else np.sign(qd) * (np.abs(qd) > self.velocity_threshold))
            sign = moving + (1.0 - np.abs(moving)) * self._rest_direction(qd, initial)[0]
            moving_up, moving_down = np.clip(sign, 0.0, None), np.clip(-sign, 0.0, None)
        elif self.smooth or self.presliding > 0:
            if self.memory:
                sign = self.direction(qd, initial)
                if self.smooth:
                    moving = np.tanh(qd / self.velocity_threshold)
                    sign = moving + (1.0 - np.abs(moving)) * sign
            else:
                sign = np.tanh(qd / self.velocity_threshold)
            moving_up, moving_down = np.clip(sign, 0.0, None), np.clip(-sign, 0.0, None)
        else:
            moving_up = (qd > self.velocity_threshold).astype(float)
            moving_down = (qd < -self.velocity_threshold).astype(float)
        columns = []
        if self.coulomb == "asymmetric":
            columns += [moving_up, -moving_down]
        elif self.coulomb == "symmetric":
            columns.append(moving_up - moving_down)
        if self.viscous:
            columns.append(qd)
        if self.offset:
            columns.append(np.ones_like(qd))
        if self.armature:
            if qdd is None:
                raise SampleError("the armature term needs accelerations")
            columns.append(np.atleast_2d(np.asarray(qdd, dtype=float)))
        k = len(columns)
        out = np.zeros((n, nv, nv * k))
        for j in range(nv):
            for c, column in enumerate(columns):
                out[:, j, j * k + c] = column[:, j]
        return out
