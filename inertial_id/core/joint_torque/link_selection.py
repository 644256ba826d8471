"""Link identification with its modelling choices made from the data (the workflow of
``inertial-id identify-links`` and the solver's ``links`` mode, :func:`identify_links`):
cross-validation on contiguous time blocks of the identification record itself.

The record (N samples in time order, model joint order) is cut into ``folds`` contiguous
blocks; each block is predicted by a fit on the others, leaving out ``guard`` rows on each side
of the held-out block (filtered signals and coloured residuals reach that far, so neighbouring
rows would leak). The per-joint RMS of measured minus predicted effort is pooled over the
blocks (effort units) and a choice is scored by the **geometric mean over joints** of these
RMS: unit-free (torques and forces, drive units mix), every joint counts equally.

Two choices use it:

- :func:`choose_friction`: the Coulomb model, e.g. the dead band against the direction memory
  (a joint held at rest keeps the Coulomb level of its last motion, see
  :class:`~inertial_id.core.joint_torque.friction.FrictionModel`) and the dead band against
  ``tanh(qd / v0)`` on a grid of ``v0`` (:func:`coulomb_candidates`, the best ``v0`` then
  narrowed down by :func:`refine_friction`), each candidate scored by weighted least
  squares (all base parameters and friction free, so the friction model is compared on equal
  terms whatever the prior);
- :func:`choose_prior_weight`: the weight ``w`` of the CAD prior of the constrained estimators
  (:class:`~inertial_id.core.joint_torque.links.ConstrainedLinkEstimator`), on a grid; each fold's
  solver is compiled once and re-solved per weight.

A friction state with memory is computed over the whole record before the blocks are cut
(:meth:`LinkIdentification.subset` keeps it), so a held-out block starts with the history of
the rows before it.

**Other recordings instead of time blocks** (``others``: problems of other recordings of the
same arm, e.g. the unloaded run of a loaded/unloaded pair): a choice is then scored by the fit
on the whole training record predicting those recordings (pooled per-joint RMS, the same
geometric mean). Time blocks of a *periodic* identification trajectory repeat each other: a
model error that the base parameters absorb on that trajectory (a Coulomb memory ``x0``
3x off, a drive gain a few % off) scores the same in every block and only shows on another
trajectory. On a simulated motor-current arm (truth ``x0`` 0.0063, 40 s of an 8 s period)
the in-record score of ``x0`` 0.01 and 0.0063 differed by 1.3e-4 (relative, 0.01 ahead);
on the arm's unloaded run 0.0616 against 0.0606 (0.0063 ahead, 1.6 %), and the validation
error of its third joint was 1.447 against 1.341 % (truth 1.297 %). With ``others`` the
memory's ``x0`` is narrowed down as ``v0`` is (:func:`refine_friction`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.joint_torque.friction import FrictionModel
from inertial_id.core.joint_torque.link_gains import (
    GAIN_STDS,
    choose_gains,
    refined_scales,
    scales_to_fit,
)
from inertial_id.core.joint_torque.link_model import BaseParameters, LinkModel
from inertial_id.core.joint_torque.link_validation import (
    FOLDS,
    cross_validated_rms,
    held_out_blocks,
    score,
)
from inertial_id.core.joint_torque.links import (
    LinkEstimate,
    LinkIdentification,
    constrained_solver,
    identify,
)

PRIOR_WEIGHTS = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)
"""The prior weights :func:`choose_prior_weight` tries by default (unit-free)."""
PRESLIDING = (1e-3, 1e-2)
"""Presliding displacements ``x0`` (rad or m) of the direction-memory candidates."""
VELOCITY_SCALES = (0.0025, 0.005, 0.01, 0.02, 0.04, 0.08)
"""Velocity scales ``v0`` (rad/s or m/s) of the ``tanh(qd / v0)`` Coulomb candidates of
:func:`coulomb_candidates`; :func:`refine_friction` then narrows the best one down."""
REST_SPEED = 0.01
"""rad/s or m/s: a joint slower than this (filtered velocity) stands still."""
REST_SECONDS = 0.5
"""s: a joint standing still this long after moving rests (a velocity reversal passes through
rest in a few hundredths of a second); also the rest time of the memory at rest only."""


def rests(qd: NDArray[np.float64], period: float) -> bool:
    """Whether some joint of the velocity rows ``qd`` (N, nv; in time order, ``period`` s
    apart) rests after having moved: :data:`REST_SECONDS` or more below :data:`REST_SPEED`
    after a row above it. Only such rows tell what friction does at rest."""
    still = np.abs(np.atleast_2d(qd)) < REST_SPEED
    need = max(int(np.ceil(REST_SECONDS / period)), 1)
    for column in still.T:
        moved = np.flatnonzero(~column)
        if moved.size == 0:
            continue
        run = 0
        for value in column[moved[0]:]:
            run = run + 1 if value else 0
            if run >= need:
                return True
    return False


def physical_candidates(candidates: Sequence[FrictionModel],
                        records: Sequence[NDArray[np.float64]], period: float
                        ) -> tuple[tuple[FrictionModel, ...], bool]:
    """The friction ``candidates`` the records can judge, and whether any of the velocity
    ``records`` rests (:func:`rests`). A joint at rest keeps the Coulomb level of its last
    motion (static friction holds it up to that level in that direction): a model without
    direction memory predicts zero there. When no record rests, the data cannot refute the
    memory, so only the candidates with it stay (all of them when none has it): the memory at
    rest only among them keeps the memory-free shape wherever the records move."""
    rested = any(rests(qd, period) for qd in records)
    kept = tuple(c for c in candidates if c.memory)
    return (tuple(candidates) if rested or not kept else kept), rested


def memory_candidates(friction: FrictionModel, presliding: Sequence[float] = PRESLIDING,
                      at_rest: bool = True) -> tuple[FrictionModel, ...]:
    """``friction`` without direction memory, with each presliding ``x0``, and (``at_rest``)
    with memory at rest only (after :data:`REST_SECONDS`: its shape through velocity
    reversals is the memory-free one)."""
    rest = (friction.with_rest_time(REST_SECONDS),) if at_rest else ()
    return (friction.with_presliding(0.0),
            *(friction.with_presliding(x0) for x0 in presliding), *rest)


def coulomb_candidates(friction: FrictionModel, scales: Sequence[float] = VELOCITY_SCALES,
                       dead_band: bool = True, presliding: Sequence[float] | None = PRESLIDING,
                       at_rest: bool = True) -> tuple[FrictionModel, ...]:
    """Coulomb shapes to choose from: ``friction`` as given with its dead band (when
    ``dead_band``), then ``tanh(qd / v0)`` for each ``v0`` of ``scales``; each without
    direction memory, with each ``presliding`` ``x0`` and with memory at rest only
    (``at_rest``, :func:`memory_candidates`; None: the shapes as they are)."""
    shapes = ([replace(friction, smooth=False)] if dead_band else []) + [
        replace(friction, smooth=True, velocity_threshold=float(v0)) for v0 in scales]
    if presliding is None:
        return tuple(shapes)
    return tuple(c for shape in shapes for c in memory_candidates(shape, presliding, at_rest))


def _cross_validated(problem: LinkIdentification, friction: FrictionModel, folds: int,
                     guard: int, others: Sequence[LinkIdentification] = ()) -> dict:
    """One friction candidate's row of :func:`choose_friction`'s table."""
    rms = cross_validated_rms(problem.with_friction(friction),
                              LinkIdentification.weighted_least_squares, folds, guard,
                              [o.with_friction(friction) for o in others])
    return {**friction.settings(), "score": score(rms), "rms": rms.tolist()}


def choose_friction(problem: LinkIdentification, candidates: Sequence[FrictionModel],
                    folds: int = FOLDS, guard: int = 0,
                    others: Sequence[LinkIdentification] = ()
                    ) -> tuple[FrictionModel, list[dict]]:
    """The candidate of best cross-validated WLS score on ``problem`` (its rows in time
    order, the whole record; or predicting ``others``, :func:`cross_validated_rms`) and a
    table of every candidate's settings, per-joint RMS and score (lower is better)."""
    table = [_cross_validated(problem, friction, folds, guard, others)
             for friction in candidates]
    best = min(range(len(table)), key=lambda k: table[k]["score"])
    return candidates[best], table


def _narrow(problem: LinkIdentification, friction: FrictionModel, table: list[dict],
            field_name: str, steps: Sequence[float], folds: int, guard: int,
            others: Sequence[LinkIdentification] = ()) -> FrictionModel:
    """``friction``'s ``field_name`` divided and multiplied by each step factor in turn, the
    best kept (rows appended to ``table``)."""
    best_score = min(row["score"] for row in table)
    for step in steps:
        centre = friction
        for factor in (1 / step, step):
            candidate = replace(centre, **{field_name: getattr(centre, field_name) * factor})
            table.append(_cross_validated(problem, candidate, folds, guard, others))
            if table[-1]["score"] < best_score:
                friction, best_score = candidate, table[-1]["score"]
    return friction


def refine_friction(problem: LinkIdentification, friction: FrictionModel, table: list[dict],
                    folds: int = FOLDS, guard: int = 0,
                    others: Sequence[LinkIdentification] = (), presliding: bool = False
                    ) -> tuple[FrictionModel, list[dict]]:
    """A grid's best ``friction`` narrowed down: a smooth Coulomb model's ``v0`` divided and
    multiplied by ``2^(1/2)``, then by ``2^(1/4)`` around the better (the
    :data:`VELOCITY_SCALES` grid is in factors 2), the best kept, scored as
    :func:`choose_friction` (``table``: the grid's, extended). A dead band keeps its width.

    The held-out error is sensitive to ``v0``: a simulated motor-current arm (``v0`` 0.02)
    gave a held-out relative error on its base joint of 4.9 % with ``v0`` 0.02, 6.7 % with
    0.01, 5.9 % with 0.03 (the truth model 4.8 %).

    With ``presliding`` and a direction memory, its ``x0`` is then narrowed down the same way
    by factors ``10^(1/2)`` and ``10^(1/4)`` (the :data:`PRESLIDING` grid is in factors 10);
    meant for ``others`` (module docstring: in-record blocks of a periodic trajectory hardly
    tell ``x0`` apart)."""
    table = list(table)
    if friction.smooth:
        friction = _narrow(problem, friction, table, "velocity_threshold",
                           (2 ** 0.5, 2 ** 0.25), folds, guard, others)
    if presliding and friction.presliding > 0:
        friction = _narrow(problem, friction, table, "presliding",
                           (10 ** 0.5, 10 ** 0.25), folds, guard, others)
    return friction, table


def choose_prior_weight(problem: LinkIdentification, method: str = "sdp",
                        weights: Sequence[float] = PRIOR_WEIGHTS, folds: int = FOLDS,
                        guard: int = 0, others: Sequence[LinkIdentification] = (),
                        **options: object) -> tuple[float, list[dict]]:
    """The prior weight of best cross-validated score of the constrained estimate (``method``
    sdp or qp; ``options``: :func:`~inertial_id.core.joint_torque.links.constrained_solver`'s
    ``consistency``, ``com_margin``, ``epsilon``, ``max_relative_std``), and a table of every
    weight's per-joint RMS and score. A weight whose solve fails in some block scores inf.
    With ``others``: the fit on the whole of ``problem`` predicting them."""
    squares = np.zeros((len(weights), problem.model.n))
    splits = ([(np.arange(problem.samples), None)] if others
              else held_out_blocks(problem, folds, guard))
    for train, held in splits:
        fold = problem.subset(train)
        tests = others if held is None else [problem.subset(held)]
        solver, sigma = constrained_solver(fold, method, **options)
        for k, weight in enumerate(weights):
            solver.set_prior_weight(weight)
            try:
                estimate = solver.solve(fold, sigma)
                squares[k] += sum(t.rms(estimate) ** 2 * t.samples for t in tests)
            except InertialIdError:
                squares[k] = np.inf
    rms = np.sqrt(squares / sum(t.samples for t in (others or [problem])))
    table = [{"prior_weight": float(w), "score": score(r), "rms": r.tolist()}
             for w, r in zip(weights, rms, strict=True)]
    best = min(range(len(table)), key=lambda k: table[k]["score"])
    if not np.isfinite(table[best]["score"]):
        raise InertialIdError("no prior weight gave a solution in every time block")
    return float(weights[best]), table


# ------------------------------------------------------------------------------ workflow


@dataclass(frozen=True)
class LinkOptions:
    """How :func:`identify_links` identifies (the ``identify-links`` options; the solver node's
    ``links`` mode). ``known_gain``: joint -> drive gain (effort = torque / gain) held fixed;
    ``max_relative_std`` <= 0 keeps every base parameter in the fit.

    Choices from the data (cross-validation on ``folds`` time blocks with ``guard`` rows,
    module docstring): with more than one ``friction_candidates`` the friction model is the
    best of them (else ``friction``), its ``tanh`` velocity scale then narrowed down
    when ``refine_friction`` (:func:`refine_friction`); with ``prior_weight`` None the
    prior weight is the best of ``prior_weights`` (sdp and qp; wls and pls have no prior).
    With ``units_from_data`` and without ``fit_gains`` the CAD fit still fits the effort
    scales when the nominal ones cannot explain the efforts
    (:func:`~inertial_id.core.joint_torque.link_gains.scales_to_fit`; identify-links).
    Direction memory is kept when no record rests (:func:`physical_candidates`).
    ``held_out``: rows (q, qd, qdd, effort) of other recordings of the same arm; when given,
    they score every choice instead of the time blocks, and with ``refine_friction`` the
    memory's ``x0`` is narrowed down too unless ``presliding_given``. ``gain_std``: the
    relative std of the drive gains' prior when the scales not known are refined with the
    links (0, default: kept; None: chosen among 0 and ``gain_stds``, default
    :data:`~inertial_id.core.joint_torque.link_gains.GAIN_STDS`, by
    :func:`~inertial_id.core.joint_torque.link_gains.
    choose_gains`); ``refine_gains`` > 0 instead alternates all of them with the constrained
    fit (no prior, no anchor) and skips that choice."""

    method: str = "sdp"
    prior_weight: float | None = None
    friction: FrictionModel = field(default_factory=FrictionModel)
    fit_gains: bool = False
    known_gain: dict[str, float] = field(default_factory=dict)
    refine_gains: int = 0
    max_relative_std: float = 10.0
    consistency: str = "link"
    com_margin: float | None = None
    coloured_residuals: bool = False
    friction_candidates: tuple[FrictionModel, ...] = ()
    prior_weights: tuple[float, ...] = PRIOR_WEIGHTS
    folds: int = FOLDS
    guard: int = 0
    refine_friction: bool = False
    held_out: tuple[tuple[NDArray[np.float64], ...], ...] = ()
    presliding_given: bool = False
    gain_std: float | None = 0.0
    gain_stds: tuple[float, ...] | None = None
    units_from_data: bool = False


def identify_links(model: LinkModel, rows: tuple[NDArray[np.float64], ...],
                   options: LinkOptions, base: BaseParameters | None = None
                   ) -> tuple[LinkIdentification, LinkEstimate, LinkEstimate]:
    """The problem on ``rows`` = (q, qd, qdd, effort), model joint order, rows in time order,
    the CAD model with its fitted drive terms, and the identified estimate. The choices made
    from the data and their cross-validated scores are in the estimate's
    ``info["selection"]`` (``friction``, ``prior_weight``: the tables of
    :func:`choose_friction` and :func:`choose_prior_weight`); the prior weight used is in
    ``info["prior_weight"]``; the drive gains' (``drive_gains``: the table of
    :func:`~inertial_id.core.joint_torque.link_gains.choose_gains`) with the prior std used in
    ``info["gain_std"]``."""
    known = options.known_gain
    unknown = [n for n in known if n not in model.joint_names]
    if unknown:
        raise SampleError(f"known gains for joints that do not move: {', '.join(unknown)}")
    scale = np.array([1.0 / known[n] if n in known else 1.0 for n in model.joint_names])
    problem = LinkIdentification(model, *rows, options.friction, base, effort_scale=scale,
                                 correlated_residuals=options.coloured_residuals,
                                 known_scale=[n in known for n in model.joint_names])
    fit_scale, unit_table = scales_to_fit(problem, options.fit_gains,
                                          options.units_from_data)
    cad = problem.fit_cad(fit_scale=fit_scale)
    problem.effort_scale = cad.effort_scale.copy()
    others = [LinkIdentification(model, *r, options.friction, base) for r in options.held_out]
    selection: dict[str, list[dict]] = {"effort_unit": unit_table} if unit_table else {}
    candidates, rested = physical_candidates(
        options.friction_candidates, [problem.qd, *(o.qd for o in others)],
        options.friction.sample_period)
    if len(options.friction_candidates) > 1:
        selection["rest"] = [{"rests": rested, "memory_only": len(candidates)
                              < len(options.friction_candidates)}]
        friction, selection["friction"] = choose_friction(
            problem, candidates, options.folds, options.guard, others)
        if options.refine_friction:
            friction, selection["friction"] = refine_friction(
                problem, friction, selection["friction"], options.folds, options.guard,
                others, presliding=bool(others) and not options.presliding_given)
        problem = problem.with_friction(friction)
        others = [o.with_friction(friction) for o in others]
        cad = problem.fit_cad(fit_scale=fit_scale)
        problem.effort_scale = cad.effort_scale.copy()
    gain_std = options.gain_std
    if options.refine_gains > 0:
        gain_std = None
    elif gain_std is None:
        stds = GAIN_STDS if options.gain_stds is None else options.gain_stds
        gain_std, problem.effort_scale, selection["drive_gains"] = choose_gains(
            problem, stds, options.folds, options.guard, others)
    else:
        problem.effort_scale = refined_scales(problem, gain_std)
    threshold = options.max_relative_std if options.max_relative_std > 0 else None
    settings = {"consistency": options.consistency, "com_margin": options.com_margin,
                "max_relative_std": threshold}
    weight = options.prior_weight
    if weight is None and options.method in ("sdp", "qp"):
        weight, selection["prior_weight"] = choose_prior_weight(
            problem, options.method, options.prior_weights, options.folds, options.guard,
            others, **settings)
    estimate = identify(problem, options.method, prior_weight=weight or 0.0,
                        refine_scale=options.refine_gains, **settings)
    return problem, cad, replace(estimate, info={**estimate.info, "selection": selection,
                                                 "gain_std": gain_std})
