"""``inertial-id tune``: a parameter search over bags, on the batch's Dask engine.

Optuna's TPE sampler proposes values of the tunables (:data:`SPACE_HELP`); each proposal is
written as the nodes' parameter file (on top of ``--params``) and every tuning bag is replayed
with it (:func:`inertial_id.tools.tuning.evaluate_bag`, one Dask task per bag and trial, on the
cluster :func:`inertial_id.tools.batch.dask_client` gives). Trials go in generations of
``parallel`` proposals, told to the sampler in their order once all of the generation is
done: the search depends on the seed only, not on the workers or the order tasks finish in.
The defaults and the best trial are then scored on held-out bags the search never saw.
Optuna is imported here only, when a search runs.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inertial_id.core.errors import InertialIdError
from inertial_id.tools.arguments import add_engine
from inertial_id.tools.tuning import (
    BagOutcome,
    Label,
    Score,
    kind_of,
    load_labels,
    score,
    split_bags,
    write_params,
)

SPACE_HELP = """\
search space (read-only parameters need a node restart, live ones apply while it runs):
  solver force_noise_std      0.01 .. 1 N, log           live: weight of the force rows
  solver torque_noise_std     0.0005 .. 0.05 N m, log    live: weight of the torque rows
  solver forgetting_factor    1 - 10^(-9 .. -3)          live: 1 - 1e-9 forgets nothing in a
                                                         day at 1 kHz; 1 - 1e-3: 1 s memory
  solver confidence           1 - 10^(-7 .. -2)          live: the T^2 threshold's confidence
  solver on_samples           1 .. 50, log               live: samples above it start a contact
  solver off_samples          1 .. 200, log              live: samples below it end a contact
  solver release              0.3 .. 1                   live: hysteresis of the threshold
  solver gate_margin          0 .. 0.3 s                 live: data left out around a contact
  gatherer filter_window      0 (chosen from the data) or 0.02 .. 0.25 s   read-only
  gatherer polyorder          2 .. 4                     read-only: Savitzky-Golay order"""
SEARCHED = {"gatherer": ("filter_window", "polyorder"),
            "solver": ("force_noise_std", "torque_noise_std", "forgetting_factor", "confidence",
                       "on_samples", "off_samples", "release", "gate_margin")}
"""The parameters searched, per node (what :func:`suggest` sets)."""
DEFAULT_PARALLEL = 4
"""Trials proposed at once (a generation): the search's result depends on it and the seed,
not on the number of workers."""
RETRIES = 2
"""Times a task whose worker died runs again elsewhere (as in the batch)."""


def _significant(value: float, digits: int = 4) -> float:
    return float(f"{value:.{digits}g}")


def suggest(trial: Any) -> dict[str, dict[str, Any]]:
    """The tunables' values of an Optuna trial (:data:`SPACE_HELP`), rounded to 4 significant
    digits as the parameter file will hold them (what is scored is what is written)."""
    f = trial.suggest_float
    solver = {
        "force_noise_std": _significant(f("force_noise_std", 0.01, 1.0, log=True)),
        "torque_noise_std": _significant(f("torque_noise_std", 5e-4, 0.05, log=True)),
        "forgetting_factor": 1.0 - _significant(10.0 ** f("log10_forgetting", -9.0, -3.0)),
        "confidence": 1.0 - _significant(10.0 ** f("log10_false_alarm", -7.0, -2.0)),
        "on_samples": trial.suggest_int("on_samples", 1, 50, log=True),
        "off_samples": trial.suggest_int("off_samples", 1, 200, log=True),
        "release": _significant(f("release", 0.3, 1.0)),
        "gate_margin": _significant(f("gate_margin", 0.0, 0.3)),
    }
    chosen = trial.suggest_categorical("filter_window_from_data", [True, False])
    window = 0.0 if chosen else _significant(f("filter_window", 0.02, 0.25))
    gatherer = {"filter_window": window, "polyorder": trial.suggest_int("polyorder", 2, 4)}
    return {"gatherer": gatherer, "solver": solver}


def searched_defaults(effective: Mapping[str, Mapping[str, Any]]
                      ) -> dict[str, dict[str, Any]]:
    """The searched parameters' values the nodes would take from the table
    (:mod:`inertial_id.params.table`), for those that ``effective`` (``{node: {name: value}}``
    of the base file) does not set: the defaults are then written out in full."""
    from inertial_id.params.table import NODE_PARAMS

    out: dict[str, dict[str, Any]] = {}
    for node, names in SEARCHED.items():
        table = {p.name: p.default for p in NODE_PARAMS[node]}
        given = effective.get(node, {})
        out[node] = {name: table[name] for name in names if name not in given}
    return out


def _node(key: Any) -> str:
    return str(key).lstrip("/").split("/")[-1]


def with_values(base: Mapping[str, Any], values: Mapping[str, Mapping[str, Any]]
                ) -> dict[str, Any]:
    """The parameter file ``base`` with ``values`` (``{node: {name: value}}``) set in its
    node sections (a ``/**/<node>`` section when it has none). Those sections go last, after
    any ``/**`` section, so they are what the nodes and replay read."""
    doc = {k: v for k, v in base.items() if _node(k) not in values}
    for node, params in values.items():
        keys = [k for k in base if _node(k) == node]
        key = keys[-1] if keys else f"/**/{node}"
        section = {k: dict(v) if isinstance(v, Mapping) else v
                   for k, v in (base.get(key) or {}).items()} if keys else {}
        section.setdefault("ros__parameters", {}).update(params)
        doc[key] = section
    return doc


@dataclass(frozen=True)
class TuneOptions:
    """What to tune on and how (see ``inertial-id tune --help``)."""

    inputs: tuple[str, ...]
    output: Path
    labels: Path | None = None
    trials: int = 30
    params: Path | None = None
    workers: int | None = None
    scheduler: str | None = None
    seed: int = 0
    holdout: float = 0.5
    parallel: int = DEFAULT_PARALLEL
    max_dropped: float = 0.01
    report: Path | None = None
    progress: bool = True


@dataclass
class TrialRecord:
    """One evaluated parameter set: its trial number (-1: the defaults), values, score."""

    number: int
    values: dict[str, dict[str, Any]]
    score: Score


@dataclass
class TuneResult:
    """What a search found; ``tuned`` is the written file's document."""

    kind: str
    tuning: list[str]
    held_out: list[str]
    defaults: TrialRecord
    trials: list[TrialRecord]
    best: TrialRecord | None
    tuned: dict[str, Any]
    default_held_out: Score | None = None
    tuned_held_out: Score | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def improvement(self) -> float | None:
        """Held-out loss of the defaults minus that of the tuned parameters, as a share of
        the defaults' (None without held-out bags or finite scores)."""
        d, t = self.default_held_out, self.tuned_held_out
        if d is None or t is None or not (math.isfinite(d.loss) and math.isfinite(t.loss)):
            return None
        return (d.loss - t.loss) / d.loss if d.loss > 0 else 0.0


def _outcomes(futures: Sequence[Any], bags: Sequence[str]) -> list[BagOutcome]:
    out = []
    for future, bag in zip(futures, bags, strict=True):
        try:
            out.append(future.result())
        except Exception as exc:  # noqa: BLE001 - the task died more often than retried
            out.append(BagOutcome(bag=bag, error=f"{type(exc).__name__}: {exc}"))
    return out


def _submit(client: Any, bags: Sequence[str], doc: Mapping[str, Any],
            options: TuneOptions) -> list[Any]:
    from inertial_id.tools.tuning import evaluate_bag

    return [client.submit(evaluate_bag, bag, doc, options.max_dropped, pure=False,
                          retries=RETRIES) for bag in bags]


def _check(options: TuneOptions) -> None:
    if options.trials < 1:
        raise InertialIdError(f"--trials must be at least 1, got {options.trials}")
    if options.parallel < 1:
        raise InertialIdError(f"--parallel must be at least 1, got {options.parallel}")
    if not 0.0 <= options.max_dropped <= 1.0:
        raise InertialIdError(f"--max-dropped must be in [0, 1], got {options.max_dropped}")


def run_tune(options: TuneOptions, client: Any = None) -> TuneResult:
    """The search, the held-out scores and the parameter file (module docstring); on
    ``client``'s cluster when given, else on :func:`inertial_id.tools.batch.dask_client`'s."""
    from inertial_id.tools.batch import dask_client, find_bags
    from inertial_id.tools.replay import load_params, read_yaml

    _check(options)
    bags = find_bags(options.inputs)
    if not bags:
        raise InertialIdError("no bags found in " + " ".join(options.inputs))
    labels = load_labels(options.labels, bags) if options.labels else {
        str(b): Label() for b in bags}
    tuning, held_out = split_bags([str(b) for b in bags], options.holdout, options.seed)
    effective = load_params(options.params)  # a bad base file fails here, in replay's words
    base = dict(read_yaml(options.params, "parameter file")) if options.params else {}
    base = with_values(base, searched_defaults(effective))
    if client is not None:
        return _search(client, options, base, labels, tuning, held_out)
    tasks = len(tuning) * options.parallel
    with dask_client(options.workers, options.scheduler, tasks) as own:
        return _search(own, options, base, labels, tuning, held_out)


def _search(client: Any, options: TuneOptions, base: dict[str, Any],
            labels: Mapping[str, Label], tuning: list[str], held_out: list[str]
            ) -> TuneResult:
    import optuna
    from tqdm import tqdm

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    kind = kind_of(labels)
    sampler = optuna.samplers.TPESampler(seed=options.seed,
                                         n_startup_trials=min(10, max(1, options.trials // 3)))
    study = optuna.create_study(direction="minimize", sampler=sampler)
    bar = tqdm(total=options.trials, unit="trial", desc="tune", disable=not options.progress)
    default_futures = _submit(client, tuning, base, options)
    records: list[TrialRecord] = []
    try:
        while len(records) < options.trials:
            asked = []
            for _ in range(min(options.parallel, options.trials - len(records))):
                trial = study.ask()
                values = suggest(trial)
                asked.append((trial, values, _submit(client, tuning,
                                                     with_values(base, values), options)))
            for trial, values, futures in asked:
                result = score(_outcomes(futures, tuning), labels, kind)
                if math.isfinite(result.loss):
                    study.tell(trial, result.loss)
                else:
                    study.tell(trial, state=optuna.trial.TrialState.FAIL)
                records.append(TrialRecord(trial.number, values, result))
                bar.update(1)
    finally:
        bar.close()
    defaults = TrialRecord(-1, {}, score(_outcomes(default_futures, tuning), labels, kind))
    finite = [r for r in records if math.isfinite(r.score.loss)]
    best = min(finite, key=lambda r: (r.score.loss, r.number)) if finite else None
    result = TuneResult(kind=kind, tuning=tuning, held_out=held_out, defaults=defaults,
                        trials=records, best=best, tuned=dict(base))
    if best is not None and best.score.loss < defaults.score.loss:
        result.tuned = with_values(base, best.values)
    else:
        result.notes.append("no trial beat the defaults on the tuning bags: the parameter "
                            "file holds the defaults")
    if kind == "unlabelled":
        result.notes.append("no labels: scored by held-out wrench prediction and the std's "
                            "calibration")
    if kind == "labelled" and held_out and all(labels[b].empty for b in held_out):
        result.notes.append("the held-out bags carry no labels: their scores say nothing")
    if held_out:
        first = _submit(client, held_out, base, options)
        second = _submit(client, held_out, result.tuned, options) if best is not None and (
            result.tuned != base) else None
        result.default_held_out = score(_outcomes(first, held_out), labels, kind)
        result.tuned_held_out = (result.default_held_out if second is None
                                 else score(_outcomes(second, held_out), labels, kind))
    else:
        result.notes.append("no held-out bags (--holdout 0): the scores are on the bags the "
                            "search tuned on")
    return result


def _parts(s: Score) -> str:
    if s.failed:
        return f"failed on {len(s.failed)} bag(s): " + ", ".join(Path(b).name for b in s.failed)
    return f"loss {s.loss:.4g} (" + ", ".join(f"{k} {v:.4g}" for k, v in s.parts.items()) + ")"


def trade_off(records: Sequence[TrialRecord]) -> list[TrialRecord]:
    """The trials no other trial beats on both missed contacts and false alarms per hour,
    by false alarms (the trade-off a user picks from)."""
    scored = [r for r in records if "recall" in r.score.parts]
    def key(r: TrialRecord) -> tuple[float, float]:
        return 1.0 - r.score.parts["recall"], r.score.parts["false_alarms_per_hour"]
    front = [r for r in scored if not any(
        key(o) <= key(r) and key(o) != key(r) for o in scored)]
    return sorted(front, key=lambda r: (key(r)[1], key(r)[0], r.number))


def report_lines(result: TuneResult, options: TuneOptions) -> list[str]:
    """What the search did, for the terminal and ``--report``."""
    lines = [f"{len(result.tuning)} tuning bag(s), {len(result.held_out)} held out; "
             f"objective: {result.kind}; {len(result.trials)} trials, seed {options.seed}"]
    lines += [f"note: {n}" for n in result.notes]
    lines.append(f"defaults on the tuning bags: {_parts(result.defaults.score)}")
    if result.best is not None:
        lines.append(f"best trial {result.best.number} on the tuning bags: "
                     f"{_parts(result.best.score)}")
        for node, values in result.best.values.items():
            lines.append(f"  {node}: " + ", ".join(f"{k} {v!r}" for k, v in values.items()))
    failed = sum(1 for r in result.trials if not math.isfinite(r.score.loss))
    if failed:
        lines.append(f"{failed} trial(s) failed on a bag (their values are not usable)")
    if result.default_held_out is not None and result.tuned_held_out is not None:
        lines.append(f"held out, defaults: {_parts(result.default_held_out)}")
        lines.append(f"held out, tuned:    {_parts(result.tuned_held_out)}")
        gain = result.improvement
        if gain is not None:
            verb = "beats" if gain > 0 else "does not beat"
            lines.append(f"tuned {verb} the defaults on the held-out bags by "
                         f"{100.0 * gain:.1f} % of their loss")
    front = trade_off(result.trials)
    if front:
        lines.append("trade-off (trials no other beats on both): false alarms/h, recall, "
                     "onset delay s, confidence, on_samples, off_samples")
        for r in front:
            p, s = r.score.parts, r.values["solver"]
            lines.append(f"  trial {r.number:3d}: {p['false_alarms_per_hour']:8.1f} "
                         f"{p['recall']:6.3f} {p['onset_delay_s']:7.3f} {s['confidence']:.9g} "
                         f"{s['on_samples']} {s['off_samples']}")
    return lines


def header(result: TuneResult, options: TuneOptions) -> str:
    """The parameter file's comment: how it was made and what it scored."""
    lines = [f"inertial-id tune: {len(result.trials)} trials (seed {options.seed}) on "
             f"{len(result.tuning)} bag(s), objective {result.kind}"]
    if result.best is not None:
        lines.append(f"tuning bags: defaults loss {result.defaults.score.loss:.4g}, "
                     f"best trial {result.best.number} {result.best.score.loss:.4g}")
    if result.improvement is not None:
        assert result.default_held_out is not None and result.tuned_held_out is not None
        lines.append(f"{len(result.held_out)} held-out bag(s): defaults loss "
                     f"{result.default_held_out.loss:.4g}, tuned "
                     f"{result.tuned_held_out.loss:.4g} ({100.0 * result.improvement:.1f} % "
                     "better)")
    return "\n".join(lines + result.notes)


TUNE_HELP = """\
Search the nodes' tunables for the values that work best across recordings. Every trial is a
set of values (Optuna's TPE sampler, seeded), written as the nodes' parameter file on top of
--params and replayed on every tuning bag with the same pipeline as `replay`, in parallel on
the batch's Dask engine (a local cluster of --workers processes, or --scheduler). The bags
are split (seeded) into tuning bags and --holdout bags the search never sees; the defaults
and the best trial are scored on those, and the command says by how much the tuned values
beat the defaults. Objective from LABELS.yaml (paths relative to it):

  bags:
    r1/a: {payload: {mass: 1.2, com: [0, 0.01, 0.08]}, contacts: [[5.0, 5.4]]}
    r1/b: {contacts: []}          # known to be contact-free

payload: mass and CoM (output frame) at the end of the bag; 1 % of mass counts as 1 mm of
CoM. contacts: s since the bag's first message; missed share + 0.01 per false alarm per
hour + the mean onset delay in s. Without labels: the error of each 2 s block's wrenches
predicted by the estimate before it (N, torques over 0.1 m), times the std's
miscalibration. Writes PARAMS.yaml (the nodes and `replay --params` load it as it is;
--output must not be --params) and prints the trade-off of false alarms against missed
contacts. See docs/fleet.md.

""" + SPACE_HELP


def add_tune_parser(sub: argparse._SubParsersAction) -> None:
    """The ``tune`` subcommand's arguments."""
    tune = sub.add_parser("tune", help="parameter search over bags, scored on held-out bags",
                          description=TUNE_HELP,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    tune.add_argument("bags", nargs="+", metavar="BAG",
                      help="bag (directory or .mcap/.db3 file), directory of bags, or glob")
    tune.add_argument("--labels", type=Path, metavar="LABELS.yaml",
                      help="what is known of the bags (payloads, contacts); none: unlabelled")
    tune.add_argument("--trials", type=int, default=30, metavar="N",
                      help="parameter sets tried (default 30)")
    tune.add_argument("--output", type=Path, required=True, metavar="PARAMS.yaml",
                      help="the tuned parameter file")
    tune.add_argument("--params", type=Path, metavar="YAML",
                      help="the parameter file to start from (its values are the defaults)")
    add_engine(tune)
    tune.add_argument("--seed", type=int, default=0,
                      help="seed of the split and the sampler (default 0)")
    tune.add_argument("--holdout", type=float, default=0.5, metavar="SHARE",
                      help="share of the bags held out for scoring (default 0.5; 0: none)")
    tune.add_argument("--parallel", type=int, default=DEFAULT_PARALLEL, metavar="N",
                      help="trials proposed and evaluated at once (default 4)")
    tune.add_argument("--report", type=Path, metavar="REPORT.txt",
                      help="also write the summary and every trial's score here")
    tune.add_argument("--max-dropped", type=float, default=0.01, metavar="SHARE",
                      help="a replay fails when more than this share of its messages is "
                           "unusable (default 0.01)")
    tune.add_argument("--no-progress", action="store_true", help="no progress bar")


def run_tune_command(args: argparse.Namespace) -> int:
    """``inertial-id tune``: exit 0 when the tuned file was written."""
    from inertial_id.tools.arguments import check_writable

    check_writable(args.output)
    if args.report:
        check_writable(args.report)
    if args.params is not None and Path(args.params).resolve() == Path(args.output).resolve():
        raise InertialIdError("--output must not overwrite --params (the defaults)")
    options = TuneOptions(
        inputs=tuple(args.bags), output=args.output, labels=args.labels, trials=args.trials,
        params=args.params, workers=args.workers, scheduler=args.scheduler, seed=args.seed,
        holdout=args.holdout, parallel=args.parallel, max_dropped=args.max_dropped,
        report=args.report, progress=not args.no_progress)
    result = run_tune(options)
    write_params(result.tuned, args.output, header(result, options))
    lines = report_lines(result, options)
    print("\n".join(lines))
    if args.report:
        trials = [f"trial {r.number}: {_parts(r.score)}; {r.values}" for r in result.trials]
        Path(args.report).write_text("\n".join([*lines, "", *trials]) + "\n")
        print(f"wrote {args.report}")
    print(f"wrote {args.output}")
    return 0
