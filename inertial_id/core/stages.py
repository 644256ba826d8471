"""The stages the nodes and replay share, beyond
:class:`~inertial_id.core.gathering.gatherer.Gathering`
and :class:`~inertial_id.core.estimation.online.OnlineEstimator`.

:class:`KinematicsStage` is the kinematics node's whole work and the step replay's
:class:`~inertial_id.core.pipeline.PayloadPipeline` takes between the gatherer and the
estimator: a batch of synchronised samples in, the samples it keeps with the sensor frame's
twist and proper acceleration out, every dropped sample counted by reason. The node only
decodes, publishes and reports; the same checks and the same "the matched filter already gave
the twist" branch run offline.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.kinematics import JointMapper, SensorKinematics
from inertial_id.core.samples import MAX_ABS_VALUE, SyncedSamples, plausible
from inertial_id.core.timepolicy import OUT_OF_RANGE, in_range


@dataclass(frozen=True)
class Drop:
    """Samples a stage dropped: the ``reason`` they are counted under, how many, and one line
    saying why (for a throttled log)."""

    reason: str
    count: int
    message: str


@dataclass
class SensorBatch:
    """What :class:`KinematicsStage` gives for one batch: the samples kept (``samples``, the
    gatherer's batch), the sensor frame's body twist ``[v; w]`` (N, 6; m/s, rad/s) and proper
    acceleration (spatial acceleration minus gravity, N, 6; m/s^2, rad/s^2), both in the
    sensor frame; ``drops`` lists what was dropped (``samples`` is ``None`` when nothing is
    left)."""

    samples: SyncedSamples | None = None
    twist: NDArray[np.float64] | None = None
    proper_acceleration: NDArray[np.float64] | None = None
    drops: list[Drop] = field(default_factory=list)


class KinematicsStage:
    """From the gatherer's batches to the sensor frame's motion (module docstring).

    A batch whose wrenches come in a frame other than ``sensor_frame`` (a frame id other than
    ``""``) is dropped whole (``wrong_frame``, and :attr:`wrong_frame` names the frame until a
    right one comes); samples stamped out of range are dropped (``out_of_range``); a batch
    with a NaN, an inf or a value beyond :data:`MAX_ABS_VALUE` is dropped whole
    (``implausible``); one the model cannot compute is dropped whole (``invalid``).
    """

    def __init__(self, model: SensorKinematics) -> None:
        self.model = model
        self.sensor_frame = model.sensor_frame
        self.mapper = JointMapper(model.joint_names)
        self.dropped: Counter[str] = Counter()
        self.wrong_frame = ""

    def run(self, batch: SyncedSamples, names: Sequence[str] | None = None,
            frame_id: str = "") -> SensorBatch:
        """One batch; ``names`` are the joints of its columns (``None``: the model's order),
        ``frame_id`` the frame its wrenches are in (``""``: unstated)."""
        if not len(batch):
            return SensorBatch()
        if frame_id not in ("", self.sensor_frame):
            self.wrong_frame = frame_id
            return self._drop(SensorBatch(), "wrong_frame", len(batch),
                              f"wrench frame {frame_id!r} is not sensor_frame "
                              f"{self.sensor_frame!r}")
        self.wrong_frame = ""
        out = SensorBatch()
        keep = in_range(batch.times)
        if not keep.all():
            self._drop(out, OUT_OF_RANGE, int(np.count_nonzero(~keep)), "stamps out of range")
            batch = batch.select(keep)
            if not len(batch):
                return out
        values = [getattr(batch, f.name) for f in fields(batch) if f.name != "times"]
        if not all(plausible(x) for x in values if x is not None):
            return self._drop(out, "implausible", len(batch), "NaN, inf or values beyond "
                              f"{MAX_ABS_VALUE:g}: no measurement")
        try:
            out.twist, out.proper_acceleration = self._motion(batch, names)
        except (InertialIdError, ValueError) as exc:
            return self._drop(out, "invalid", len(batch), str(exc))
        out.samples = batch
        return out

    def _motion(self, batch: SyncedSamples, names: Sequence[str] | None
                ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        if batch.twist is not None and batch.proper_acceleration is not None:
            return batch.twist, batch.proper_acceleration  # the gatherer's matched filter
        order = slice(None) if names is None else self.mapper.indices(names)
        return self.model.compute(batch.position[:, order], batch.velocity[:, order],
                                  batch.acceleration[:, order])

    def _drop(self, out: SensorBatch, reason: str, count: int, message: str) -> SensorBatch:
        self.dropped[reason] += count
        out.drops.append(Drop(reason, count, message))
        return out
