"""Friction drift test of `inertial-id trends` on simulated joint-torque recordings over months.

Two robots of the same simulated motor-current arm (bench/_trends_data.py), each with
``--recordings`` recordings a month apart, warm-up in every recording, a tool change halfway
and recordings growing longer: ``drifting`` with a Coulomb drift of ``--drift`` per month on
one joint (wear), ``warm-up`` without. Each recording is written as a bag, read back with
``read_joint_bag`` and identified per 10 s phase by the identify-links workflow
(``friction_by_phase``); the rows go into a batch table (Parquet) and through
``inertial-id trends``. Prints, per robot, what was flagged and the drift's size against the
injected one, and what the same rows say without the controls (phases and tools pooled; and
one identification per whole recording).

    python bench/trends.py                       # 12 recordings, +3 %/month on elbow_joint
    python bench/trends.py --recordings 24 --drift 0.01 --method sdp --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _trends_data as td  # noqa: E402

from inertial_id.batch import write_table  # noqa: E402
from inertial_id.cli import main as cli  # noqa: E402
from inertial_id.core.trends import TrendOptions, drift_tests, friction_points  # noqa: E402
from inertial_id.joint_records import read_joint_bag  # noqa: E402


def bag_rows(series: td.Series, robot: str, identifier: td.Identifier, folder: Path,
             whole: bool = False) -> list[dict]:
    """Write the series' bags, read each back and identify it per phase."""
    rows = []
    bags = td.write_bags(series, robot, identifier, folder)
    for k, (entry, bag) in enumerate(zip(td.schedule(series), bags, strict=True)):
        position, effort = read_joint_bag(bag)
        found = identifier.rows(position, effort, td.phases_of(entry, whole))
        rows += td.bag_rows(robot, k, entry, found)
    return rows


def summary(tests: list, label: str) -> dict:
    """Flagged series and the largest size, printed."""
    flagged = [t for t in tests if t.flagged]
    text = ", ".join(f"{t.joint} {t.term} {t.test.percent:+.2f} %/month "
                     f"(Holm p {t.p_adjusted:.2g})" for t in flagged) or "nothing"
    print(f"  {label}: {len(flagged)} of {len(tests)} flagged: {text}")
    return {"flagged": [[t.joint, t.term, t.test.percent, t.p_adjusted] for t in flagged],
            "tested": len(tests)}


def repeat(args: argparse.Namespace, identifier: td.Identifier, joint: str,
           options: TrendOptions) -> dict:
    """Both series with seeds 1..N: how often each flags what (controlled tests)."""
    counts = {"seeds": args.seeds, "drift_found": 0, "drift_elsewhere": 0,
              "warm_up_flags": 0, "warm_up_series_flagged": 0, "drift_percent": []}
    for seed in range(1, args.seeds + 1):
        for robot, drift in (("drifting", args.drift), ("warm-up", 0.0)):
            series = td.Series(recordings=args.recordings, drift=drift, seed=seed)
            rows = td.table_rows(series, robot, identifier)
            tests = drift_tests(friction_points(rows, options), options)
            flagged = [(t.joint, t.term) for t in tests if t.flagged]
            if drift:
                found = (joint, "fc") in flagged
                counts["drift_found"] += found
                counts["drift_elsewhere"] += len(flagged) - found
                counts.setdefault("elsewhere", []).extend(
                    [seed, t.joint, t.term, t.test.percent, t.p_adjusted] for t in tests
                    if t.flagged and (t.joint, t.term) != (joint, "fc"))
                counts["drift_percent"].append(next(t.test.percent for t in tests
                                                    if (t.joint, t.term) == (joint, "fc")))
                counts.setdefault("injected_percent", []).append(
                    td.injected(rows, series, options))
            else:
                counts["warm_up_flags"] += len(flagged)
                counts["warm_up_series_flagged"] += bool(flagged)
    p = counts["drift_percent"]
    print(f"seeds 1-{args.seeds}: drift found in {counts['drift_found']}, other series flagged "
          f"in the drifting robot {counts['drift_elsewhere']} times, warm-up-only robots "
          f"flagged {counts['warm_up_series_flagged']} of {args.seeds} "
          f"({counts['warm_up_flags']} series); drift size {min(p):+.2f} to {max(p):+.2f} "
          f"%/month, injected {min(counts['injected_percent']):+.2f} to "
          f"{max(counts['injected_percent']):+.2f}")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recordings", type=int, default=12)
    parser.add_argument("--drift", type=float, default=0.03,
                        help="Coulomb drift of the drifting robot, share per month")
    parser.add_argument("--method", default="wls", choices=("wls", "qp", "sdp"),
                        help="identify-links method (sdp: prior weight chosen by CV; slow)")
    parser.add_argument("--seeds", type=int, default=0,
                        help="also repeat both series (in memory) with this many other seeds "
                             "and count flags")
    parser.add_argument("--output", type=Path, help="keep the table and report here")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args()
    begin = time.perf_counter()
    identifier = td.Identifier(args.method)
    joint = identifier.model.joint_names[td.Series().drift_joint]
    robots = {"drifting": td.Series(recordings=args.recordings, drift=args.drift),
              "warm-up": td.Series(recordings=args.recordings)}
    out: dict = {"recordings": args.recordings, "drift_joint": joint,
                 "drift_share_per_month": args.drift, "method": args.method, "robots": {}}
    options = TrendOptions()
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.output or Path(scratch)
        rows = {}
        for robot, series in robots.items():
            rows[robot] = bag_rows(series, robot, identifier, folder / "bags")
        table = folder / "fleet.parquet"
        write_table(rows["drifting"] + rows["warm-up"], table)
        print(f"{sum(map(len, rows.values()))} rows from {2 * args.recordings} bags "
              f"({time.perf_counter() - begin:.1f} s); inertial-id trends {table}:")
        status = cli(["trends", str(table), "--output", str(folder / "report")])
        report = json.loads((folder / "report" / "trends.json").read_text())
        for robot, series in robots.items():
            expected = td.injected(rows[robot], series, options)
            print(f"{robot} (injected {100 * series.drift:+.1f} % of the first level per "
                  f"month on {joint} fc = {expected:+.2f} % of the stratum level per month):")
            tests = report["robots"][robot]["friction"]["tests"]
            mine = next(t for t in tests if t["joint"] == joint and t["term"] == "fc")
            print(f"  {joint} fc: {mine['percent']:+.2f} %/month, 95 % CI "
                  f"[{mine['low']:+.2f}, {mine['high']:+.2f}], Holm p {mine['p_adjusted']:.2g}")
            points = friction_points(rows[robot], options)
            value = {"controlled": summary(drift_tests(points, options), "controlled"),
                     "pooled": summary(drift_tests(points, options, stratify=False),
                                       "phases and tools pooled"),
                     "estimate": {k: mine[k] for k in ("percent", "low", "high", "p",
                                                       "p_adjusted", "n", "strata")},
                     "injected_percent": expected}
            whole = bag_rows(series, robot, identifier, folder / "whole", whole=True)
            value["whole"] = summary(drift_tests(friction_points(whole, options), options,
                                                 stratify=False), "one fit per recording")
            out["robots"][robot] = value
    if args.seeds:
        out["seeds"] = repeat(args, identifier, joint, options)
    out["seconds"] = round(time.perf_counter() - begin, 1)
    print(f"{out['seconds']} s in all")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
