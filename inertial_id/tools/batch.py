"""Many bags through the same replay, in parallel on a Dask cluster, into one table.

``inertial-id batch BAG... --output TABLE.parquet|.csv`` runs
:func:`inertial_id.tools.replay.replay`
(payload mode; joint-torque mode: :mod:`inertial_id.tools.batch_torque`) on every bag, one Dask task
per bag, on a :class:`distributed.LocalCluster` of
``--workers`` processes or on an existing cluster (``--scheduler tcp://HOST:PORT``), and
writes one row per bag and payload segment (:data:`COLUMNS`). A bag that fails is a row with
its one-line error; a task whose worker died is retried elsewhere (``retries``); bags already
in the table are skipped (a re-run resumes); rows are sorted by robot, bag and segment, so the
table does not depend on the number of workers or the order the tasks finished in.

Dask and pyarrow are imported here only, when a batch runs: the nodes never need them.
"""

from __future__ import annotations

import csv
import fnmatch
import glob
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inertial_id.core.errors import InertialIdError
from inertial_id.core.parameters import BodyParameters, vector_from_symmetric

if TYPE_CHECKING:
    import pyarrow as pa
    from distributed import Client

    from inertial_id.tools.batch_torque import TorqueSettings
    from inertial_id.tools.replay import ReplayResult

BAG_SUFFIXES = (".mcap", ".db3")
"""Files that are bags by themselves; a directory holding ``metadata.yaml`` is one too."""
SAVE_EVERY = 10.0
"""Seconds at most between two writes of the table while a batch runs (a stopped batch
keeps what it finished)."""
DEFAULT_RETRIES = 2
"""Times Dask runs a bag's task again when its worker dies (a killed process, lost memory)."""

# Column name -> type: "str", "int", "float", "bool", "floats" (a list of floats), "strs",
# "intervals" (a list of [start, end]). Parquet and CSV have the same columns, failures too.
COLUMNS: dict[str, str] = {
    "robot": "str", "bag": "str", "segment": "int", "segments": "int", "error": "str",
    "start_stamp": "float", "end_stamp": "float", "start_s": "float", "end_s": "float",
    "frame": "str", "mass": "float", "com": "floats", "inertia_com": "floats", "pi": "floats",
    "std": "floats", "com_std": "floats", "inertia_com_std": "floats", "wrench_offset": "floats",
    "physically_consistent": "bool", "converged_mass": "bool", "converged_com": "bool",
    "converged_inertia": "bool", "setup_errors": "strs", "contacts": "int",
    "contact_intervals": "intervals", "contact_peak_t2": "floats", "peak_t2": "float",
    "payload_changes": "floats", "wrenches": "int", "synchronised": "int", "samples_used": "int",
    "used_share": "float", "gatherer_dropped": "int", "solver_dropped": "int", "ledger": "str",
    "filter": "str", "filter_window": "int", "filter_lag": "int", "wrench_delay": "float",
    "wrench_delay_estimate": "str", "joints": "strs", "friction_names": "strs",
    "friction": "floats", "friction_std": "floats", "residual_rms": "floats",
}
"""The table's columns. ``start_s``/``end_s`` are seconds since the bag's first message,
``*_stamp`` the same as stamps (s). The last segment carries the replay's final estimate
(DESIGN.md's contract, in its output frame) with its verdicts; an earlier segment (before a
payload change) carries the last estimate solved in it, in the sensor frame, with ``pi`` and
``std`` only: its covariance and verdicts are not kept by the replay (null). ``ledger``,
``filter`` and ``wrench_delay_estimate`` are the replay YAML's sections as JSON. Joint-torque
columns (``joints``, ``friction_names`` ``joint.term``, ``friction``/``friction_std`` in effort
units, ``residual_rms`` per joint: :func:`~inertial_id.core.joint_torque.trends.friction_columns`):
null."""
SORT_KEY = ("robot", "bag", "segment")


@dataclass(frozen=True)
class BagTask:
    """One bag to replay: its path (absolute) and robot."""

    bag: str
    robot: str


@dataclass(frozen=True)
class BatchOptions:
    """What to replay and where. ``workers``: processes of the local cluster (one thread
    each); ``scheduler``: the address of an existing cluster instead; ``torque``: the
    joint-torque mode's settings (None: payload mode)."""

    inputs: tuple[str, ...]
    output: Path
    params: Path | None = None
    manifest: Path | None = None
    workers: int | None = None
    scheduler: str | None = None
    retries: int = DEFAULT_RETRIES
    max_dropped: float = 0.01
    retry_failed: bool = False
    progress: bool = True
    torque: TorqueSettings | None = None


@dataclass(frozen=True)
class BatchSummary:
    """What a batch did: bags found, skipped (already in the table), replayed, failed (of
    those replayed), and the table's rows."""

    found: int
    skipped: int
    replayed: int
    failed: int
    rows: int
    seconds: float


def find_bags(inputs: Iterable[str]) -> list[Path]:
    """Bags named, or found under directories and glob patterns, sorted and without repeats.

    A bag is a directory holding ``metadata.yaml`` (a ROS 2 bag) or a ``.mcap``/``.db3``
    file not inside such a directory; other directories are searched recursively."""
    found: set[Path] = set()
    for item in inputs:
        pattern = any(c in item for c in "*?[")
        paths = [Path(p) for p in sorted(glob.glob(item))] if pattern else [Path(item)]
        if not paths:
            raise InertialIdError(f"{item}: matches no file")
        for path in paths:
            if not path.exists():
                raise InertialIdError(f"{path}: no such bag or directory")
            found.update(_bags_under(path.resolve()))
    return sorted(found)


def _bags_under(path: Path) -> list[Path]:
    if path.is_file() or (path / "metadata.yaml").is_file():
        return [path]
    out = []
    for child in sorted(path.iterdir()):
        if child.is_dir() or child.suffix in BAG_SUFFIXES:
            out.extend(_bags_under(child))
    return out


def load_manifest(path: Path | None) -> dict[str, str]:
    """``{bag path or glob pattern: robot}`` from a manifest YAML (``robots:`` mapping, or the
    mapping itself); relative paths are relative to the manifest's directory."""
    if path is None:
        return {}
    from inertial_id.tools.replay import read_yaml  # the pipeline's imports only when used

    doc = read_yaml(path, "manifest")
    mapping = doc.get("robots", doc) if isinstance(doc, Mapping) else None
    if not isinstance(mapping, Mapping) or not all(
            isinstance(v, str) for v in mapping.values()):
        raise InertialIdError(f"{path}: expected a mapping 'robots: {{BAG or PATTERN: ROBOT}}'")
    base = Path(path).resolve().parent
    return {str(base / str(k)) if not os.path.isabs(str(k)) else str(k): v
            for k, v in mapping.items()}


def robot_of(bag: Path, manifest: Mapping[str, str]) -> str:
    """The robot of a bag: the manifest's entry (a path or glob pattern matching the bag,
    the first in the manifest's order), else the name of the directory holding the bag."""
    for pattern, robot in manifest.items():
        if str(bag) == pattern or fnmatch.fnmatchcase(str(bag), pattern):
            return robot
    return bag.parent.name


def _floats(values: Iterable[Any]) -> list[float]:
    return [float(v) for v in values]


def _empty_row(task: BagTask) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(robot=task.robot, bag=task.bag, segment=0, segments=1)
    return row


def error_row(task: BagTask, error: BaseException | str) -> dict[str, Any]:
    """The row of a bag that failed: its one-line error."""
    text = error if isinstance(error, str) else (
        str(error) if isinstance(error, InertialIdError) else f"{type(error).__name__}: {error}")
    row = _empty_row(task)
    row["error"] = " ".join(text.split()) or type(error).__name__
    return row


def result_rows(task: BagTask, result: ReplayResult) -> list[dict[str, Any]]:
    """One row per payload segment of a replay (:data:`COLUMNS`)."""
    doc = result.to_yaml()
    pipeline = result.pipeline
    start = result.start_time
    times = pipeline.history.batch_time
    end = (max(times) if times else start) - start
    bounds = [0.0, *result.payload_changes, end]
    ledger = doc["ledger"]
    online = pipeline.online
    intervals = [(c.start - start, c.end - start, c.peak_t2) for c in online.contacts]
    choice = doc["filter"]
    delay = doc["wrench_delay"]
    rows = []
    for k in range(len(bounds) - 1):
        a, b = bounds[k], bounds[k + 1]
        last = k == len(bounds) - 2
        mine = [c for c in intervals if a <= c[0] < b or (last and c[0] >= b)]
        row = _empty_row(task)
        row.update(
            segment=k, segments=len(bounds) - 1, start_s=a, end_s=b, start_stamp=start + a,
            end_stamp=start + b, setup_errors=list(doc["setup_errors"]), contacts=len(mine),
            contact_intervals=[[c[0], c[1]] for c in mine],
            contact_peak_t2=[float(c[2]) for c in mine],
            peak_t2=max((float(c[2]) for c in mine), default=None),
            payload_changes=_floats(result.payload_changes),
            wrenches=ledger["wrenches"], synchronised=ledger["synchronised"],
            samples_used=doc["samples_used"], used_share=ledger["used_share"],
            gatherer_dropped=sum(ledger["gatherer_dropped"].values()),
            solver_dropped=sum(ledger["solver_dropped"].values()),
            ledger=json.dumps(ledger, sort_keys=True),
            filter=None if choice is None else json.dumps(choice, sort_keys=True),
            filter_window=None if choice is None else choice["window_samples"],
            filter_lag=None if choice is None else choice["lag_samples"],
            wrench_delay=delay["applied"],
            wrench_delay_estimate=None if delay["estimate"] is None
            else json.dumps(delay["estimate"], sort_keys=True),
        )
        if last:
            row.update(_final_estimate(doc["estimate"], online.verdicts))
        else:
            row.update(_segment_estimate(result, start + a, start + b))
        rows.append(row)
    return rows


def _final_estimate(estimate: Mapping[str, Any] | None, verdicts: Any) -> dict[str, Any]:
    if estimate is None:
        return {}
    return {
        "frame": estimate["frame"], "mass": estimate["mass"], "com": estimate["com"],
        "inertia_com": estimate["inertia_com"], "pi": estimate["pi"], "std": estimate["std"],
        "com_std": estimate["com_std"], "inertia_com_std": estimate["inertia_com_std"],
        "wrench_offset": estimate["wrench_offset"],
        "physically_consistent": estimate["physically_consistent"],
        "converged_mass": verdicts.mass, "converged_com": verdicts.com,
        "converged_inertia": verdicts.inertia,
    }


def _segment_estimate(result: ReplayResult, begin: float, end: float) -> dict[str, Any]:
    """The last estimate solved within [begin, end) (stamps), from the replay's history."""
    history = result.pipeline.history
    inside = [i for i, t in enumerate(history.solve_time) if begin <= t < end]
    if not inside:
        return {}
    i = inside[-1]
    body = BodyParameters.from_pi(history.pi[i])
    return {
        "frame": result.frame, "mass": float(body.mass), "com": _floats(body.com),
        "inertia_com": _floats(vector_from_symmetric(body.inertia_com)),
        "pi": _floats(body.pi), "std": _floats(history.std[i]),
        "wrench_offset": _floats(history.offset[i]),
        "physically_consistent": bool(history.consistent[i]),
    }


def replay_bag(task: BagTask, params: str | None, max_dropped: float) -> list[dict[str, Any]]:
    """The rows of one bag (a Dask task): the replay's segments, or one row with its error.

    Never raises for a bad bag or parameter file; a dying worker process is Dask's to retry."""
    from inertial_id.tools.replay import ReplayOptions, replay

    try:
        result = replay(ReplayOptions(bag=Path(task.bag),
                                      params=None if params is None else Path(params),
                                      progress=False, max_dropped=max_dropped))
        return result_rows(task, result)
    except Exception as exc:  # noqa: BLE001 - any failure is the bag's row, not a dead batch
        return [error_row(task, exc)]


def torque_bag(task: BagTask, settings: TorqueSettings) -> list[dict[str, Any]]:
    """The rows of one bag in joint-torque mode (a Dask task,
    :mod:`inertial_id.tools.batch_torque`): one per phase, or one row with the bag's error."""
    from inertial_id.tools.batch_torque import phase_rows, setup

    try:
        rows = phase_rows(task.bag, settings, setup(settings))
    except Exception as exc:  # noqa: BLE001 - any failure is the bag's row, not a dead batch
        return [error_row(task, exc)]
    return [{**_empty_row(task), **row} for row in rows]


# --- the table -------------------------------------------------------------------------------

def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    types = {"str": pa.string(), "int": pa.int64(), "float": pa.float64(), "bool": pa.bool_(),
             "floats": pa.list_(pa.float64()), "strs": pa.list_(pa.string()),
             "intervals": pa.list_(pa.list_(pa.float64()))}
    return pa.schema([(name, types[kind]) for name, kind in COLUMNS.items()])


def _table_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".csv"):
        raise InertialIdError(f"{path}: the table is .parquet or .csv")
    return suffix[1:]


def sort_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows in the table's order: robot, bag, segment."""
    return sorted(rows, key=lambda r: tuple(r[k] for k in SORT_KEY))


def read_table(path: Path) -> list[dict[str, Any]]:
    """The rows of a table written by :func:`write_table` (none if there is no file)."""
    path = Path(path)
    kind = _table_format(path)
    if not path.exists():
        return []
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(path)
            if table.schema.names != list(COLUMNS):
                raise InertialIdError(f"{path}: not a batch table (its columns differ: "
                                      f"{sorted(set(COLUMNS) ^ set(table.schema.names))})")
            return table.to_pylist()
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if reader.fieldnames != list(COLUMNS):
                raise InertialIdError(f"{path}: not a batch table (its columns differ: "
                                      f"{sorted(set(COLUMNS) ^ set(reader.fieldnames or []))})")
            return [{k: _from_csv(v, COLUMNS[k]) for k, v in r.items()} for r in reader]
    except InertialIdError:
        raise
    except Exception as exc:  # pyarrow, csv and json raise their own types for damaged files
        raise InertialIdError(f"cannot read the table {path}: {exc}") from exc


def _from_csv(text: str, kind: str) -> Any:
    if text == "":
        return None
    if kind == "str":
        return text
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    if kind == "bool":
        return text == "true"
    return json.loads(text)


def _to_csv(value: Any, kind: str) -> str:
    if value is None:
        return ""
    if kind == "bool":
        return "true" if value else "false"
    if kind in ("floats", "strs", "intervals"):
        return json.dumps(value)
    return repr(value) if kind == "float" else str(value)


def write_table(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Write the rows (sorted) as Parquet or CSV, replacing the file atomically."""
    path = Path(path)
    kind = _table_format(path)
    rows = sort_rows(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    try:
        if kind == "parquet":
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_pylist(list(rows), schema=_arrow_schema()), partial)
        else:
            with partial.open("w", newline="", encoding="utf-8") as handle:
                writer = csv.writer(handle)
                writer.writerow(COLUMNS)
                for row in rows:
                    writer.writerow([_to_csv(row[k], t) for k, t in COLUMNS.items()])
        os.replace(partial, path)
    except OSError as exc:
        raise InertialIdError(f"cannot write {path}: {exc.strerror or exc}") from exc


# --- the engine ------------------------------------------------------------------------------

def run_batch(options: BatchOptions) -> BatchSummary:
    """Replay the bags not yet in the table and write it (:mod:`inertial_id.tools.batch`)."""
    began = time.monotonic()
    _table_format(options.output)
    if options.workers is not None and options.workers < 1:
        raise InertialIdError(f"--workers must be at least 1, got {options.workers}")
    if options.retries < 0:
        raise InertialIdError(f"retries must be >= 0, got {options.retries}")
    manifest = load_manifest(options.manifest)
    bags = find_bags(options.inputs)
    if not bags:
        raise InertialIdError("no bags found in " + " ".join(options.inputs))
    if options.params is not None and not Path(options.params).is_file():
        raise InertialIdError(f"{options.params}: no such parameter file")
    params = None if options.params is None else str(Path(options.params).resolve())
    if options.torque is None:
        job = partial(replay_bag, params=params, max_dropped=options.max_dropped)
    else:
        from inertial_id.tools.batch_torque import setup

        if params is not None:
            raise InertialIdError("--params is for payload mode (the joint-torque mode's "
                                  "settings come from the link model)")
        setup(options.torque)  # a bad model is one error, not one per bag
        job = partial(torque_bag, settings=options.torque)
    rows = read_table(options.output)
    keep = [r for r in rows if not (options.retry_failed and r["error"] is not None)]
    done = {r["bag"] for r in keep}
    tasks = [BagTask(str(bag), robot_of(bag, manifest)) for bag in bags if str(bag) not in done]
    failed = 0
    if tasks:
        new_rows = _run_tasks(tasks, options, job, keep)
        failed = sum(1 for r in new_rows if r["error"] is not None and r["segment"] == 0)
        keep += new_rows
    write_table(keep, options.output)
    return BatchSummary(found=len(bags), skipped=len(bags) - len(tasks), replayed=len(tasks),
                        failed=failed, rows=len(keep), seconds=time.monotonic() - began)


@contextmanager
def dask_client(workers: int | None, scheduler: str | None, tasks: int) -> Iterator[Client]:
    """A client of the cluster at ``scheduler``, else of a local cluster of ``workers``
    processes (default: the CPU count; at most ``tasks``), one thread each; both closed at
    the end. ``inertial-id tune`` runs its trials on the same engine."""
    from distributed import Client, LocalCluster

    if workers is not None and workers < 1:
        raise InertialIdError(f"--workers must be at least 1, got {workers}")
    if scheduler:
        cluster = None
        client = Client(scheduler, timeout="20s")
    else:
        count = workers or os.cpu_count() or 1
        cluster = LocalCluster(n_workers=max(1, min(count, tasks)), threads_per_worker=1,
                               processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _run_tasks(tasks: Sequence[BagTask], options: BatchOptions,
               job: Callable[[BagTask], list[dict[str, Any]]],
               previous: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``job`` of every task on the cluster; the table is saved every :data:`SAVE_EVERY` s
    meanwhile and when the batch is stopped, so a re-run resumes there."""
    from distributed import as_completed
    from tqdm import tqdm

    rows: list[dict[str, Any]] = []
    with dask_client(options.workers, options.scheduler, len(tasks)) as client:
        bar = tqdm(total=len(tasks), unit="bag", desc="batch", disable=not options.progress)
        try:
            futures = {client.submit(job, task, retries=options.retries, pure=False): task
                       for task in tasks}
            saved = time.monotonic()
            for future in as_completed(futures):
                try:
                    rows.extend(future.result())
                except Exception as exc:  # noqa: BLE001 - the task died more often than retried
                    rows.append(error_row(futures[future], exc))
                bar.update(1)
                if time.monotonic() - saved > SAVE_EVERY:
                    write_table(previous + rows, options.output)
                    saved = time.monotonic()
        except BaseException:
            write_table(previous + rows, options.output)
            raise
        finally:
            bar.close()
    return rows


def summary_line(summary: BatchSummary) -> str:
    """One line for the terminal."""
    rate = summary.replayed / summary.seconds if summary.seconds > 0 else math.inf
    return (f"{summary.found} bags: {summary.replayed} replayed ({summary.failed} failed), "
            f"{summary.skipped} already in the table; {summary.rows} rows; "
            f"{summary.seconds:.1f} s ({rate:.2f} bags/s)")

