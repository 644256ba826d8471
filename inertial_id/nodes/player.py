"""``inertial-id play``: publish a bag on live topics with /clock (``ros2 bag play`` stand-in).

Each recorded message is published as its recorded CDR bytes, at its recorded pace scaled by
``rate``, on a topic of the same name and type; ``/clock`` follows the recording's log time so
nodes running with ``use_sim_time:=true`` see the bag's time. Topics whose message type is not
installed are skipped with a warning; ``robot_description`` is latched.

Before the first message, the player creates every topic's publisher and waits (at most
``wait`` seconds) until each has a subscriber, then :data:`MATCH_GRACE` more: a publisher
created on the first message and used at once loses what it sends before discovery has matched
it with the subscribers (the first seconds of a bag under load), and the nodes' estimate then
differs from replay's.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path

import rclpy
from rclpy.node import Node
from rclpy.publisher import Publisher
from rosbags.highlevel import AnyReader
from rosgraph_msgs.msg import Clock

from inertial_id.io.bags import TYPESTORE, BagError
from inertial_id.nodes import stopping
from inertial_id.nodes.common import init, latched_qos, pipeline_qos, to_stamp

CLOCK_PERIOD = 0.001
"""Bag seconds between two /clock messages (at most)."""
MATCH_GRACE = 0.5
"""s after every topic has a subscriber before the first message: the subscribers' side of
the match may come after the publisher's."""


def message_class(msgtype: str) -> type | None:
    """The rclpy class of ``pkg/msg/Name``, or None when it is not installed."""
    package, _, name = msgtype.split("/")
    try:
        return getattr(importlib.import_module(f"{package}.msg"), name)
    except (ImportError, AttributeError):
        return None


class Player(Node):
    """Publishes one bag; see the module docstring."""

    def __init__(self, bag: Path, rate: float, wait: float = 10.0) -> None:
        super().__init__("bag_player")
        if rate <= 0:
            raise BagError("the play rate must be positive")
        if not wait >= 0.0:
            raise BagError("the wait for subscribers must be >= 0 s")
        self.bag = bag
        self.rate = rate
        self.wait = wait
        self.clock_pub = self.create_publisher(Clock, "/clock", pipeline_qos(10))
        self.publishers_by_topic: dict[str, Publisher] = {}

    def _publisher(self, topic: str, msgtype: str) -> Publisher | None:
        if topic not in self.publishers_by_topic:
            cls = message_class(msgtype)
            if cls is None:
                self.get_logger().warning(f"skipping {topic}: type {msgtype} is not installed")
                self.publishers_by_topic[topic] = None  # type: ignore[assignment]
            else:
                qos = latched_qos() if topic.endswith("robot_description") else pipeline_qos(1000)
                self.publishers_by_topic[topic] = self.create_publisher(cls, topic, qos)
        return self.publishers_by_topic[topic]

    def play_once(self) -> int:
        """Publish every message once, paced; returns the number published."""
        if not self.bag.exists():
            raise BagError(f"{self.bag}: no such bag")
        count = 0
        try:
            with AnyReader([self.bag], default_typestore=TYPESTORE) as reader:
                self._wait_for_subscribers(reader.connections)
                start_log = reader.start_time
                start_wall = time.monotonic()
                last_clock = -float("inf")
                for connection, log_time, raw in reader.messages():
                    bag_time = (log_time - start_log) * 1e-9
                    delay = start_wall + bag_time / self.rate - time.monotonic()
                    while delay > 0 and not stopping.requested():
                        time.sleep(min(delay, 0.05))
                        delay = start_wall + bag_time / self.rate - time.monotonic()
                    if stopping.requested() or not rclpy.ok():
                        break
                    if bag_time - last_clock >= CLOCK_PERIOD:
                        self.clock_pub.publish(Clock(clock=to_stamp(log_time * 1e-9)))
                        last_clock = bag_time
                    publisher = self._publisher(connection.topic, connection.msgtype)
                    if publisher is not None:
                        publisher.publish(bytes(raw))
                        count += 1
        except BagError:
            raise
        except Exception as exc:  # rosbags raises several types for damaged bags
            raise BagError(f"{self.bag}: cannot read the bag: {exc}") from exc
        return count


    def _wait_for_subscribers(self, connections: list) -> None:
        """Create every topic's publisher and wait until each has a subscriber (module doc);
        after ``wait`` seconds, play anyway and say which topics nobody reads."""
        publishers = {c.topic: self._publisher(c.topic, c.msgtype) for c in connections}
        publishers = {t: p for t, p in publishers.items() if p is not None}
        deadline = time.monotonic() + self.wait
        unread = sorted(publishers)
        while unread and time.monotonic() < deadline and not stopping.requested():
            time.sleep(0.05)
            unread = [t for t in unread if publishers[t].get_subscription_count() == 0]
        if unread:
            self.get_logger().info(f"no subscriber after {self.wait:g} s on "
                                   f"{', '.join(unread)}: playing anyway")
        elif publishers:
            time.sleep(MATCH_GRACE)

def play_bag(bag: Path, rate: float = 1.0, loop: bool = False, wait: float = 10.0) -> int:
    """Play ``bag`` (again and again with ``loop``; ``wait``: at most this many seconds for
    every topic's subscribers first); exit status 0, also when stopped by SIGINT/SIGTERM
    (:mod:`inertial_id.nodes.stopping`)."""
    init()
    player = None
    try:
        player = Player(Path(bag), rate, wait)
        played = False
        while not stopping.requested():
            count, played = player.play_once(), True
            stopped = " (stopped)" if stopping.requested() else ""
            player.get_logger().info(f"published {count} messages from {bag}{stopped}")
            if not loop:
                break
        if not played:  # stopped while it started (a slow start under load): say so too
            player.get_logger().info(f"published 0 messages from {bag} (stopped)")
        return 0
    finally:
        if player is not None:
            player.destroy_node()
        rclpy.try_shutdown()
