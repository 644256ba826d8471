"""Speed of offline replay: real-time factor and where the time goes, per sample.

A synthetic bag (default 60 s, 1 kHz wrenches, 500 Hz joint states; written to a temporary
directory unless ``--bag`` is given) is replayed twice:

- end to end with :func:`inertial_id.tools.replay.replay` (progress bar off): its wall time gives
  the real-time factor, bag duration / wall time, and its CPU time the factor on an idle core
  (target: >= 100x per core);
- by replay's loop (:func:`inertial_id.tools.feeding.feed`) with the pipeline's stages wrapped in
  timers (the same :class:`BagReader`, the same pipeline from :func:`build_pipeline`, the
  same passes: every ``PROCESS_PERIOD`` seconds of bag time while the gatherer chooses its
  filter, every ``SETTLED_PERIOD`` once it is settled): bag reading + decoding
  (``BagReader.blocks``, timed per block of up to 2048 messages decoded at once), gatherer
  (``add_block``, ``add_messages`` and ``pop_ready``), kinematics
  (``SensorKinematics.compute``), estimator (``OnlineEstimator.add``) and solves.

A third pass times ``BagReader.blocks()`` alone (MCAP chunks read and decoded in
``bags.py``), and for comparison rosbags' reader on the same connections, the block decoding
of the payloads it reads and rosbags' own deserialiser on them.

    python bench/replay_speed.py                      # 60 s bag, table on stdout
    python bench/replay_speed.py --duration 20 --json speed.json
    python bench/replay_speed.py --bag recording/ --params config/inertial_id.yaml
    python bench/replay_speed.py --settled-period 0.1  # instrumented loop, replay's old passes

Costs are per synchronised sample (one per wrench message), in microseconds of CPU; 1000 us
per sample is real time at 1 kHz, so the target of 100x is 10 us per sample in total. The
exit status is 1 while the CPU factor misses it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rosbags.highlevel import AnyReader  # noqa: E402

from inertial_id.io.bags import BLOCK_MESSAGES, JOINT_STATE, TYPESTORE, BagReader  # noqa: E402
from inertial_id.io.cdr import CdrDecoder  # noqa: E402
from inertial_id.tools.feeding import PROCESS_PERIOD, SETTLED_PERIOD, feed  # noqa: E402
from inertial_id.tools.replay import (  # noqa: E402
    ReplayOptions,
    apply_overrides,
    build_pipeline,
    load_params,
    replay,
    resolve_urdf,
)
from inertial_id.tools.synthetic import SimulateOptions, simulate_bag  # noqa: E402

TARGET = 100.0
"""Real-time factor per core (bag duration / CPU time) the replay should reach."""
STAGES = ("read", "gatherer_add", "gatherer_pop", "kinematics", "estimator", "solve",
          "other")
LABELS = {
    "read": "bag read + decode (BagReader.blocks)",
    "gatherer_add": "gatherer: add_block / add_messages",
    "gatherer_pop": "gatherer: pop_ready (sync, kinematics, matched S-G)",
    "kinematics": "kinematics stage (plain filter only)",
    "estimator": "estimator: OnlineEstimator.add",
    "solve": "solves: PayloadPipeline.solve",
    "other": "loop, history, bookkeeping",
}


@dataclass
class Breakdown:
    """Seconds spent per stage of the instrumented replay loop (wall and CPU time of this
    process), and what was processed."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    cpu_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    wall: float = 0.0
    cpu: float = 0.0
    messages: int = 0
    samples: int = 0
    solves: int = 0

    def per_sample_us(self) -> dict[str, float]:
        """Microseconds per synchronised sample, per stage."""
        n = max(self.samples, 1)
        return {k: 1e6 * v / n for k, v in self.seconds.items()}


class Clock:
    """Accumulates ``perf_counter`` (wall) and ``process_time`` (CPU) intervals into a
    :class:`Breakdown` stage. CPU time is what the replay would take on an idle machine."""

    def __init__(self, breakdown: Breakdown) -> None:
        self.breakdown = breakdown
        self._stage = ""
        self._start = (0.0, 0.0)

    def __call__(self, stage: str) -> Clock:
        self._stage = stage
        return self

    def __enter__(self) -> None:
        self._start = (time.perf_counter(), time.process_time())

    def __exit__(self, *exc: object) -> None:
        self.breakdown.seconds[self._stage] += time.perf_counter() - self._start[0]
        self.breakdown.cpu_seconds[self._stage] += time.process_time() - self._start[1]


def _timed_blocks(bag: BagReader, clock: Clock, chunk: int = 16) -> Iterator[Any]:
    """``bag.blocks()`` with the reading charged to ``read``; ``chunk`` blocks (or messages
    decoded one by one) per timer call, so that the timers cost nothing noticeable."""
    iterator = bag.blocks()
    while True:
        with clock("read"):
            items = list(itertools.islice(iterator, chunk))
        if not items:
            return
        yield from items


def _timed(clock: Clock, stage: str, function: Any) -> Any:
    """``function`` with its time charged to ``stage``."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with clock(stage):
            return function(*args, **kwargs)

    return wrapper


def instrumented(bag_path: Path, params_path: Path | None, period: float,
                 settled_period: float) -> Breakdown:
    """Replay's loop with the pipeline's stages timed (wrapped, not copied)."""
    out = Breakdown()
    clock = Clock(out)
    start, cpu = time.perf_counter(), time.process_time()
    params = load_params(params_path)
    apply_overrides(ReplayOptions(bag_path), params)
    with BagReader(bag_path) as bag:
        pipeline = build_pipeline(params, resolve_urdf(params["kinematics"], bag))
        gathering, online = pipeline.gathering, pipeline.online
        pipeline.add_messages = _timed(clock, "gatherer_add", pipeline.add_messages)
        pipeline.add_block = _timed(clock, "gatherer_add", pipeline.add_block)
        gathering.pop_ready = _timed(clock, "gatherer_pop", gathering.pop_ready)
        pipeline.kinematics.compute = _timed(clock, "kinematics", pipeline.kinematics.compute)
        online.add = _timed(clock, "estimator", online.add)
        online.solve = _timed(clock, "solve", online.solve)
        feed(_timed_blocks(bag, clock), pipeline, period, settled_period=settled_period)
        out.messages = bag.message_count
        pipeline.finish()
        out.solves = len(pipeline.history.solve_time)
    out.wall, out.cpu = time.perf_counter() - start, time.process_time() - cpu
    out.samples = pipeline.samples
    out.seconds["other"] += out.wall - sum(out.seconds.values())
    out.cpu_seconds["other"] += out.cpu - sum(out.cpu_seconds.values())
    return out


def reading_split(bag_path: Path) -> dict[str, float]:
    """CPU seconds of ``BagReader.blocks()`` alone; for comparison, of rosbags' reader on the
    same messages, of their block decoding (``CdrDecoder.block``, on the payloads it read)
    and of rosbags' own CDR deserialisation."""
    with BagReader(bag_path) as bag:
        assert bag.topics is not None
        wanted = {bag.topics.joint_states, bag.topics.wrench}
        start = time.process_time()
        for _ in bag.blocks():
            pass
        total = time.process_time() - start
    with AnyReader([bag_path], default_typestore=TYPESTORE) as reader:
        connections = [c for c in reader.connections if c.topic in wanted]
        start = time.process_time()
        raw = [(c.msgtype, data) for c, _, data in reader.messages(connections=connections)]
        read = time.process_time() - start
        decoder = CdrDecoder()
        start = time.process_time()
        for first in range(0, len(raw), BLOCK_MESSAGES):
            part = raw[first : first + BLOCK_MESSAGES]
            decoder.block([t != JOINT_STATE for t, _ in part], [data for _, data in part])
        decode = time.process_time() - start
        start = time.process_time()
        for msgtype, data in raw:
            reader.deserialize(data, msgtype)
        rosbags = time.process_time() - start
    return {"bag_messages": total, "raw_read": read, "decode": decode,
            "rosbags_deserialise": rosbags, "messages": len(raw)}


def end_to_end(bag_path: Path, params_path: Path | None, runs: int) -> dict[str, float]:
    """Median wall and CPU time of ``replay()`` over ``runs`` runs (s), samples processed,
    bag duration (s)."""
    walls, cpus = [], []
    for _ in range(runs):
        start, cpu = time.perf_counter(), time.process_time()
        result = replay(ReplayOptions(bag_path, params=params_path, progress=False))
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    with BagReader(bag_path) as bag:
        duration = bag.duration
    return {"wall_s": float(np.median(walls)), "cpu_s": float(np.median(cpus)),
            "walls_s": walls, "runs": runs, "samples": result.samples_processed,
            "duration_s": duration}


def report(numbers: dict[str, Any]) -> str:
    """The human-readable table."""
    b, split, e2e = numbers["breakdown"], numbers["reading_split"], numbers["replay"]
    n = max(b["samples"], 1)
    duration = numbers["bag_duration_s"]
    verdict = "met" if numbers["real_time_factor_cpu"] >= TARGET else "NOT met"
    lines = [
        f"bag {numbers['bag']}: {duration:.1f} s, {b['messages']} messages, "
        f"{b['samples']} synchronised samples",
        f"replay() end to end, median of {e2e['runs']}: {e2e['wall_s']:.2f} s wall -> "
        f"{numbers['real_time_factor']:.1f}x real time; CPU {e2e['cpu_s']:.2f} s -> "
        f"{numbers['real_time_factor_cpu']:.1f}x per core (target >= {TARGET:.0f}x: {verdict})",
        f"instrumented loop (pipeline every {numbers['process_period']} s of bag time, "
        f"{numbers['settled_period']} s once the filter is settled): "
        f"{b['wall_s']:.2f} s wall ({duration / b['wall_s']:.1f}x), CPU {b['cpu_s']:.2f} s "
        f"({duration / max(b['cpu_s'], 1e-9):.1f}x)",
        "",
        f"{'stage':<46} {'wall s':>7} {'CPU s':>7} {'share':>6} {'CPU us/sample':>14}",
    ]
    for stage in STAGES:
        cpu = b["cpu_seconds"][stage]
        lines.append(f"{LABELS[stage]:<46} {b['seconds'][stage]:7.2f} {cpu:7.2f} "
                     f"{100 * cpu / max(b['cpu_s'], 1e-9):5.1f}% {1e6 * cpu / n:14.1f}")
    lines.append(f"{'total':<46} {b['wall_s']:7.2f} {b['cpu_s']:7.2f} {100.0:5.1f}% "
                 f"{1e6 * b['cpu_s'] / n:14.1f}")
    solve_ms = 1e3 * b["cpu_seconds"]["solve"] / max(b["solves"], 1)
    lines += [
        f"  {b['solves']} solves, {solve_ms:.1f} ms CPU each; budget for {TARGET:.0f}x: "
        f"{1e6 * duration / TARGET / n:.0f} us/sample",
        f"BagReader.blocks() alone: {split['bag_messages']:.2f} s CPU "
        f"({1e6 * split['bag_messages'] / n:.1f} us/sample); rosbags' reader "
        f"{split['raw_read']:.2f} s ({1e6 * split['raw_read'] / n:.1f} us/sample), block "
        f"decoding {split['decode']:.2f} s ({1e6 * split['decode'] / n:.1f} us/sample; rosbags' "
        f"deserialiser would take {1e6 * split['rosbags_deserialise'] / n:.1f} us/sample)",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; exit status 1 when the real-time target (per core) is missed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bag", type=Path, help="replay this bag instead of a synthetic one")
    parser.add_argument("--duration", type=float, default=60.0,
                        help="synthetic bag length, s (default: %(default)s)")
    parser.add_argument("--params", type=Path, help="nodes' parameter file (as replay --params)")
    parser.add_argument("--process-period", type=float, default=PROCESS_PERIOD,
                        help="bag seconds per pipeline pass in the instrumented loop while "
                             "the filter is chosen (default: replay's, %(default)s)")
    parser.add_argument("--settled-period", type=float, default=SETTLED_PERIOD,
                        help="bag seconds per pass once the filter is settled (default: "
                             "replay's, %(default)s)")
    parser.add_argument("--runs", type=int, default=3,
                        help="end-to-end replays, the median counts (default: %(default)s)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the numbers here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        bag = args.bag
        if bag is None:
            print(f"writing a {args.duration:g} s synthetic bag ...", file=sys.stderr)
            bag = simulate_bag(Path(tmp) / "replay_speed", SimulateOptions(
                duration=args.duration))
        e2e = end_to_end(bag, args.params, max(args.runs, 1))
        breakdown = instrumented(bag, args.params, args.process_period, args.settled_period)
        split = reading_split(bag)
    numbers = {
        "bag": bag.name if args.bag is None else str(args.bag),
        "bag_duration_s": e2e["duration_s"],
        "replay": e2e,
        "real_time_factor": e2e["duration_s"] / e2e["wall_s"],
        "real_time_factor_cpu": e2e["duration_s"] / max(e2e["cpu_s"], 1e-9),
        "target": TARGET,
        "process_period": args.process_period,
        "settled_period": args.settled_period,
        "breakdown": {"seconds": breakdown.seconds, "cpu_seconds": breakdown.cpu_seconds,
                      "wall_s": breakdown.wall, "cpu_s": breakdown.cpu,
                      "messages": breakdown.messages, "samples": breakdown.samples,
                      "solves": breakdown.solves},
        "reading_split": split,
    }
    print(report(numbers))
    if args.json:
        args.json.write_text(json.dumps(numbers, indent=2))
        print(f"wrote {args.json}")
    return 0 if numbers["real_time_factor_cpu"] >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
