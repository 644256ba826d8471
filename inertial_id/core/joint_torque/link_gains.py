"""The drive gains' refinement chosen from the data (part of :func:`identify_links
<inertial_id.core.joint_torque.link_selection.identify_links>`).

The nominal effort scales ``s0_j`` (effort per N m: 1 for efforts published in N m through
the drive's nominal gain, or the CAD fit's with ``fit_gains``) can be a few % off each
joint's true one; the rigid bodies cannot take a different scale per joint, so a joint whose
gain is off keeps a model error (a simulated arm: 2.9 % on its shoulder, held-out error 11 %
above the truth model's, 1 % with the true gains). The candidates are:

- the nominal scales (no refinement);
- every scale not known refined jointly with the links
  (:func:`~inertial_id.core.joint_torque.links.gains.anchored_scales`: weighted least squares, the
  scales projected out), with a Gaussian prior on ``log(s_j / s0_j)`` of std ``sigma_g`` from
  :data:`GAIN_STDS` (relative). Without a known gain the geometric mean of the refined scales
  is held at the nominal one (efforts never fix the common scale, which sets a payload's
  mass); with known gains (``--drive-gain``) they anchor it and the others move freely
  under the prior.

Each candidate is scored like the other choices
(:func:`~inertial_id.core.joint_torque.link_selection.
cross_validated_rms`: time blocks of the record, or the fit on the whole record predicting
other recordings) and the best kept if it beats the nominal gains by :data:`MARGIN`. The
prior keeps the scales whose torques the trajectory hardly excites (a wrist's) near their
nominal value: without it (``sigma_g``
unbounded) a simulated spherical-wrist arm's last scale moved to x0.65 of the truth (the
others by 4-17 %), the held-out score 0.18 % better than with ``sigma_g`` 0.03, and the
payload's mass from the pair with those gains came out 11 % low (-4.2 % with ``sigma_g`` 0.1,
-2.0 % with 0.03; identify-payload now refits the ratios on the pair,
:mod:`inertial_id.core.joint_torque.link_pair_gains`). The grid therefore stops at 3 %, the size of
the gain errors it is meant for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.joint_torque.link_validation import FOLDS, cross_validated_rms, score
from inertial_id.core.joint_torque.links import LinkEstimate, LinkIdentification
from inertial_id.core.joint_torque.links.gains import refined_least_squares

GAIN_STDS = (0.003, 0.01, 0.03)
"""Relative std ``sigma_g`` of the drive gains' prior (candidates of :func:`choose_gains`;
0, the nominal gains, is always a candidate)."""
MARGIN = 1e-3
"""Relative improvement of the held-out score below which :func:`choose_gains` keeps the
nominal gains: a refinement adds a free parameter per joint, and on efforts that are exact
torques (the bundled simulator) the four candidates scored within 2e-5 of each other, the
best moving the gains by 0.2 % and the payload's mass from the links model by 0.14 %; on the
simulated motor-current arms the refinement chosen improved the score by 0.9-2.3 %."""

UNIT_RATIO = 2.0
"""A joint's nominal effort scale cannot explain its efforts (another unit, a gear ratio, a
reversed sign) when the CAD fit's RMS with it exceeds this many times the RMS with the scale
fitted (:func:`scales_to_fit`). Gains a few % off move that ratio by a few %; on TIAGo's
driver units (CAD fit scales 0.0009-0.13, five negative) it was 1.55 and 1.79 on the torso and
the first arm joint, 7.9-221 on the six others."""


def scales_to_fit(problem: LinkIdentification, fit_gains: bool, from_data: bool = True
                  ) -> tuple[NDArray[np.bool_], list[dict]]:
    """The joints whose effort scale the CAD fit fits (the nominal scales of the other
    choices): every joint not known with ``fit_gains``; none without ``from_data``; else all
    of them when the nominal scales cannot explain the efforts of half or more of the joints
    not known (:data:`UNIT_RATIO`: the efforts are in the driver's units, not N m; a driver
    publishes all its joints alike, while one joint alone may be where the CAD model is
    wrong), none otherwise. With a table per joint of the CAD fit's RMS (effort units) with
    the nominal and the fitted scale, the fitted scale (effort per N m or N), whether the
    nominal one fails and whether it is fitted."""
    if fit_gains or not from_data:
        return ~problem.known_scale & fit_gains, []
    fitted = problem.fit_cad(fit_scale=True)
    rms_fitted = problem.rms(fitted)
    rms_nominal = problem.rms(problem.fit_cad(fit_scale=False))
    unexplained = (rms_nominal > UNIT_RATIO * rms_fitted) & ~problem.known_scale
    unknown = int(np.count_nonzero(~problem.known_scale))
    fit = ~problem.known_scale & (2 * int(np.count_nonzero(unexplained)) >= max(unknown, 1))
    table = [{"joint": name, "rms_nominal": float(a), "rms_fitted": float(b),
              "scale_fitted": float(s), "unexplained": bool(u), "fitted": bool(f)}
             for name, a, b, s, u, f in zip(problem.model.joint_names, rms_nominal,
                                            rms_fitted, fitted.effort_scale, unexplained, fit,
                                            strict=True)]
    return fit, table


def refined_scales(problem: LinkIdentification, gain_std: float) -> NDArray[np.float64]:
    """``problem``'s effort scales with every scale not known refined under a prior of
    relative std ``gain_std`` (0: the problem's own), anchored as the module docstring
    says."""
    if gain_std <= 0 or problem.known_scale.all():
        return problem.effort_scale.copy()
    refined = ~problem.known_scale
    anchor = not problem.known_scale.any()
    return refined_least_squares(problem, refined, gain_std=gain_std,
                                 anchor=anchor).effort_scale


def _fit(gain_std: float) -> Callable[[LinkIdentification], LinkEstimate]:
    """The WLS fit of candidate ``gain_std`` (:func:`refined_scales`' refinement)."""
    def fit(p: LinkIdentification) -> LinkEstimate:
        if gain_std <= 0 or p.known_scale.all():
            return p.weighted_least_squares()
        return refined_least_squares(p, ~p.known_scale, gain_std=gain_std,
                                     anchor=not p.known_scale.any())
    return fit


def choose_gains(problem: LinkIdentification, gain_stds: Sequence[float] = GAIN_STDS,
                 folds: int = FOLDS, guard: int = 0,
                 others: Sequence[LinkIdentification] = ()
                 ) -> tuple[float, NDArray[np.float64], list[dict]]:
    """The prior std of best score among 0 (the nominal scales) and ``gain_stds`` (0 unless
    the best improves on it by more than :data:`MARGIN`, relative), the effort scales it gives
    on the whole of ``problem``, and a table of every candidate's ``gain_std``, per-joint RMS
    (effort units) and score."""
    table = []
    for gain_std in (0.0, *gain_stds):
        rms = cross_validated_rms(problem, _fit(gain_std), folds, guard, others)
        table.append({"gain_std": float(gain_std), "score": score(rms), "rms": rms.tolist()})
    best = min(range(len(table)), key=lambda k: table[k]["score"])
    if table[best]["score"] > (1.0 - MARGIN) * table[0]["score"]:
        best = 0
    gain_std = table[best]["gain_std"]
    return gain_std, refined_scales(problem, gain_std), table
