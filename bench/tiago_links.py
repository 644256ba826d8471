#!/usr/bin/env python3
"""Link identification on the real TIAGo recording: CAD versus identified, per joint.

Data: ``shared/data/tiago/dynamic`` (see its README): torso lift + arm joints 1..7, positions
and raw efforts (motor-current based) at about 100 Hz, and the URDF. Every other joint of the
URDF (wheels, casters, head, fingers) is locked at 0.

Protocol (Traversaro et al. 2013, Table II style):

- positions are smoothed and differentiated with a Savitzky-Golay filter on the stamps
  (window 31 samples, order 3; zero phase). The driver's velocity is a first-order filtered
  derivative (lags about 0.15-0.2 s) and is only used in the comparison ``velocity_source``;
- the first 70 % of the rows train, the last 30 % test (rows within half a filter window of
  the record's ends are left out). The test rows are used for the final RMS only;
- the efforts are not in N m, so both models get the same drive and friction model, fitted
  on the training rows: per joint ``effort = s_j tau_j + Coulomb + viscous + offset`` with
  ``s_j`` the effort scale (1 / drive gain).
  **CAD**: the URDF's inertials; ``s``, friction and offsets by least squares per joint.
  **Identified**: starts from the CAD fit; the inertials by the SDP of Wensing et al. (2017,
  eq. 25) with the CAD prior and ``J(pi) >= 0`` for every URDF link (rigid attachments at
  CAD); friction and offsets are estimated jointly with the inertials inside the SDP, which
  alternates with the per-joint least squares of the scales and friction (the model is
  bilinear in ``s`` and ``pi``; the alternation lowers one objective, so it converges to a
  stationary point of the joint fit). Which scales are refined is cross-validated: none,
  those the CAD fit determines (sigma % <= 10, with the residuals' autocorrelation time) or
  all; scales not refined keep the CAD fit's value, and together with the prior they anchor
  the common scale. Joint weights ``1 / (sigma_j^2 t_j)``: the CAD fit's residual variance
  times its integrated autocorrelation time ``t_j`` (samples per independent residual at
  100 Hz);
- the training and test problems are subsets of one whole-record problem, so a friction state
  with memory enters the test rows with the history of the training rows;
- RMS of measured minus predicted effort on the test rows, in the effort's units, and the
  standard error of each joint's RMS difference (identified minus CAD) by a moving-block
  bootstrap of the test residuals (blocks of 3 s, above the residuals' correlation times;
  the test part holds only about 8 such blocks, so the error is itself rough).

Hyper-parameters are chosen on the training rows only, by cross-validation on 5 contiguous
blocks (fit on 4, predict the 5th; per-joint RMS pooled over the blocks). The score of a
choice is the geometric mean over joints of these RMS (unit-free: each joint counts equally):

1. the friction model (the same for both models): Coulomb dead band ``[|qd| > v0]`` or smooth
   ``tanh(qd / v0)``, symmetric or asymmetric (Traversaro et al. 2013), ``v0`` in
   {0.002, 0.005, 0.01, 0.02, 0.05}; and the same with direction memory (a Dahl state that
   keeps the sign of the last motion through rest, presliding displacement ``x0`` in
   {1e-3, 1e-2} rad, ``v0`` in {0.005, 0.02} as the state's dead band, see
   :class:`FrictionModel`), scored with the CAD model;
2. the prior weight of the identified model, in {1e-1, 3e-2, ..., 1e-4}, scored with the
   identified model under the chosen friction model (refining the determined scales);
3. which effort scales the identified model refines, at the chosen prior weight.

The memory's own prediction, a Coulomb level held through a rest after motion, is never
exercised by the training rows: their only long rest is before the first motion (state 0 for
every joint; no training row at rest has ``|z| > 0.5``), the rest after motion is the test
part's last 12 s. The cross-validation therefore scores the memory candidates on moving rows
(presliding at reversals) and they extrapolate at that rest. For reference the JSON gives
both models' test RMS under the friction model of best cross-validated score in the other
family (``other_friction_family``; not a selection), and ``--no-memory`` runs the whole
protocol without the memory candidates.

Bonnet's rule (base parameters with sigma % > 10 keep their CAD values) is not used for the
result: with white-noise sigma % it held 40 of the 44 base parameters at CAD, and the
cross-validated prior weight is the regularisation instead. It is reported as a variant
(``sdp_bonnet_hold``, coloured sigma %), with WLS, the QP and the SDP with each scale
refinement not chosen (``sdp_refine_<none|determined|all>``). The hyper-parameters chosen on
the Savitzky-Golay velocities are reused for the driver-velocity comparison.

    python bench/tiago_links.py --json tiago_links.json    # about 2.2 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.joint_torque.friction import COULOMB_MODELS, FrictionModel
from inertial_id.core.joint_torque.link_model import LinkModel, structural_base_parameters
from inertial_id.core.joint_torque.link_urdf import identified_urdf
from inertial_id.core.joint_torque.links import LinkEstimate, LinkIdentification, identify
from inertial_id.core.parameters import is_physically_consistent
from inertial_id.io.joint_records import JointData, joint_data, read_joint_csv

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "tiago"
"""``shared/data/tiago`` next to the repository (override with ``--data``)."""
JOINTS = ("torso_lift_joint", *(f"arm_{i}_joint" for i in range(1, 8)))
SAMPLE_PERIOD = 0.01
"""The record's median step (s), for the friction state with direction memory."""
FRICTION_CANDIDATES = tuple(
    FrictionModel(coulomb, velocity_threshold=v0, smooth=smooth)
    for smooth in (False, True) for coulomb in COULOMB_MODELS if coulomb != "none"
    for v0 in (0.002, 0.005, 0.01, 0.02, 0.05)) + tuple(
    FrictionModel(coulomb, velocity_threshold=v0, smooth=smooth, presliding=x0,
                  sample_period=SAMPLE_PERIOD)
    for smooth in (False, True) for coulomb in COULOMB_MODELS if coulomb != "none"
    for v0 in (0.005, 0.02) for x0 in (1e-3, 1e-2))
REFINEMENTS = ("none", "determined", "all")
"""Which effort scales the identified model refines: none (the CAD fit's), those the CAD fit
determines (sigma % <= MAX_RELATIVE_STD), or all."""
BOOTSTRAP_BLOCK = 300
"""Rows per block (3 s, above the residuals' correlation times) of the test-RMS bootstrap."""
BOOTSTRAP_DRAWS = 2000
PRIOR_WEIGHTS = (1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4)
FOLDS = 5
MAX_RELATIVE_STD = 10.0
"""Bonnet's threshold (percent), here for which effort scales the identified model refines."""
MAX_ALTERNATIONS = 30

Fit = Callable[[LinkIdentification], LinkEstimate]


def load(data: Path, window: int, driver_velocity: bool = False
         ) -> tuple[LinkModel, JointData]:
    """The reduced model and the filtered joint data of the ``dynamic`` run."""
    run = data / "dynamic"
    position = read_joint_csv(run / "tiago_position.csv")
    effort = read_joint_csv(run / "tiago_effort.csv")
    velocity = read_joint_csv(run / "tiago_velocity.csv") if driver_velocity else None
    model = LinkModel(str(data / "tiago_48_hey5.urdf"), joints=JOINTS)
    return model, joint_data(model, position, effort, velocity, window)


def split(model: LinkModel, data: JointData, fraction: float,
          friction: FrictionModel = FRICTION_CANDIDATES[0]
          ) -> tuple[LinkIdentification, LinkIdentification, LinkIdentification]:
    """The whole record, training and test problems (first ``fraction`` of the rows, and the
    rest) under ``friction``. The parts are subsets of the whole, so a friction state with
    memory enters the test rows with the history of the training rows. The training problem
    reports coloured-residual statistics."""
    full = LinkIdentification(model, *data.rows(0, data.t.size), friction,
                              structural_base_parameters(model), correlated_residuals=True)
    return (full, *parts(full, data, fraction))


def parts(full: LinkIdentification, data: JointData, fraction: float
          ) -> tuple[LinkIdentification, LinkIdentification]:
    """Training and test subsets of the whole-record problem ``full``."""
    rows = np.flatnonzero(data.valid)
    training = rows < int(fraction * data.t.size)
    test = full.subset(~training)
    test.correlated_residuals = False
    return full.subset(training), test


def fit_cad(problem: LinkIdentification) -> LinkEstimate:
    """The CAD model: URDF inertials, scales and friction by least squares per joint."""
    return problem.fit_cad(fit_scale=True)


def fit_identified(problem: LinkIdentification, prior_weight: float, method: str = "sdp",
                   refinement: str = "determined", **options: object) -> LinkEstimate:
    """The identified model, starting from the CAD fit (see the module docstring), refining
    the effort scales of ``refinement`` (:data:`REFINEMENTS`); ``options`` override
    :func:`identify`'s arguments (for the variants)."""
    cad = fit_cad(problem)
    problem.effort_scale = cad.effort_scale.copy()
    sigma = cad.joint_sigma * np.sqrt(cad.info["correlation_time"])
    refine = {"none": np.zeros(problem.model.n, bool), "all": np.ones(problem.model.n, bool),
              "determined": np.asarray(cad.info["effort_scale_relative_std"])
              <= MAX_RELATIVE_STD}[refinement]
    settings = {"prior_weight": prior_weight, "joint_sigma": sigma,
                "refine_scale": MAX_ALTERNATIONS if refine.any() else 0,
                "refine_joints": refine, **options}
    return identify(problem, method, **settings)


def cross_validated_rms(problem: LinkIdentification, fit: Fit, folds: int = FOLDS
                        ) -> NDArray[np.float64]:
    """Per-joint RMS of ``fit`` predicting each of ``folds`` contiguous blocks of
    ``problem``'s samples from the others, pooled over the blocks."""
    squares = np.zeros(problem.model.n)
    for held in np.array_split(np.arange(problem.samples), folds):
        estimate = fit(problem.subset(np.setdiff1d(np.arange(problem.samples), held)))
        squares += problem.subset(held).rms(estimate) ** 2 * held.size
    return np.sqrt(squares / problem.samples)


def score(rms: NDArray[np.float64]) -> float:
    """Geometric mean over joints (unit-free)."""
    return float(np.exp(np.mean(np.log(rms))))


def friction_settings(f: FrictionModel) -> dict:
    """A friction model's settings, for the JSON."""
    return {"coulomb": f.coulomb, "smooth": f.smooth, "v0": f.velocity_threshold,
            "presliding": f.presliding}


def choose_friction(train: LinkIdentification, memory: bool = True
                    ) -> tuple[FrictionModel, list[dict]]:
    """The friction model of best cross-validated CAD score (among the candidates without
    direction memory unless ``memory``), and every candidate's score. ``train`` starts the
    record, so the states with memory computed on it alone are those of the whole record."""
    table = [{**friction_settings(f),
              "score": score(cross_validated_rms(train.with_friction(f), fit_cad))}
             for f in FRICTION_CANDIDATES]
    allowed = [k for k, f in enumerate(FRICTION_CANDIDATES) if memory or f.presliding == 0]
    best = min(allowed, key=lambda k: table[k]["score"])
    return FRICTION_CANDIDATES[best], table


def choose_prior_weight(train: LinkIdentification, method: str) -> tuple[float, list[dict]]:
    """The prior weight of best cross-validated identified score, and every score."""
    table = []
    for weight in PRIOR_WEIGHTS:
        rms = cross_validated_rms(train, lambda p, w=weight: fit_identified(p, w, method))
        table.append({"prior_weight": weight, "score": score(rms), "rms": rms.tolist()})
    best = min(range(len(table)), key=lambda k: table[k]["score"])
    return PRIOR_WEIGHTS[best], table


def choose_refinement(train: LinkIdentification, weight: float, method: str,
                      known: dict[str, float] | None = None) -> tuple[str, list[dict]]:
    """Which effort scales to refine (:data:`REFINEMENTS`), by the cross-validated identified
    score at the chosen prior weight; ``known`` gives scores already computed."""
    table = []
    for refinement in REFINEMENTS:
        value = (known or {}).get(refinement)
        if value is None:
            value = score(cross_validated_rms(
                train, lambda p, r=refinement: fit_identified(p, weight, method, r)))
        table.append({"refinement": refinement, "score": value})
    best = min(range(len(table)), key=lambda k: table[k]["score"])
    return REFINEMENTS[best], table


def rms_difference_std(cad: NDArray[np.float64], identified: NDArray[np.float64],
                       block: int = BOOTSTRAP_BLOCK, draws: int = BOOTSTRAP_DRAWS,
                       seed: int = 0) -> NDArray[np.float64]:
    """Standard error of ``RMS(identified) - RMS(cad)`` per joint, from residuals (N, nv) in
    time order: moving-block bootstrap (blocks of ``block`` rows, drawn with replacement
    until N rows, the same rows for both models, so their correlation counts)."""
    n = cad.shape[0]
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, n - block + 1, (draws, -(-n // block)))
    index = (starts[..., None] + np.arange(block)).reshape(draws, -1)[:, :n]
    out = np.empty(cad.shape[1])
    for j in range(cad.shape[1]):
        diff = (np.sqrt(np.mean(identified[:, j][index] ** 2, axis=1))
                - np.sqrt(np.mean(cad[:, j][index] ** 2, axis=1)))
        out[j] = diff.std(ddof=1)
    return out


def variants(train: LinkIdentification, test: LinkIdentification, weight: float,
             refinement: str) -> dict[str, list[float] | str]:
    """Test RMS of other estimators under the same friction model, for reference."""
    out: dict[str, list[float] | str] = {}
    others = [(f"sdp_refine_{r}", lambda p, r=r: fit_identified(p, weight, refinement=r))
              for r in REFINEMENTS if r != refinement]
    for name, fit in (
        ("wls", lambda p: identify(p, "wls")),
        ("qp", lambda p: fit_identified(p, weight, "qp", refinement)),
        *others,
        ("sdp_bonnet_hold", lambda p: fit_identified(p, weight, refinement=refinement,
                                                     max_relative_std=MAX_RELATIVE_STD)),
    ):
        problem = train.subset(np.arange(train.samples))
        problem.effort_scale = fit_cad(problem).effort_scale
        try:
            out[name] = test.rms(fit(problem)).tolist()
        except InertialIdError as exc:
            out[name] = str(exc)
    return out


def evaluate(model: LinkModel, data: JointData, args: argparse.Namespace,
             choices: tuple[FrictionModel, float, str] | None = None) -> dict:
    """CAD versus identified test RMS and consistency. Hyper-parameters by cross-validation on
    the training rows, unless ``choices`` (friction model, prior weight, refinement) gives
    them."""
    begin = time.perf_counter()
    full, train, test = split(model, data, args.train_fraction)
    selection: dict = {}
    if choices is None:
        friction, selection["friction"] = choose_friction(train, not args.no_memory)
        train, test = parts(full.with_friction(friction), data, args.train_fraction)
        weight = args.prior_weight
        known: dict[str, float] = {}
        if weight is None:
            weight, selection["prior_weight"] = choose_prior_weight(train, args.method)
            known["determined"] = next(r["score"] for r in selection["prior_weight"]
                                       if r["prior_weight"] == weight)
        refinement, selection["refinement"] = choose_refinement(train, weight, args.method,
                                                                known)
    else:
        friction, weight, refinement = choices
        train, test = parts(full.with_friction(friction), data, args.train_fraction)
    cad = fit_cad(train)
    estimate = fit_identified(train, weight, args.method, refinement)
    seconds = time.perf_counter() - begin
    own = estimate.standard - model.attachments
    consistent = [is_physically_consistent(p) for p in own]
    cad_rms, id_rms = test.rms(cad), test.rms(estimate)
    residual_cad = test.effort - test.predict(cad)
    residual_id = test.effort - test.predict(estimate)
    difference_std = rms_difference_std(residual_cad, residual_id)
    result = {
        "joints": model.joint_names,
        "cad_rms": cad_rms.tolist(),
        "identified_rms": id_rms.tolist(),
        "all_links_consistent": bool(all(consistent)),
        "links": model.link_names,
        "links_consistent": consistent,
        "cad_links_consistent": [is_physically_consistent(p) for p in model.own_cad],
        "improvement_percent": (100.0 * (1.0 - id_rms / cad_rms)).tolist(),
        "identified_better_on_every_joint": bool(np.all(id_rms < cad_rms)),
        "rms_difference": (id_rms - cad_rms).tolist(),
        "rms_difference_std": difference_std.tolist(),
        "rms_difference_in_std": ((id_rms - cad_rms) / difference_std).tolist(),
        "train_rms": {"cad": train.rms(cad).tolist(), "identified": train.rms(estimate).tolist()},
        "effort_scale": {"cad": cad.effort_scale.tolist(),
                         "identified": estimate.effort_scale.tolist(),
                         "cad_relative_std_percent": cad.info["effort_scale_relative_std"]},
        "correlation_time_samples": cad.info["correlation_time"],
        "masses": {"cad": model.own_cad[:, 0].tolist(), "identified": own[:, 0].tolist()},
        "variants_test_rms": variants(train, test, weight, refinement),
        "seconds": round(seconds, 2),
        "rows": {"train": train.samples, "test": test.samples},
        "settings": {"method": args.method, "prior_weight": weight, "window": args.window,
                     "train_fraction": args.train_fraction, "refinement": refinement,
                     "friction": {**friction_settings(friction), "viscous": True,
                                  "offset": True},
                     "max_relative_std": MAX_RELATIVE_STD, "folds": FOLDS,
                     "bootstrap": {"block_rows": BOOTSTRAP_BLOCK, "draws": BOOTSTRAP_DRAWS}},
        "cross_validation": selection,
        "_estimate": estimate,
        "_choices": (friction, weight, refinement),
    }
    if choices is None:
        result["other_friction_family"] = other_family(
            full, data, args, selection["friction"], friction.presliding > 0, weight,
            refinement)
    return result


def other_family(full: LinkIdentification, data: JointData, args: argparse.Namespace,
                 table: list[dict], memory: bool, weight: float, refinement: str) -> dict:
    """For reference only (not a selection): test RMS of both models under the friction
    model of best cross-validated score in the other family (without direction memory when
    ``memory``, else with), at the same prior weight and refinement."""
    candidates = [k for k, row in enumerate(table) if (row["presliding"] > 0) != memory]
    best = min(candidates, key=lambda k: table[k]["score"])
    friction = FRICTION_CANDIDATES[best]
    train, test = parts(full.with_friction(friction), data, args.train_fraction)
    cad = fit_cad(train)
    estimate = fit_identified(train, weight, args.method, refinement)
    return {"friction": friction_settings(friction), "cv_score": table[best]["score"],
            "cad_rms": test.rms(cad).tolist(), "identified_rms": test.rms(estimate).tolist()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, required=True, help="write the results here")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR,
                        help="the TIAGo data folder (default: shared/data/tiago next to the "
                        "repository)")
    parser.add_argument("--method", choices=("sdp", "qp"), default="sdp")
    parser.add_argument("--prior-weight", type=float,
                        help="use this prior weight instead of cross-validating it")
    parser.add_argument("--window", type=int, default=31, help="Savitzky-Golay window")
    parser.add_argument("--train-fraction", type=float, default=0.7)
    parser.add_argument("--urdf", type=Path, help="also write the identified URDF here")
    parser.add_argument("--no-memory", action="store_true",
                        help="leave the friction candidates with direction memory out of the "
                        "selection (they are still scored)")
    args = parser.parse_args(argv)
    begin = time.perf_counter()
    warnings.filterwarnings("ignore", module="cvxpy")
    try:
        model, data = load(args.data, args.window)
        result = evaluate(model, data, args)
        # The driver's (lagging) velocity instead of the filtered-position derivative, with
        # the hyper-parameters chosen above.
        _, driver = load(args.data, args.window, driver_velocity=True)
        other = evaluate(model, driver, args, result.pop("_choices"))
    except (OSError, InertialIdError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    estimate = result.pop("_estimate")
    result["velocity_source"] = {
        "savitzky_golay": {"cad_rms": result["cad_rms"],
                           "identified_rms": result["identified_rms"]},
        "driver": {"cad_rms": other["cad_rms"], "identified_rms": other["identified_rms"]},
    }
    result["total_seconds"] = round(time.perf_counter() - begin, 2)
    args.json.write_text(json.dumps(result, indent=2))
    if args.urdf:
        args.urdf.write_text(identified_urdf(model, estimate.standard))
    friction = result["settings"]["friction"]
    memory = f", memory x0 {friction['presliding']:g}" if friction["presliding"] else ""
    print(f"friction: {'tanh' if friction['smooth'] else 'dead band'} {friction['coulomb']} "
          f"v0 {friction['v0']}{memory}; prior weight {result['settings']['prior_weight']:g}; "
          f"scales refined: {result['settings']['refinement']} "
          "(cross-validated on the training rows)")
    print(f"{'joint':18s} {'CAD RMS':>10s} {'identified':>10s} {'gain %':>7s} "
          f"{'diff/std':>8s}")
    for j, c, i, g, z in zip(result["joints"], result["cad_rms"], result["identified_rms"],
                             result["improvement_percent"], result["rms_difference_in_std"],
                             strict=True):
        print(f"{j:18s} {c:10.6f} {i:10.6f} {g:7.3f} {z:8.2f}")
    print(f"all links consistent: {result['all_links_consistent']} (CAD: "
          f"{sum(result['cad_links_consistent'])}/{len(model.link_names)}); "
          f"identified better on every joint: {result['identified_better_on_every_joint']}; "
          f"{result['total_seconds']:.1f} s")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
