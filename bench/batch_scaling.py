"""Throughput of ``inertial-id batch`` with 1 and 2 workers, and a worker killed mid-run.

A fleet of simulated bags (default 100 bags of 12 s: 1 kHz wrenches, 500 Hz joint states,
payloads of 0.5-3 kg, a quarter with a 0.4 s push, a quarter with a payload change at 6 s,
two robots) is written once (``--dir`` keeps it for later runs), then:

1. ``inertial-id batch DIR --workers 1`` and ``--workers 2`` (the local Dask cluster), each
   timed whole (start-up, imports and the table included): wall time, bags per minute, bag
   seconds per wall second, and the ratio of the two walls;
2. with ``--kill``: a Dask scheduler and two workers started as separate processes, the batch
   sent to them (``--scheduler``), one worker killed (SIGKILL) while it replays; the run must
   still give every bag's row.

The three tables must be equal (``pyarrow.Table.equals`` after reading both back): the rows do
not depend on the worker count or on a lost worker.

    python bench/batch_scaling.py --dir /tmp/fleet --kill --json bench/results/batch_scaling.json
    python bench/batch_scaling.py --bags 20 --duration 8         # a quick look

Timing needs an otherwise idle machine: the two workers share its cores with anything else.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: `bench` as a package

from inertial_id.core.parameters import BodyParameters  # noqa: E402
from inertial_id.core.simulation import Contact, default_payload  # noqa: E402
from inertial_id.tools.synthetic import SimulateOptions, simulate_bag  # noqa: E402

COMMAND = str(Path(sys.executable).parent / "inertial-id")


def fleet_options(index: int, duration: float) -> SimulateOptions:
    """Bag ``index`` of the fleet: its payload (mass 0.5-3 kg, the default payload's CoM and
    inertia scaled with the mass), a push on every fourth bag (30 N along x for 0.4 s at 60 %
    of the bag), a payload change to 1.3 times the mass at half the bag on every fourth bag
    (offset by two), noise and trajectory seeds of its own."""
    rng = np.random.default_rng(index)
    base = default_payload()
    mass = float(rng.uniform(0.5, 3.0))

    def body(m: float) -> BodyParameters:
        return BodyParameters.from_mass_com_inertia(m, base.com, base.inertia_com * m / base.mass)

    contacts = ((Contact(start=0.6 * duration, duration=0.4, force=(30.0, 0.0, 0.0)),)
                if index % 4 == 0 else ())
    change = (0.5 * duration, body(1.3 * mass)) if index % 4 == 2 else None
    return SimulateOptions(duration=duration, payload=body(mass), contacts=contacts,
                           payload_change=change, seed=index, trajectory_seed=1 + index % 5)


def _write(job: tuple[Path, int, float]) -> str:
    folder, index, duration = job
    path = folder / f"robot{index % 2}" / f"bag{index:03d}"
    if not (path / "metadata.yaml").exists():
        simulate_bag(path, fleet_options(index, duration))
    return str(path)


def write_fleet(folder: Path, bags: int, duration: float, processes: int) -> list[str]:
    """Write the fleet's bags under ``folder`` (those already there are kept)."""
    jobs = [(folder, k, duration) for k in range(bags)]
    with ProcessPoolExecutor(processes) as pool:
        return list(pool.map(_write, jobs))


def timed_batch(folder: Path, table: Path, *extra: str) -> dict[str, float]:
    """One whole ``inertial-id batch`` command: its wall time and its exit status."""
    table.unlink(missing_ok=True)
    start = time.perf_counter()
    done = subprocess.run([COMMAND, "batch", str(folder), "--output", str(table),
                           "--no-progress", *extra], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"batch failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return {"wall_s": wall}


ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
"""What a Dask nanny sets for its worker (distributed's ``nanny.pre-spawn-environ``): one BLAS
thread. A worker started without a nanny needs it too, or its sums round differently (last
digits of the std) from the local cluster's."""


def start_module(*args: str) -> subprocess.Popen[bytes]:
    """``python -m ARGS`` in a session of its own, output discarded (a Dask scheduler or
    worker), with one BLAS thread (:data:`ONE_THREAD`)."""
    return subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, **ONE_THREAD})


def start_worker(scheduler_file: Path) -> subprocess.Popen[bytes]:
    """A Dask worker (one thread, no nanny) of the scheduler ``scheduler_file`` describes."""
    return start_module("distributed.cli.dask_worker", "--scheduler-file", str(scheduler_file),
                        "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL a :func:`start_module` process and its children, and reap it."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


def killed_worker_batch(folder: Path, table: Path, kill_after: float) -> dict[str, Any]:
    """The batch on a scheduler and two workers started here, one worker killed (SIGKILL)
    ``kill_after`` s after the batch starts; whether it was replaying a bag then."""
    from distributed import Client

    def executing(dask_worker: Any) -> int:
        return int(dask_worker.state.executing_count)

    scratch = Path(tempfile.mkdtemp(prefix="batch-kill-"))
    scheduler_file = scratch / "scheduler.json"
    processes = [start_module("distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
                              "0", "--no-dashboard", "--scheduler-file", str(scheduler_file))]
    try:
        while not scheduler_file.exists():
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        workers = [start_worker(scheduler_file) for _ in range(2)]
        processes += workers
        with Client(address, timeout="60s") as watcher:
            watcher.wait_for_workers(2, timeout=120)
            table.unlink(missing_ok=True)
            batch = subprocess.Popen([COMMAND, "batch", str(folder), "--output", str(table),
                                      "--no-progress", "--scheduler", address])
            time.sleep(kill_after)
            busy = watcher.run(executing)
            stop_process(workers[0])
            status = batch.wait()
        return {"status": status, "kill_after_s": kill_after,
                "workers_replaying_at_kill": int(sum(1 for v in busy.values() if v))}
    finally:
        for process in reversed(processes):
            stop_process(process)


def equal_tables(a: Path, b: Path) -> bool:
    """Whether two batch tables read back equal (Parquet through pyarrow)."""
    import pyarrow.parquet as pq

    return bool(pq.read_table(a).equals(pq.read_table(b)))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bags", type=int, default=100, help="bags in the fleet (default 100)")
    p.add_argument("--duration", type=float, default=12.0, metavar="S",
                   help="length of each bag, s (default 12)")
    p.add_argument("--dir", type=Path, help="where the fleet is (written if absent; default: "
                   "a temporary directory)")
    p.add_argument("--kill", action="store_true",
                   help="also run on a scheduler and two workers and kill one mid-run")
    p.add_argument("--json", type=Path, metavar="OUT", help="write the figures here")
    args = p.parse_args(argv)
    folder = args.dir or Path(tempfile.mkdtemp(prefix="fleet-"))
    print(f"writing {args.bags} bags of {args.duration:g} s under {folder} ...", flush=True)
    write_fleet(folder, args.bags, args.duration, processes=2)
    tables = {n: folder.parent / f"{folder.name}-w{n}.parquet" for n in (1, 2)}
    runs = {n: timed_batch(folder, tables[n], "--workers", str(n)) for n in (1, 2)}
    bag_seconds = args.bags * args.duration
    for n, run in runs.items():
        run["bags_per_minute"] = 60.0 * args.bags / run["wall_s"]
        run["real_time_factor"] = bag_seconds / run["wall_s"]
        print(f"{n} worker(s): {run['wall_s']:.1f} s wall, {run['bags_per_minute']:.1f} bags/min, "
              f"{run['real_time_factor']:.1f}x real time")
    ratio = runs[1]["wall_s"] / runs[2]["wall_s"]
    same = equal_tables(tables[1], tables[2])
    print(f"2 workers {ratio:.2f}x faster than 1; tables equal: {same}")
    result: dict[str, Any] = {"bags": args.bags, "duration_s": args.duration,
                              "cpus": os.cpu_count(), "load_average": os.getloadavg(),
                              "workers": {str(n): r for n, r in runs.items()},
                              "speedup_2_workers": ratio, "tables_equal": same}
    if args.kill:
        killed_table = folder.parent / f"{folder.name}-killed.parquet"
        kill = killed_worker_batch(folder, killed_table, kill_after=0.3 * runs[2]["wall_s"])
        kill["table_equal"] = equal_tables(tables[1], killed_table)
        print(f"a worker killed after {kill['kill_after_s']:.1f} s (workers replaying then: "
              f"{kill['workers_replaying_at_kill']}): exit {kill['status']}, table equal: "
              f"{kill['table_equal']}")
        result["killed_worker"] = kill
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if same and result.get("killed_worker", {}).get("table_equal", True) else 1


if __name__ == "__main__":
    sys.exit(main())
