"""The one-process pipeline hands its batches from node to node decoded
(:class:`~inertial_id.nodes.common.BatchLink`): each linked node must get what its decoder
reads from the bytes the same batch is published as (a probe subscribes to both topics, so
they are published too)."""

from __future__ import annotations

from typing import Any

import numpy as np
from node_harness import harness
from recordings import Recording

from inertial_id.nodes.pipeline import link


def _recorded(node: Any) -> list[Any]:
    """Wrap ``node.take_samples`` (before linking) to keep every batch it is handed."""
    handed: list[Any] = []
    take = node.take_samples

    def keep(decoded: Any) -> None:
        handed.append(decoded)
        take(decoded)

    node.take_samples = keep
    return handed


def test_linked_nodes_get_what_their_decoders_read_from_the_published_bytes() -> None:
    data = Recording(4.0)
    with harness() as h:
        g, k, s = (h.nodes[n] for n in ("gatherer", "kinematics", "solver"))
        to_kinematics, to_solver = _recorded(k), _recorded(s)
        link(g, k, s)
        h.stream(data, 0.0, 4.0)
        h.settle()
        h.spin(0.5)  # the probe's subscriptions receive the published copies
        assert to_kinematics and to_solver
        joint_msgs, sensor_msgs = h.probe.joint_samples, h.probe.sensor_samples
        assert len(joint_msgs) == len(to_kinematics) and len(sensor_msgs) == len(to_solver)
        for (batch, names, frame, before, span, provisional), msg in zip(
                to_kinematics, joint_msgs, strict=True):
            assert (list(names), frame, before, provisional) == (
                list(msg.joint_names), msg.header.frame_id, msg.samples_before, msg.provisional)
            assert span == msg.filter_span
            stamps = [t.sec + 1e-9 * t.nanosec for t in msg.stamps]
            np.testing.assert_allclose(batch.times, stamps, rtol=0, atol=1e-6)
            for name in ("position", "velocity", "acceleration", "wrench", "wrench_raw",
                         "twist", "proper_acceleration", "angular_products"):
                np.testing.assert_array_equal(getattr(batch, name).ravel(),
                                              np.asarray(getattr(msg, name)), err_msg=name)
            _same_noise(batch.acceleration_noise, msg.acceleration_noise)
        for (samples, frame, before, provisional), msg in zip(to_solver, sensor_msgs,
                                                              strict=True):
            assert (frame, before, provisional, samples["filter_span"]) == (
                msg.header.frame_id, msg.samples_before, msg.provisional, msg.filter_span)
            stamps = [t.sec + 1e-9 * t.nanosec for t in msg.stamps]
            np.testing.assert_allclose(samples["times"], stamps, rtol=0, atol=1e-6)
            for name in ("twist", "proper_acceleration", "wrench", "wrench_raw",
                         "angular_products"):
                np.testing.assert_array_equal(samples[name].ravel(),
                                              np.asarray(getattr(msg, name)), err_msg=name)
            _same_noise(samples["acceleration_noise"], msg.acceleration_noise)


def _same_noise(noise: np.ndarray, published: object) -> None:
    """(N, 6, 6) covariances against a message's upper triangles; symmetric, as the decoder
    makes them."""
    upper = np.triu_indices(6)
    np.testing.assert_allclose(noise[:, upper[0], upper[1]].ravel(), np.asarray(published),
                               rtol=1e-12)
    np.testing.assert_allclose(noise, noise.transpose(0, 2, 1), rtol=1e-12, atol=1e-30)
