"""A link identification as documents (plain dicts for JSON or YAML): per link its own
parameters in its link frame and the body's ``pi`` about the joint frame
(:func:`link_document`), and the base parameters with sigma %, friction per joint and the
effort scales (:func:`estimate_document`). SI units; friction in effort units.
"""


from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.joint_torque.link_model import LinkModel
from inertial_id.core.joint_torque.links.estimate import LinkEstimate
from inertial_id.core.joint_torque.links.identification import LinkIdentification
from inertial_id.core.parameters import BodyParameters, min_pseudo_inertia_eigenvalue


def link_document(model: LinkModel, standard: NDArray[np.float64]) -> dict:
    """Per identified link: own parameters in its link frame (as written to the URDF) and the
    body's ``pi`` about the joint frame with its consistency."""
    out = {}
    for i, link in enumerate(model.link_names):
        own = standard[i] - model.attachments[i]
        body = BodyParameters.from_pi(own)
        entry = {
            "joint": model.joint_names[i],
            "mass": float(body.mass),
            "pi_joint_frame": [float(v) for v in standard[i]],
            "physically_consistent": bool(body.is_physically_consistent()),
            "min_pseudo_inertia_eigenvalue": min_pseudo_inertia_eigenvalue(own),
            "body_physically_consistent": bool(
                BodyParameters.from_pi(standard[i]).is_physically_consistent()),
        }
        if body.mass > 0:
            entry["com"] = [float(v) for v in body.com]
            ic = body.inertia_com
            entry["inertia_com"] = [float(ic[a, b]) for a, b in
                                    ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))]
        out[link] = entry
    return out


def estimate_document(problem: LinkIdentification, estimate: LinkEstimate,
                      max_relative_std: float = 10.0) -> dict:
    """Base parameters with sigma %, friction per joint, effort scales."""
    nb = problem.base.count
    rel, std = estimate.relative_std, estimate.std
    base = [{"name": name, "value": float(estimate.base[k]), "std": float(std[k]),
             "relative_std_percent": float(rel[k]),
             "identifiable": bool(rel[k] <= max_relative_std)}
            for k, name in enumerate(problem.base_names)]
    friction: dict[str, dict[str, float]] = {}
    for k, name in enumerate(problem.friction_names):
        joint, term = name.rsplit(".", 1)
        friction.setdefault(joint, {})[term] = float(estimate.friction[k])
        friction[joint][f"{term}_relative_std_percent"] = float(rel[nb + k])
    names = problem.model.joint_names
    return {
        "base_parameters": base,
        "friction": friction,
        "effort_scale": {n: float(s) for n, s in zip(names, estimate.effort_scale, strict=True)},
        "drive_gain": {n: (float(1.0 / s) if s != 0 else None)
                       for n, s in zip(names, estimate.effort_scale, strict=True)},
        "joint_sigma": {n: float(s) for n, s in zip(names, estimate.joint_sigma, strict=True)},
    }
