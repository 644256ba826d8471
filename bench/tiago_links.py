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
  the record's ends are left out);
- both models get the same drive terms fitted on the training rows, because the efforts are
  not in N m: per joint an effort scale (1 / drive gain), Coulomb friction (dead band
  0.002 rad/s), viscous friction and an offset.
  **CAD**: the URDF's inertials, drive terms fitted by least squares against the CAD torques.
  **Identified**: the inertials too, by the SDP of Wensing et al. (2017, eq. 25) with the CAD
  prior (relative weight 0.01), J(pi) >= 0 for every URDF link (rigid attachments at CAD), and
  Bonnet's rule: base parameters with sigma > 10 % keep their CAD values; its effort scales
  are the CAD fit's (efforts give pi only up to a common scale);
- RMS of measured minus predicted effort on the test rows, in the effort's units.

    python bench/tiago_links.py --json tiago_links.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from inertial_id.core.errors import InertialIdError
from inertial_id.core.links import (
    FrictionModel,
    LinkIdentification,
    LinkModel,
    identified_urdf,
    identify,
    structural_base_parameters,
)
from inertial_id.core.parameters import is_physically_consistent
from inertial_id.links_tool import JointData, joint_data, read_joint_csv

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "tiago"
"""``shared/data/tiago`` next to the repository (override with ``--data``)."""
JOINTS = ("torso_lift_joint", *(f"arm_{i}_joint" for i in range(1, 8)))


def load(data: Path, window: int, driver_velocity: bool = False
         ) -> tuple[LinkModel, JointData]:
    """The reduced model and the filtered joint data of the ``dynamic`` run."""
    run = data / "dynamic"
    position = read_joint_csv(run / "tiago_position.csv")
    effort = read_joint_csv(run / "tiago_effort.csv")
    velocity = read_joint_csv(run / "tiago_velocity.csv") if driver_velocity else None
    model = LinkModel(str(data / "tiago_48_hey5.urdf"), joints=JOINTS)
    return model, joint_data(model, position, effort, velocity, window)


def split(model: LinkModel, data: JointData, fraction: float, friction: FrictionModel,
          mask_velocity: float = 0.0) -> tuple[LinkIdentification, LinkIdentification]:
    """Training and test problems (first ``fraction`` of the rows, and the rest)."""
    n = data.t.size
    cut = int(fraction * n)
    base = structural_base_parameters(model)
    train = data.rows(0, cut)
    mask = np.abs(train[1]) > mask_velocity if mask_velocity > 0 else None
    return (LinkIdentification(model, *train, friction, base, mask=mask),
            LinkIdentification(model, *data.rows(cut, n), friction, base))


def evaluate(model: LinkModel, data: JointData, args: argparse.Namespace) -> dict:
    """CAD versus identified test RMS, consistency, and the other methods for reference."""
    friction = FrictionModel("symmetric", velocity_threshold=args.velocity_threshold)
    train, test = split(model, data, args.train_fraction, friction)
    begin = time.perf_counter()
    cad = train.fit_cad(fit_scale=True)
    train.effort_scale = cad.effort_scale.copy()
    test.effort_scale = cad.effort_scale.copy()
    estimate = identify(train, args.method, prior_weight=args.prior_weight,
                        max_relative_std=args.max_relative_std)
    seconds = time.perf_counter() - begin
    consistent = [is_physically_consistent(p) for p in estimate.standard - model.attachments]
    cad_consistent = [is_physically_consistent(p) for p in model.own_cad]
    cad_rms, id_rms = test.rms(cad), test.rms(estimate)
    variants = {}
    for name, options in (("wls", {"method": "wls"}), ("pls", {"method": "pls"}),
                          ("qp", {"method": "qp", "max_relative_std": args.max_relative_std}),
                          ("sdp_all_base_parameters", {"method": "sdp"})):
        options = {"prior_weight": args.prior_weight, **options}
        try:
            variant = identify(train, **options)
            variants[name] = test.rms(variant).tolist()
        except InertialIdError as exc:
            variants[name] = str(exc)
    nb = train.base.count
    return {
        "joints": model.joint_names,
        "cad_rms": cad_rms.tolist(),
        "identified_rms": id_rms.tolist(),
        "all_links_consistent": bool(all(consistent)),
        "links": model.link_names,
        "links_consistent": consistent,
        "cad_links_consistent": cad_consistent,
        "improvement_percent": (100.0 * (1.0 - id_rms / cad_rms)).tolist(),
        "identified_better_on_every_joint": bool(np.all(id_rms < cad_rms)),
        "train_rms": {"cad": train.rms(cad).tolist(), "identified": train.rms(estimate).tolist()},
        "effort_scale": cad.effort_scale.tolist(),
        "base_parameters": nb,
        "base_parameters_fitted": nb - int(estimate.info.get("held", 0)),
        "masses": {"cad": model.own_cad[:, 0].tolist(),
                   "identified": (estimate.standard - model.attachments)[:, 0].tolist()},
        "variants_test_rms": variants,
        "identification_seconds": round(seconds, 3),
        "rows": {"train": train.samples, "test": test.samples},
        "settings": {"method": args.method, "prior_weight": args.prior_weight,
                     "max_relative_std": args.max_relative_std, "window": args.window,
                     "train_fraction": args.train_fraction,
                     "friction": "symmetric Coulomb + viscous + offset, drive scale per joint",
                     "velocity_threshold": args.velocity_threshold},
        "_estimate": estimate,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, required=True, help="write the results here")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA_DIR,
                        help="the TIAGo data folder (default: shared/data/tiago next to the "
                        "repository)")
    parser.add_argument("--method", choices=("sdp", "qp"), default="sdp")
    parser.add_argument("--prior-weight", type=float, default=1e-2)
    parser.add_argument("--max-relative-std", type=float, default=10.0)
    parser.add_argument("--window", type=int, default=31, help="Savitzky-Golay window")
    parser.add_argument("--train-fraction", type=float, default=0.7)
    parser.add_argument("--velocity-threshold", type=float, default=2e-3)
    parser.add_argument("--urdf", type=Path, help="also write the identified URDF here")
    args = parser.parse_args(argv)
    begin = time.perf_counter()
    warnings.filterwarnings("ignore", module="cvxpy")
    try:
        model, data = load(args.data, args.window)
        result = evaluate(model, data, args)
        # The driver's (lagging) velocity instead of the filtered-position derivative.
        _, driver = load(args.data, args.window, driver_velocity=True)
        other = evaluate(model, driver, args)
    except (OSError, InertialIdError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    estimate = result.pop("_estimate")
    other.pop("_estimate")
    result["velocity_source"] = {
        "savitzky_golay": {"cad_rms": result["cad_rms"],
                           "identified_rms": result["identified_rms"]},
        "driver": {"cad_rms": other["cad_rms"], "identified_rms": other["identified_rms"]},
    }
    result["seconds"] = round(time.perf_counter() - begin, 2)
    args.json.write_text(json.dumps(result, indent=2))
    if args.urdf:
        args.urdf.write_text(identified_urdf(model, estimate.standard))
    print(f"{'joint':18s} {'CAD RMS':>9s} {'identified':>10s} {'gain %':>7s}")
    for j, c, i, g in zip(result["joints"], result["cad_rms"], result["identified_rms"],
                          result["improvement_percent"], strict=True):
        print(f"{j:18s} {c:9.4f} {i:10.4f} {g:7.2f}")
    print(f"all links consistent: {result['all_links_consistent']} (CAD: "
          f"{sum(result['cad_links_consistent'])}/{len(model.link_names)}); "
          f"identified better on every joint: {result['identified_better_on_every_joint']}; "
          f"{result['seconds']:.1f} s")
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
