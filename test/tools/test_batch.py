"""``inertial-id batch``: many bags on a real Dask cluster, one table.

Three synthetic bags (two robots, three payloads, a contact and a payload change) and a
corrupt one; the same
table from 2 local workers, 1 local worker, and a scheduler and workers started as separate
processes, one of them killed mid-run."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from bench.batch_scaling import start_module, start_worker, stop_process
from inertial_id.core.errors import InertialIdError
from inertial_id.tools.batch import (
    COLUMNS,
    BagTask,
    BatchOptions,
    error_row,
    find_bags,
    load_manifest,
    read_table,
    robot_of,
    run_batch,
    write_table,
)
from inertial_id.tools.cli import main


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fleet/r1/a, fleet/r2/b (a contact, then another payload: 12 s, as the contact monitor
    trains once the estimate has converged), fleet/r2/c, fleet/r2/corrupt.mcap (not a bag)."""
    root = tmp_path_factory.mktemp("fleet")
    bags = {"r1/a": ["--seed", "1", "--mass", "1.2"],
            "r2/b": ["--seed", "4", "--mass", "1.0", "--duration", "12", "--contact",
                     "5 0.4 0 0 25", "--payload-change", "8 2.0 0 0.01 0.08"],
            "r2/c": ["--seed", "3", "--mass", "2.0", "--com", "0 0.01 0.08"]}
    for name, extra in bags.items():
        assert main(["simulate", "--duration", "6", "--output", str(root / name), *extra]) == 0
    (root / "r2" / "corrupt.mcap").write_bytes(os.urandom(3000))
    return root


@pytest.fixture(scope="module")
def two_workers(fleet: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fleet's table from a local cluster of 2 worker processes (Parquet)."""
    table = tmp_path_factory.mktemp("tables") / "two.parquet"
    summary = run_batch(BatchOptions(inputs=(str(fleet),), output=table, workers=2,
                                     progress=False))
    assert (summary.found, summary.replayed, summary.failed, summary.rows) == (4, 4, 1, 5)
    return table


def test_find_bags_and_robots(fleet: Path, tmp_path: Path) -> None:
    bags = find_bags([str(fleet)])
    assert [b.relative_to(fleet).as_posix() for b in bags] == [
        "r1/a", "r2/b", "r2/c", "r2/corrupt.mcap"]
    assert find_bags([str(fleet / "r2" / "*"), str(fleet / "r2" / "b")]) == bags[1:]
    assert [robot_of(b, {}) for b in bags] == ["r1", "r2", "r2", "r2"]
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(f"robots:\n  {fleet}/r2/c: cell-7\n  '{fleet}/r2/*': cell-3\n")
    robots = load_manifest(manifest)
    assert [robot_of(b, robots) for b in bags] == ["r1", "cell-3", "cell-7", "cell-3"]


def test_rows_of_the_fleet(two_workers: Path, fleet: Path) -> None:
    rows = read_table(two_workers)
    assert [(r["robot"], Path(r["bag"]).name, r["segment"]) for r in rows] == [
        ("r1", "a", 0), ("r2", "b", 0), ("r2", "b", 1), ("r2", "c", 0),
        ("r2", "corrupt.mcap", 0)]
    a, b0, b1, c, corrupt = rows
    assert a["error"] is None and a["mass"] == pytest.approx(1.2, rel=2e-3)
    assert c["mass"] == pytest.approx(2.0, rel=2e-3)
    assert a["converged_mass"] and a["converged_com"] and a["physically_consistent"]
    assert len(a["com"]) == 3 and len(a["inertia_com"]) == 6 and len(a["std"]) == 10
    assert a["end_stamp"] - a["start_stamp"] == pytest.approx(6.0, abs=0.05)
    assert a["setup_errors"] == [] and a["payload_changes"] == []
    assert a["wrenches"] == 6000 and 0 < a["samples_used"] <= a["synchronised"] <= 6000
    assert json.loads(a["ledger"])["used"] == a["samples_used"]
    assert json.loads(a["filter"])["window_samples"] == a["filter_window"]
    assert a["wrench_delay"] == 0.0
    # Before the payload change: the contact, and the last estimate solved then (no verdicts).
    assert b0["segments"] == b1["segments"] == 2
    assert b0["payload_changes"] == b1["payload_changes"] == [b1["start_s"]]
    assert b0["end_s"] == b1["start_s"] == pytest.approx(8.0, abs=0.1)
    assert b0["contacts"] == 1 and b1["contacts"] == 0
    (start, end), = b0["contact_intervals"]
    assert start == pytest.approx(5.0, abs=0.05) and end == pytest.approx(5.4, abs=0.05)
    assert b0["peak_t2"] == b0["contact_peak_t2"][0] > 0
    assert b0["mass"] == pytest.approx(1.0, rel=1e-2) and b0["converged_mass"] is None
    assert b1["mass"] == pytest.approx(2.0, rel=1e-2) and b1["converged_mass"]
    assert "cannot open the bag" in corrupt["error"] and "\n" not in corrupt["error"]
    assert corrupt["mass"] is None


def test_one_worker_gives_the_same_table_and_a_rerun_skips(two_workers: Path, fleet: Path,
                                                           tmp_path: Path) -> None:
    table = tmp_path / "one.csv"
    # The command line: a failed bag makes the exit status 3, the batch goes on.
    assert main(["batch", str(fleet), "--output", str(table), "--workers", "1",
                 "--no-progress"]) == 3
    assert read_table(table) == read_table(two_workers)  # CSV keeps every value exactly
    before = table.read_bytes()
    again = run_batch(BatchOptions(inputs=(str(fleet),), output=table, progress=False))
    assert (again.skipped, again.replayed) == (4, 0)
    assert table.read_bytes() == before


def test_a_rerun_replays_only_the_new_and_on_request_the_failed(two_workers: Path,
                                                                 fleet: Path,
                                                                 tmp_path: Path) -> None:
    table = tmp_path / "partial.parquet"
    rows = read_table(two_workers)
    write_table([r for r in rows if not r["bag"].endswith("/c")], table)
    summary = run_batch(BatchOptions(inputs=(str(fleet),), output=table, workers=1,
                                     retry_failed=True, progress=False))
    assert (summary.skipped, summary.replayed, summary.failed) == (2, 2, 1)
    assert read_table(table) == rows


def test_error_rows_are_one_line_and_tables_reject_others(tmp_path: Path) -> None:
    row = error_row(BagTask("/x/bag", "r"), ValueError("bad\n  value"))
    assert row["error"] == "ValueError: bad value" and set(row) == set(COLUMNS)
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(InertialIdError, match="not a batch table"):
        read_table(other)
    with pytest.raises(InertialIdError, match=r"\.parquet or \.csv"):
        read_table(tmp_path / "table.txt")


def _wait(condition: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        time.sleep(0.05)


def test_existing_cluster_with_a_worker_killed_mid_run(two_workers: Path, fleet: Path,
                                                       tmp_path: Path) -> None:
    """A scheduler and a worker as separate processes; the worker is killed while it
    replays, a second one joins, and the table is the local cluster's."""
    from distributed import Client

    def executing(dask_worker: object) -> int:  # pickled by value: the workers lack test/
        return dask_worker.state.executing_count  # type: ignore[attr-defined]

    scheduler_file = tmp_path / "scheduler.json"
    scheduler = start_module("distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
                             "0", "--no-dashboard", "--scheduler-file", str(scheduler_file))
    processes = [scheduler]
    try:
        _wait(scheduler_file.exists, 60, "the scheduler")
        address = json.loads(scheduler_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        first = start_worker(scheduler_file)
        processes.append(first)
        table = tmp_path / "cluster.parquet"
        status: list[int] = []
        batch = threading.Thread(target=lambda: status.append(main(
            ["batch", str(fleet), "--output", str(table), "--scheduler", address,
             "--no-progress"])))
        with Client(address, timeout="30s") as watcher:
            batch.start()
            _wait(lambda: any(watcher.run(executing).values()), 120, "a bag being replayed")
            stop_process(first)
            processes.append(start_worker(scheduler_file))
            batch.join(timeout=180)
        assert not batch.is_alive() and status == [3]  # 3: the corrupt bag
        assert read_table(table) == read_table(two_workers)
    finally:
        for process in reversed(processes):
            stop_process(process)
