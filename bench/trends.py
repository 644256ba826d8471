"""Friction drift test of `inertial-id trends` on simulated joint-torque recordings over months.

Two robots of the same simulated motor-current arm (bench/_trends_data.py), each with
``--recordings`` recordings a month apart, warm-up in every recording, a tool change halfway
and recordings growing longer: ``drifting`` with a Coulomb drift of ``--drift`` per month on
one joint (wear), ``warm-up`` without. Each recording is written as a bag (stamped by its date)
under ``bags/ROBOT/``. By default (``--source batch``) the table is what a fleet would run:
``inertial-id identify-links`` on a recording of the arm holding nothing gives the link model,
then ``inertial-id batch --mode joint-torque --links model.yaml --phase 10`` identifies every
bag per 10 s phase (friction, residual, payload mass) on a local Dask cluster of ``--workers``;
``--source memory`` reads each bag back and identifies it in this process
(``friction_by_phase``, the mass the simulated tool's). The table goes through
``inertial-id trends``. Prints, per robot, what was flagged and the drift's size against the
injected one, and what the same rows say without the controls (phases and tools pooled; and
one identification per whole recording, a second batch with one phase per bag).

    python bench/trends.py                       # 12 recordings, +3 %/month on elbow_joint
    python bench/trends.py --source memory --recordings 24 --drift 0.01 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `bench` as a package

from bench import _trends_data as td  # noqa: E402
from inertial_id.core.joint_torque.trends import TrendOptions, drift_tests, friction_points  # noqa: E402
from inertial_id.io.joint_records import read_joint_bag  # noqa: E402
from inertial_id.tools.batch import read_table, write_table  # noqa: E402
from inertial_id.tools.cli import main as cli  # noqa: E402


def bag_rows(series: td.Series, robot: str, identifier: td.Identifier, folder: Path,
             whole: bool = False) -> list[dict]:
    """Read the series' bags (written in ``folder/ROBOT``) back and identify each per phase
    in this process (``--source memory``)."""
    rows = []
    for k, entry in enumerate(td.schedule(series)):
        position, effort = read_joint_bag(folder / robot / f"rec{k:02d}")
        found = identifier.rows(position, effort, td.phases_of(entry, whole))
        rows += td.bag_rows(robot, k, entry, found)
    return rows


def batch_rows(folder: Path, model: Path, args: argparse.Namespace, phase: float,
               name: str) -> dict[str, list[dict]]:
    """``inertial-id batch --mode joint-torque`` over ``folder/bags`` into ``folder/NAME``;
    its rows per robot (the directory holding the bag)."""
    table = folder / name
    status = cli(["batch", str(folder / "bags"), "--output", str(table), "--mode", "joint-torque",
                  "--links", str(model), "--phase", f"{phase:g}", "--method", args.method,
                  "--workers", str(args.workers), "--no-progress"])
    rows = read_table(table)
    if status or any(r["error"] for r in rows):
        raise RuntimeError(f"batch exit status {status}: "
                           f"{[r['error'] for r in rows if r['error']]}")
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row["robot"], []).append(row)
    return out


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


def contact_score(rows: list[dict], series: td.Series) -> dict:
    """Pushes found and false alarms of the batch rows' contact intervals (s since each
    bag's start) against each recording's pushes (found: an interval overlapping the push or
    starting within 0.3 s after it; false: an interval 0.5 s or more from every push), and
    the false alarms that start in a recording's first 10 s (its cold start)."""
    found = total = false = cold = 0
    for k, entry in enumerate(td.schedule(series)):
        pushes = [(p.start, p.start + p.duration) for p in td.pushes_of(series, entry)]
        mine = [iv for r in rows if Path(r["bag"]).name == f"rec{k:02d}"
                for iv in (r["contact_intervals"] or [])]
        total += len(pushes)
        found += sum(any(a < e + 0.3 and b > s for a, b in mine) for s, e in pushes)
        alarms = [a for a, b in mine if not any(a < e + 0.5 and b > s - 0.5 for s, e in pushes)]
        false += len(alarms)
        cold += sum(a < td.PHASE for a in alarms)
    return {"pushes": total, "found": found, "false_alarms": false,
            "false_alarms_in_first_10_s": cold}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recordings", type=int, default=12)
    parser.add_argument("--drift", type=float, default=0.03,
                        help="Coulomb drift of the drifting robot, share per month")
    parser.add_argument("--method", default="wls", choices=("wls", "qp", "sdp"),
                        help="identify-links method (sdp: prior weight chosen by CV; slow)")
    parser.add_argument("--source", choices=("batch", "memory"), default="batch",
                        help="the friction rows from inertial-id batch --mode joint-torque "
                             "(default) or identified in this process")
    parser.add_argument("--warmup", type=float, default=td.Series.warmup,
                        help="extra friction share at each recording's start (default 0.3)")
    parser.add_argument("--warmup-time", type=float, default=td.Series.warmup_time,
                        help="s: the warm-up's time constant (default 8)")
    parser.add_argument("--push-force", type=float, default=0.0,
                        help="N: pushes at the flange in every recording, a tenth of it "
                        "(default 0: none)")
    parser.add_argument("--workers", type=int, default=2, help="batch: local Dask workers")
    parser.add_argument("--seeds", type=int, default=0,
                        help="also repeat both series (in memory) with this many other seeds "
                             "and count flags")
    parser.add_argument("--output", type=Path, help="keep the table and report here")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args()
    begin = time.perf_counter()
    identifier = td.Identifier(args.method)
    joint = identifier.model.joint_names[td.Series().drift_joint]
    common = {"recordings": args.recordings, "warmup": args.warmup,
              "warmup_time": args.warmup_time, "push_force": args.push_force}
    robots = {"drifting": td.Series(drift=args.drift, **common),
              "warm-up": td.Series(**common)}
    out: dict = {"recordings": args.recordings, "drift_joint": joint,
                 "drift_share_per_month": args.drift, "method": args.method,
                 "source": args.source, "robots": {}}
    options = TrendOptions()
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.output or Path(scratch)
        for robot, series in robots.items():
            td.write_bags(series, robot, identifier, folder / "bags")
        table = folder / "fleet.parquet"
        if args.source == "batch":
            model = td.reference_model(identifier, folder)
            rows = batch_rows(folder, model, args, td.PHASE, table.name)
            whole = batch_rows(folder, model, args, 1e4, "whole.parquet")
        else:
            rows = {robot: bag_rows(series, robot, identifier, folder / "bags")
                    for robot, series in robots.items()}
            whole = {robot: bag_rows(series, robot, identifier, folder / "bags", whole=True)
                     for robot, series in robots.items()}
            write_table(rows["drifting"] + rows["warm-up"], table)
        out["masses"] = {robot: [min(r["mass"] for r in rows[robot]),
                                 max(r["mass"] for r in rows[robot])] for robot in robots}
        out["contacts"] = {robot: sum(r["contacts"] or 0 for r in rows[robot])
                           for robot in robots}
        if args.source == "batch":
            out["contact_score"] = {robot: contact_score(rows[robot], series)
                                    for robot, series in robots.items()}
            print(f"contacts against the simulated pushes: {out['contact_score']}")
        print(f"{sum(map(len, rows.values()))} rows from {2 * args.recordings} bags "
              f"({time.perf_counter() - begin:.1f} s, {args.source}); masses (kg) "
              f"{out['masses']}, contacts {out['contacts']}; inertial-id trends {table}:")
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
            value["whole"] = summary(drift_tests(friction_points(whole[robot], options),
                                                 options, stratify=False),
                                     "one fit per recording")
            rate = report["robots"][robot]["contacts"]
            value["contact_rate"] = {"contacts": rate["contacts"], "hours": rate["hours"],
                                     "trend": rate["test"]}
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
