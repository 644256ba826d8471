"""Rows a fit should leave out: those its residual says something else acted on (a push).

A fit per phase of a recording takes whatever acted on the arm in that phase into its
parameters: a person pushing the flange for a second of a 10 s phase moves the payload's
mass by tens of percent, and the residual of that fit then looks like a contact where there
was none. Refitting on the rows a first fit explains, as the concentration steps of least
trimmed squares do (Rousseeuw and Van Driessen 2006), takes the push out of the fit while
the push stays in the residual (it is computed on every row).

:func:`quiet_rows` scores each row (stamp) by its residual over the joints, each joint's
scaled by a robust spread (1.4826 times its median absolute deviation), and keeps the rows
under the chi-square quantile of :data:`TRIM_CONFIDENCE`; rows within :data:`TRIM_MARGIN` of a
row it leaves out go too (a push rises and falls through smaller residuals).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.ndimage import binary_dilation
from scipy.stats import chi2

from inertial_id.core.estimation.anomaly import median_and_spread

TRIM_CONFIDENCE = 0.999
"""Chi-square quantile (degrees of freedom: the joints) a row's scaled residual must stay
under."""
TRIM_MARGIN = 0.25
"""s either side of a row left out that go with it."""
MIN_KEPT = 0.5
"""Share of the rows a trimmed fit must keep; fewer says the model, not a push, is off."""
TRIM_ROUNDS = 3
"""Fits at most (the first on every row)."""


def quiet_rows(residual: NDArray[np.float64], period: float,
               confidence: float = TRIM_CONFIDENCE, margin: float = TRIM_MARGIN
               ) -> NDArray[np.bool_] | None:
    """Rows of ``residual`` (N, n joints; effort units, one row per stamp ``period`` s apart)
    that nothing but noise and model error explains (module docstring); None when fewer than
    :data:`MIN_KEPT` of them are (then no row is singled out)."""
    residual = np.asarray(residual, dtype=float)
    centre, spread = median_and_spread(residual)
    spread = np.where(spread > 0.0, spread, np.inf)  # a joint that never differs says nothing
    score = np.sum(((residual - centre) / spread) ** 2, axis=1)
    loud = score > chi2.ppf(confidence, residual.shape[1])
    reach = int(round(margin / period)) if period > 0.0 else 0
    if reach > 0 and np.any(loud):
        loud = binary_dilation(loud, np.ones(2 * reach + 1, dtype=bool))
    keep = ~loud
    return keep if np.count_nonzero(keep) >= MIN_KEPT * keep.size else None
