"""The known model of an arm's own efforts (:class:`LinkTorqueModel`): ``e = s (Y pi_links) +
F(qd) phi``, from a URDF's inertials or the document ``inertial-id identify-links`` writes.

Each body's ``pi`` is about its joint frame, in its axes (the
:mod:`inertial_id.core.joint_torque.links`
convention), SI units; efforts, friction coefficients and ``joint_sigma`` in effort units,
``effort_scale`` ``s`` in effort units per N m; joints in the model's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import ModelError
from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_model import LinkModel


@dataclass(frozen=True)
class LinkTorqueModel:
    """A known model of an arm's own efforts: ``e = s (Y pi_links) + F(qd) phi``.

    ``standard`` (n, 10): each body's ``pi`` about its joint frame (the convention of
    :mod:`inertial_id.core.joint_torque.links`); ``friction``/``coefficients``: the friction model
    and its coefficients (effort units); ``effort_scale`` ``s`` (effort per N m); ``joint_sigma``
    (effort units): the residual std per joint, the weights' scale.
    """

    model: LinkModel
    standard: NDArray[np.float64]
    friction: FrictionModel
    coefficients: NDArray[np.float64]
    effort_scale: NDArray[np.float64]
    joint_sigma: NDArray[np.float64]

    @classmethod
    def from_urdf(cls, urdf: str, joints: list[str] | None = None,
                  locked: Mapping[str, float] | None = None,
                  joint_sigma: ArrayLike | None = None,
                  drive_gains: Mapping[str, float] | None = None) -> LinkTorqueModel:
        """The URDF's inertials, no friction; efforts in N m, or in drive units for the joints
        of ``drive_gains`` (N m per effort unit: ``s = 1 / gain``)."""
        model = LinkModel(urdf, joints=joints, locked=locked)
        gains = dict(drive_gains or {})
        unknown = sorted(set(gains) - set(model.joint_names))
        if unknown or any(not g > 0 for g in gains.values()):
            raise ModelError(f"drive gains must be > 0 and for moving joints; got {gains}")
        scale = np.array([1.0 / gains.get(n, 1.0) for n in model.joint_names])
        none = FrictionModel(coulomb="none", viscous=False, offset=False)
        sigma = np.ones(model.n) if joint_sigma is None else np.asarray(joint_sigma, float)
        return cls(model, model.cad.copy(), none, np.zeros(0), scale, sigma)

    @classmethod
    def from_document(cls, doc: Mapping[str, Any], urdf: str | None = None) -> LinkTorqueModel:
        """From the YAML document ``inertial-id identify-links`` writes (its ``urdf`` unless
        ``urdf`` is given; the method must have given standard parameters: sdp, qp)."""
        if "links" not in doc:
            raise ModelError("the link model has no 'links' (identify it with sdp or qp)")
        model = LinkModel(urdf or str(doc["urdf"]), joints=list(doc["joints"]),
                          locked=dict(doc.get("locked", {})))
        if list(doc["joints"]) != model.joint_names:
            raise ModelError(f"the link model's joints {doc['joints']} are not the URDF's "
                             f"chain {model.joint_names}")
        by_joint = {entry["joint"]: entry["pi_joint_frame"] for entry in doc["links"].values()}
        standard = np.array([by_joint[name] for name in model.joint_names], dtype=float)
        friction = FrictionModel.from_settings(doc["friction_model"])
        coefficients = np.array([doc["friction"][joint][term]
                                 for joint in model.joint_names for term in friction.terms],
                                dtype=float)
        scale = np.array([doc["effort_scale"][n] for n in model.joint_names], dtype=float)
        sigma = np.array([doc["joint_sigma"][n] for n in model.joint_names], dtype=float)
        if not (np.all(np.isfinite(scale)) and np.all(scale != 0)
                and np.all(np.isfinite(sigma)) and np.all(sigma > 0)):
            raise ModelError("the link model's effort scales must be finite and non-zero, its "
                             "joint sigmas finite and positive")
        return cls(model, standard, friction, coefficients, scale, sigma)

    @classmethod
    def from_file(cls, path: str | Path, urdf: str | None = None) -> LinkTorqueModel:
        """:meth:`from_document` of a YAML file; one :class:`ModelError` line for a file that
        cannot be read or is not a usable link model."""
        path = Path(path).expanduser()
        try:
            doc = yaml.safe_load(path.read_text(encoding="utf-8"))
            if not isinstance(doc, dict):
                raise ModelError("not a YAML mapping")
            return cls.from_document(doc, urdf)
        except (OSError, UnicodeDecodeError, yaml.YAMLError, KeyError, TypeError, ValueError,
                AttributeError, ModelError) as exc:
            raise ModelError(f"{path}: not a usable link model ({type(exc).__name__}: {exc})"
                             ) from exc

    def at_sample_period(self, period: float) -> LinkTorqueModel:
        """The same model for rows ``period`` s apart (the step of a direction-memory friction
        state; without memory the model itself)."""
        if not self.friction.memory:
            return self
        return replace(self, friction=replace(self.friction, sample_period=float(period)))

    def efforts(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike,
                initial: ArrayLike | None = None) -> NDArray[np.float64]:
        """Predicted efforts (N, nv) of the arm alone; rows in time order when the friction
        has direction memory, continuing from its state ``initial`` (default 0)."""
        return self.rigid_efforts(q, qd, qdd) + self.friction_efforts(qd, qdd, initial)

    def rigid_efforts(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike) -> NDArray[np.float64]:
        """The rigid-body part of the efforts, ``s (Y pi_links)`` (N, nv)."""
        rigid = np.einsum("njp,p->nj", self.model.regressor(q, qd, qdd), self.standard.ravel())
        return self.effort_scale * rigid

    def friction_efforts(self, qd: ArrayLike, qdd: ArrayLike,
                         initial: ArrayLike | None = None) -> NDArray[np.float64]:
        """The friction and offset part of the efforts (N, nv) (``initial``: the direction
        memory's state before the first row, see :meth:`efforts`)."""
        if self.coefficients.size == 0:
            return np.zeros_like(np.atleast_2d(np.asarray(qd, dtype=float)))
        return np.einsum("njf,f->nj", self.friction.regressor(qd, qdd, initial),
                         self.coefficients)

    def dissipative_efforts(self, qd: ArrayLike, qdd: ArrayLike,
                            initial: ArrayLike | None = None) -> NDArray[np.float64]:
        """The friction alone (Coulomb and viscous; no offset, no armature) of the efforts
        (N, nv), as :meth:`friction_efforts`."""
        if self.coefficients.size == 0:
            return np.zeros_like(np.atleast_2d(np.asarray(qd, dtype=float)))
        terms = self.friction.terms
        dissipative = np.tile([t not in ("offset", "Ia") for t in terms], self.model.n)
        return np.einsum("njf,f->nj", self.friction.regressor(qd, qdd, initial),
                         np.where(dissipative, self.coefficients, 0.0))

    @property
    def drive_friction(self) -> FrictionModel:
        """The friction model to fit on new data: the model's own, or viscous + smooth
        Coulomb (``tanh(qd / 0.03)``) + offset when it has none."""
        if self.coefficients.size:
            return self.friction
        return FrictionModel(coulomb="symmetric", smooth=True, velocity_threshold=0.03)

    def refit_drive_terms(self, q: ArrayLike, qd: ArrayLike, qdd: ArrayLike,
                          effort: ArrayLike, friction: FrictionModel | None = None
                          ) -> LinkTorqueModel:
        """The same rigid bodies, friction/offsets (``friction``, default the model's own
        or viscous + smooth Coulomb + offset when it has none) re-fitted per joint by least
        squares on an unloaded recording, and ``joint_sigma`` from its residual."""
        friction = friction or self.drive_friction
        q, qd, qdd, effort = self.model.batch(q, qd, qdd, effort)
        rigid = self.rigid_efforts(q, qd, qdd)
        columns = friction.regressor(qd, qdd)
        per_joint = len(friction.terms)
        coefficients = np.zeros(self.model.n * per_joint)
        sigma = np.zeros(self.model.n)
        for j in range(self.model.n):
            cols = slice(j * per_joint, (j + 1) * per_joint)
            a = columns[:, j, cols]
            target = effort[:, j] - rigid[:, j]
            coefficients[cols] = np.linalg.lstsq(a, target, rcond=None)[0]
            residual = target - a @ coefficients[cols]
            sigma[j] = np.sqrt(np.mean(residual ** 2))
        return replace(self, friction=friction, coefficients=coefficients,
                       joint_sigma=np.maximum(sigma, 1e-12))
