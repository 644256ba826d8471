"""What the replay report draws and tabulates, taken from a replay result and its ground
truth: times as seconds since the bag's first message, mass (kg), CoM (mm) and the CoM-inertia
diagonal (kg m^2) with first-order std, the true payload over time, and the measured against
the predicted wrench (N, N m; sensor frame) of the final estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.regressor import predicted_wrench

if TYPE_CHECKING:
    from inertial_id.tools.replay import ReplayResult


WRENCH_NAMES = ("fx", "fy", "fz", "tx", "ty", "tz")


def since_first_message(times: Sequence[float], result: ReplayResult) -> NDArray[np.float64]:
    """Stamps (s) as seconds since the bag's first message."""
    return np.asarray(times, dtype=float).reshape(-1) - float(result.start_time)


def derived_series(pi: NDArray[np.float64], std: NDArray[np.float64]
                   ) -> dict[str, NDArray[np.float64]]:
    """Mass (kg), CoM (mm) and CoM-inertia diagonal (kg m^2) per row of ``pi`` (K, 10), with
    first-order standard deviations from ``std`` (K, 10), entries taken as uncorrelated.

    ``com = h / m``; ``I_com,xx = Ixx - (hy^2 + hz^2) / m`` (and cyclic). Rows with ``m <= 0``
    give NaN.
    """
    pi = np.atleast_2d(pi)
    std = np.atleast_2d(std)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(pi[:, 0] > 0.0, pi[:, 0], np.nan)[:, None]
        h, sm, sh = pi[:, 1:4], std[:, :1], std[:, 1:4]
        com = h / m
        com_std = np.hypot(sh / m, h * sm / m**2)
        diag_o = pi[:, [4, 7, 9]]
        others = ((1, 2), (0, 2), (0, 1))
        inertia = np.stack([diag_o[:, i] - (h[:, j]**2 + h[:, k]**2) / m[:, 0]
                            for i, (j, k) in enumerate(others)], axis=1)
        inertia_std = np.stack([np.sqrt(
            std[:, [4, 7, 9][i]]**2 + (2 * h[:, j] * sh[:, j] / m[:, 0])**2
            + (2 * h[:, k] * sh[:, k] / m[:, 0])**2
            + ((h[:, j]**2 + h[:, k]**2) * sm[:, 0] / m[:, 0]**2)**2)
            for i, (j, k) in enumerate(others)], axis=1)
    return {"mass": m[:, 0], "mass_std": sm[:, 0], "com_mm": 1e3 * com,
            "com_mm_std": 1e3 * com_std, "inertia": inertia, "inertia_std": inertia_std}


def truth_segments(truth: dict[str, Any] | None) -> list[tuple[float, float, dict[str, Any]]]:
    """``(from s, to s, payload)``: the true payload over time (a step at a payload change)."""
    if not truth or "payload" not in truth:
        return []
    change = truth.get("payload_change")
    if change:
        t = float(change["time"])
        return [(-np.inf, t, truth["payload"]), (t, np.inf, change["payload"])]
    return [(-np.inf, np.inf, truth["payload"])]


def final_truth(truth: dict[str, Any] | None) -> dict[str, Any] | None:
    """The payload carried at the end of the bag (the one the final estimate is of)."""
    segments = truth_segments(truth)
    return segments[-1][2] if segments else None


def truth_value(payload: dict[str, Any], quantity: str, axis: int) -> float:
    """The true mass (kg), CoM (mm) or CoM-inertia diagonal entry (kg m^2) of a payload."""
    if quantity == "mass":
        return float(payload["mass"])
    if quantity == "com_mm":
        return 1e3 * float(payload["com"][axis])
    return float(payload["inertia_com"][(0, 3, 5)[axis]])


def truth_pi(truth: dict[str, Any] | None, t: float) -> NDArray[np.float64]:
    """The true ``pi`` at ``t`` s since the first message."""
    for start, end, payload in truth_segments(truth):
        if start <= t < end:
            return np.asarray(payload["pi"], dtype=float)
    return np.asarray(truth_segments(truth)[-1][2]["pi"], dtype=float)


def final_fit(result: ReplayResult) -> tuple[NDArray[np.float64], ...] | None:
    """Times (s since the first message), measured (raw) and predicted wrench (N, 6) of the
    samples the history kept, predicted with the final estimate; None without one."""
    h, e = result.pipeline.history, result.estimate
    if e is None or not h.sample_time:
        return None
    t = np.concatenate(h.sample_time)
    rows = np.concatenate(h.sample_rows)
    predicted = predicted_wrench(e.pi, rows[:, :6], rows[:, 6:12], e.offset,
                                 result.pipeline.online.identifier.sign)
    return since_first_message(t, result), rows[:, 12:], predicted
