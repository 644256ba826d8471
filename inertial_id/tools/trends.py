"""``inertial-id trends TABLE --output DIR``: per robot, payload mass per tool, contact rate and
each joint's friction over calendar time from a batch table, with a drift test of friction
that compares like with like (:mod:`inertial_id.core.joint_torque.trends`), PNG plots, an
``index.html`` to read at a glance and ``trends.json`` with every number.

The table is only read. Figures are drawn on matplotlib's Agg canvas (no display needed).
"""

from __future__ import annotations

import argparse
import html
import json
import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from inertial_id.core.errors import InertialIdError
from inertial_id.core.joint_torque.trends import MONTH, TrendOptions, check_columns, robot_trends

TRENDS_HELP = """\
Trends over calendar time from a batch table (Parquet or CSV), per robot:
  - payload mass per tool (masses clustered into tools), with a build-up test;
  - contact rate (contacts per hour recorded) per bag;
  - friction coefficients per joint (joint-torque rows: friction_names, friction), with a
    drift test that compares the same phase of each recording (time segment after the bag's
    start) and the same tool: stratified Mann-Kendall test, Theil-Sen slope in % per month,
    Holm correction across the robot's joints and coefficients at --alpha.
Writes DIR/index.html, DIR/trends.json and DIR/<robot>_{payload,contacts,friction}.png.
Exit status 0; 1 when a drift is flagged (--fail-on-drift); 3 on unusable input.
See docs/fleet.md."""

CONTROLLED = ("phase: the same time segment after the bag's start (start_s-end_s, rounded to "
              "{tol:g} s), so warm-up is compared with warm-up",
              "payload: the same tool (identified mass clustered; rows without a mass apart)")
NOT_CONTROLLED = ("temperature and time since power-on (the table has no such column: only "
                  "through the phase)", "serial correlation between recordings (taken as "
                  "independent)")


def add_trends_parser(sub: argparse._SubParsersAction) -> None:
    """The ``trends`` subcommand's arguments."""
    p = sub.add_parser("trends", help="payload, contact rate and friction drift over time",
                       description=TRENDS_HELP,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("table", type=Path, metavar="TABLE",
                   help="the batch table (.parquet or .csv), read only")
    p.add_argument("--output", type=Path, required=True, metavar="DIR",
                   help="directory for index.html, trends.json and the PNG plots")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise false-alarm level per robot (default 0.05)")
    p.add_argument("--min-drift", type=float, default=0.0, metavar="PERCENT",
                   help="flag only drifts of at least this size, %% per month (default 0)")
    p.add_argument("--phase-tolerance", type=float, default=1.0, metavar="S",
                   help="segments whose start and end agree to this (s) are one phase")
    p.add_argument("--tool-tolerance", type=float, default=0.05, metavar="KG",
                   help="masses closer than this (or 5 %%) are one tool (default 0.05 kg)")
    p.add_argument("--fail-on-drift", action="store_true",
                   help="exit status 1 when a friction drift is flagged")


def _options(args: argparse.Namespace) -> TrendOptions:
    if not 0 < args.alpha < 1:
        raise InertialIdError("--alpha must be in (0, 1)")
    if not args.phase_tolerance > 0 or not args.tool_tolerance >= 0:
        raise InertialIdError("--phase-tolerance must be > 0 and --tool-tolerance >= 0")
    return TrendOptions(alpha=args.alpha, min_drift=args.min_drift,
                        phase_tolerance=args.phase_tolerance, tool_tolerance=args.tool_tolerance)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The batch table's rows; a one-line error when it is missing or not a batch table."""
    from inertial_id.tools.batch import read_table

    if not Path(path).is_file():
        raise InertialIdError(f"no table {path}")
    rows = read_table(Path(path))
    if rows:
        check_columns(rows[0], friction=True)
    return rows


def run_trends(table: Path, output: Path, options: TrendOptions) -> dict[str, Any]:
    """Read the table, write the report into ``output``; returns trends.json's document."""
    rows = read_rows(table)
    robots = robot_trends(rows, options)
    output.mkdir(parents=True, exist_ok=True)
    doc = {"table": str(table), "rows": len(rows), "settings": {
        "alpha": options.alpha, "correction": "Holm across each robot's joints and "
        "coefficients (family-wise)", "min_drift_percent_per_month": options.min_drift,
        "phase_tolerance_s": options.phase_tolerance, "tool_tolerance_kg":
        options.tool_tolerance, "month_s": MONTH,
        "test": "stratified Mann-Kendall, Theil-Sen slope (% of the stratum's median level "
                "per month) with Sen's confidence interval",
        "controlled_for": [c.format(tol=options.phase_tolerance) for c in CONTROLLED],
        "not_controlled_for": list(NOT_CONTROLLED)}, "robots": robots}
    figures = {robot: write_figures(robot, value, output) for robot, value in robots.items()}
    (output / "trends.json").write_text(json.dumps(_finite(doc), indent=1, allow_nan=False)
                                        + "\n")
    (output / "index.html").write_text(index_html(doc, figures))
    return doc


def _finite(value: Any) -> Any:
    """The document with non-finite floats as null (strict JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def run_trends_command(args: argparse.Namespace) -> int:
    """``inertial-id trends``: prints one line per robot and each flagged drift."""
    output = Path(args.output)
    if output.resolve() == Path(args.table).resolve() or output.is_file():
        raise InertialIdError(f"--output {output} must be a directory, not the table")
    doc = run_trends(Path(args.table), output, _options(args))
    flagged = 0
    for robot, value in doc["robots"].items():
        tests = value["friction"]["tests"]
        drifts = [t for t in tests if t["flagged"]]
        flagged += len(drifts)
        print(f"{robot}: {value['bags']} bags, {len(value['payload'])} tools, "
              f"{value['contacts']['contacts']} contacts in {value['contacts']['hours']:.3g} h, "
              f"{len(tests)} friction series tested, {len(drifts)} drifting")
        for name, tool in value["payload"].items():
            if tool["flagged"]:
                print(f"  mass trend {name}: {tool['test']['slope'] * 1e3:+.3g} g/month, "
                      f"p {tool['test']['p']:.2g} (Holm {tool['p_adjusted']:.2g})")
        for t in drifts:
            print(f"  drift {t['joint']} {t['term']}: {t['percent']:+.2f} %/month "
                  f"[{t['low']:+.2f}, {t['high']:+.2f}], p {t['p']:.2g} "
                  f"(Holm {t['p_adjusted']:.2g}), {t['n']} estimates in {t['strata']} strata")
    print(f"report: {output / 'index.html'}")
    return 1 if flagged and args.fail_on_drift else 0


# --- figures ----------------------------------------------------------------------------------

def _date(stamp: float) -> datetime:
    return datetime.fromtimestamp(stamp, tz=timezone.utc)


def _slug(robot: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", robot) or "robot"


def write_figures(robot: str, value: Mapping[str, Any], output: Path) -> dict[str, str]:
    """The robot's PNGs (file names by kind): payload mass per tool (kg), contact rate
    (contacts per hour) and friction per joint (% of each stratum's median level)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    out: dict[str, str] = {}

    def save(figure: Figure, kind: str) -> None:
        figure.autofmt_xdate()
        figure.tight_layout()
        name = f"{_slug(robot)}_{kind}.png"
        FigureCanvasAgg(figure).print_png(str(output / name))
        out[kind] = name

    if value["payload"]:
        figure = Figure(figsize=(8, 3.2))
        ax = figure.add_subplot()
        for tool, series in value["payload"].items():
            points = series["points"]
            ax.plot([_date(p[0]) for p in points], [p[1] for p in points], "o-", ms=4,
                    label=tool + (" BUILD-UP" if series["flagged"] else ""))
        ax.set_ylabel("payload mass (kg)")
        ax.set_title(f"{robot}: payload per tool")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        save(figure, "payload")
    bags = [b for b in value["contacts"]["bags"] if b["rate"] is not None]
    if bags:
        figure = Figure(figsize=(8, 3.2))
        ax = figure.add_subplot()
        ax.plot([_date(b["start"]) for b in bags], [b["rate"] for b in bags], "o-", ms=4)
        ax.set_ylabel("contacts per hour")
        ax.set_title(f"{robot}: contact rate per bag")
        ax.grid(alpha=0.3)
        save(figure, "contacts")
    points = value["friction"]["points"]
    if points:
        _friction_figure(robot, points, value["friction"]["tests"], save)
    return out


def _friction_figure(robot: str, points: Sequence[Mapping[str, Any]],
                     tests: Sequence[Mapping[str, Any]], save: Any) -> None:
    from matplotlib.figure import Figure

    joints = sorted({p["joint"] for p in points})
    terms = [t for t in ("fc", "fc+", "fc-", "fv") if any(p["term"] == t for p in points)]
    figure = Figure(figsize=(4.2 * len(terms), 2.2 * len(joints)))
    axes = figure.subplots(len(joints), len(terms), squeeze=False, sharex=True)
    result = {(t["joint"], t["term"]): t for t in tests}
    for r, joint in enumerate(joints):
        for c, term in enumerate(terms):
            ax = axes[r][c]
            strata: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
            for p in points:
                if p["joint"] == joint and p["term"] == term:
                    strata[p["stratum"]].append(p)
            for name, mine in sorted(strata.items()):
                level = sorted(p["value"] for p in mine)[len(mine) // 2]
                mine = sorted(mine, key=lambda p: p["time"])
                ax.plot([_date(p["time"]) for p in mine],
                        [100 * (p["value"] / level - 1) if level else math.nan for p in mine],
                        "o-", ms=3, lw=0.8, label=name)
            test = result.get((joint, term))
            if test is not None:
                verdict = "DRIFT" if test["flagged"] else "no drift"
                ax.set_title(f"{joint} {term}: {verdict}, {test['percent']:+.2f} %/month "
                             f"(p {test['p_adjusted']:.2g})", fontsize=8,
                             color="tab:red" if test["flagged"] else "black")
            ax.set_ylabel("% of level", fontsize=8)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
            if r == 0 and c == 0:
                ax.legend(fontsize=6)
    figure.suptitle(f"{robot}: friction per joint by phase and tool", fontsize=10)
    save(figure, "friction")


# --- index ------------------------------------------------------------------------------------

def _number(value: Any, fmt: str) -> str:
    return "-" if value is None or (isinstance(value, float) and not math.isfinite(value)) \
        else format(value, fmt)


def index_html(doc: Mapping[str, Any], figures: Mapping[str, Mapping[str, str]]) -> str:
    """A one-page report: the verdicts first, then the tables and plots per robot."""
    e = html.escape
    s = doc["settings"]
    lines = ["<!doctype html><html><head><meta charset='utf-8'><title>inertial-id trends</title>",
             "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
             "td,th{padding:2px 8px;text-align:right}.drift{color:#b00;font-weight:bold}"
             "table{border-collapse:collapse}tr:nth-child(even){background:#f4f4f4}</style>",
             "</head><body>", f"<h1>Trends of {e(doc['table'])}</h1>"]
    summary = []
    for robot, value in doc["robots"].items():
        drifts = [t for t in value["friction"]["tests"] if t["flagged"]]
        text = ", ".join(f"{t['joint']} {t['term']} {t['percent']:+.2f} %/month"
                         for t in drifts) or "no friction drift"
        builds = [k for k, v in value["payload"].items() if v["flagged"]]
        mass = "; mass trend: " + e(", ".join(builds)) if builds else ""
        summary.append(f"<li><b>{e(robot)}</b>: <span class='{'drift' if drifts else ''}'>"
                       f"{e(text)}</span>{mass}</li>")
    lines += ["<ul>", *summary, "</ul>",
              f"<p>Drift test: {e(s['test'])}; flagged when the Holm-adjusted p is at most "
              f"{s['alpha']:g} (family-wise per robot) and the size at least "
              f"{s['min_drift_percent_per_month']:g} %/month. Controlled for: "
              f"{e('; '.join(s['controlled_for']))}. Not controlled for: "
              f"{e('; '.join(s['not_controlled_for']))}.</p>"]
    for robot, value in doc["robots"].items():
        lines.append(f"<h2>{e(robot)}</h2><p>{value['bags']} bags, {value['rows']} rows "
                     f"({value['failed_rows']} failed)</p>")
        tests = sorted(value["friction"]["tests"], key=lambda t: (t["joint"], t["term"]))
        if tests:
            lines.append("<table><tr><th>joint</th><th>term</th><th>level</th><th>estimates"
                         f"</th><th>strata</th><th>%/month</th>"
                         f"<th>{100 * (1 - s['alpha']):g} % CI</th><th>p</th>"
                         "<th>p (Holm)</th><th>verdict</th></tr>")
            for t in tests:
                lines.append(
                    f"<tr class='{'drift' if t['flagged'] else ''}'><td>{e(t['joint'])}</td>"
                    f"<td>{e(t['term'])}</td><td>{_number(t['level'], '.4g')}</td>"
                    f"<td>{t['n']}</td><td>{t['strata']}</td>"
                    f"<td>{_number(t['percent'], '+.2f')}</td><td>[{_number(t['low'], '+.2f')}, "
                    f"{_number(t['high'], '+.2f')}]</td><td>{_number(t['p'], '.2g')}</td>"
                    f"<td>{_number(t['p_adjusted'], '.2g')}</td>"
                    f"<td>{'DRIFT' if t['flagged'] else 'no drift'}</td></tr>")
            lines.append("</table>")
        else:
            lines.append("<p>No joint-torque rows: no friction to test.</p>")
        if value["payload"]:
            lines.append("<p>Tools: " + e("; ".join(
                f"{k}: {len(v['points'])} estimates, {_number(v['test']['slope'] * 1e3, '+.3g')}"
                f" g/month (p {_number(v['p_adjusted'], '.2g')})"
                for k, v in value["payload"].items())) + "</p>")
        c = value["contacts"]
        lines.append(f"<p>Contacts: {c['contacts']} in {c['hours']:.3g} h; rate trend "
                     f"{_number(c['test']['slope'], '+.3g')} per hour per month "
                     f"(p {_number(c['test']['p'], '.2g')}, uncorrected)</p>")
        for kind in ("friction", "payload", "contacts"):
            if kind in figures.get(robot, {}):
                lines.append(f"<p><img src='{e(figures[robot][kind])}' style='max-width:100%'>"
                             "</p>")
    lines.append("<p>Numbers: <a href='trends.json'>trends.json</a>.</p></body></html>")
    return "\n".join(lines) + "\n"
