#!/usr/bin/env python3
"""The baseline of ``bench/compensated_wrench.py``: each ``/wrench`` published again at once.

A process of its own with nothing else to do: it takes each wrench serialised, decodes it,
encodes it again and publishes it on ``/republished_wrench`` (reliable, as the gatherer's
``~/compensated_wrench``), with the package's own CDR codec and rclpy's events executor, as
the gatherer does. It keeps the time from each callback's start to its publish's return
(``time.perf_counter``), as the gatherer's diagnostics do for the compensated wrench; on
SIGINT it prints them as JSON (ms: p50, p99, count), skipping the first ``--skip``. What
the compensated wrench's latency has in common with this one is the machine's: the
middleware's publish and the scheduler.

    python bench/republisher.py --skip 1000     # until SIGINT
    python bench/republisher.py --priority 50   # as the gatherer with realtime_priority 50
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip", type=int, default=1000,
                        help="latencies left out at the start (1000: the first second)")
    parser.add_argument("--priority", type=int, default=0,
                        help="SCHED_FIFO priority, as the gatherer's realtime_priority (0: none)")
    args = parser.parse_args(argv)

    from geometry_msgs.msg import WrenchStamped
    from rclpy.node import Node

    from inertial_id.io.cdr import CdrDecoder, CdrEncoder
    from inertial_id.nodes import stopping
    from inertial_id.nodes.common import (
        init,
        make_executor,
        pipeline_qos,
        sensor_qos,
        shut_down,
        spin,
    )
    from inertial_id.nodes.common.realtime import set_fifo_priority
    from inertial_id.nodes.conversions import wrench_from_bytes

    init()
    node = Node("republisher")
    refused = set_fifo_priority(args.priority)
    if refused:
        print(f"republisher: --priority not applied: {refused}", file=sys.stderr)
    publisher = node.create_publisher(WrenchStamped, "/republished_wrench", pipeline_qos(10))
    decoder, encoder = CdrDecoder(), CdrEncoder()
    latencies: list[float] = []

    def republish(raw: bytes) -> None:
        start = time.perf_counter()
        msg = wrench_from_bytes(raw, decoder)
        publisher.publish(encoder.wrench(msg.stamp, msg.frame_id, msg.wrench))
        latencies.append(time.perf_counter() - start)

    node.create_subscription(WrenchStamped, "/wrench", republish, sensor_qos(1000), raw=True)
    executor = make_executor()
    executor.add_node(node)
    try:
        spin(executor, until=stopping.requested)
    finally:
        shut_down(executor, [node])
    kept = 1e3 * np.array(latencies[args.skip:])
    p50, p99 = np.percentile(kept, [50, 99]) if kept.size else (np.nan, np.nan)
    print(json.dumps({"p50": round(float(p50), 3), "p99": round(float(p99), 3),
                      "count": int(kept.size)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
