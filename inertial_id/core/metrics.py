"""Errors of an estimate against ground truth, in the units engineers read."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from inertial_id.core.parameters import BodyParameters


@dataclass(frozen=True)
class ParameterErrors:
    """``mass_pct``: |dm| / m in %; ``com_mm``: CoM distance in mm; ``inertia_pct``: Frobenius
    norm of the error of the inertia about the CoM relative to the true one, in %."""

    mass_pct: float
    com_mm: float
    inertia_pct: float


def parameter_errors(estimate: ArrayLike, truth: ArrayLike) -> ParameterErrors:
    """Compare two ``pi`` vectors (same frame and order)."""
    est = BodyParameters.from_pi(estimate)
    ref = BodyParameters.from_pi(truth)
    return ParameterErrors(
        mass_pct=100.0 * abs(est.mass - ref.mass) / abs(ref.mass),
        com_mm=1000.0 * float(np.linalg.norm(est.com - ref.com)),
        inertia_pct=100.0 * float(np.linalg.norm(est.inertia_com - ref.inertia_com)
                                  / np.linalg.norm(ref.inertia_com)),
    )
