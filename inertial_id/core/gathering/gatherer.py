"""The gatherer's work without ROS: JointState arrays to model order, then synchronisation.

:class:`Gathering` maps each joint state's names onto the URDF's moving joints (extra and
reordered joints are fine; locked joints are left out) and feeds a
:class:`~inertial_id.core.gathering.synchronizer.FixedLagSynchronizer` with it and the wrenches, one
message at a time (the gatherer node) or a block of messages at a time (replay). Both paths
drop a stray wrench whose header ``frame_id`` is not the stream's (:class:`FrameFollower`,
counted as ``wrench_other_frame``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.errors import InertialIdError, SampleError
from inertial_id.core.gathering.delay_tracker import DelayTracker
from inertial_id.core.gathering.filter_choice import (
    MIN_SAMPLES,
    NO_MOTION_WINDOW_TIME,
    FilterChoice,
    choose_filter,
)
from inertial_id.core.gathering.filter_revisit import MotionWatch
from inertial_id.core.gathering.ledger import (
    MESSAGE_DROPS,
    OTHER_FRAME,
    DropLedger,
    OtherFrameError,
    drop_key,
)
from inertial_id.core.gathering.stamp_offset import StampDelay, held_delay
from inertial_id.core.gathering.synchronizer import FixedLagSynchronizer
from inertial_id.core.gathering.synchronizer.kernel import compiled_kernel
from inertial_id.core.kinematics import (
    JointMapper,
    SensorKinematics,
    load_urdf_model,
    movable_joint_names,
)
from inertial_id.core.samples import JointStateSample, MessageBlock, SyncedSamples, WrenchSample

PROVISIONAL_TIME = 0.1
"""s of joint states (and at least :data:`~inertial_id.core.gathering.filter_choice.MIN_SAMPLES`
of them) after which a provisional filter releases samples while the data-chosen one waits
for its ``decision_time`` (:meth:`Gathering.pop_provisional`)."""
FRAME_SWITCH_AFTER = 200
"""Wrenches in a row in a new frame after which the stream follows it (the driver changed
its frame_id)."""


@dataclass(frozen=True)
class GathererSettings:
    """Filter settings, in seconds, and the joints left out.

    ``window`` (s): the Savitzky-Golay window's span; 0 (the default) chooses it, and the lag,
    from the first ``decision_time`` seconds of joint states
    (:func:`~inertial_id.core.gathering.filter_choice.choose_filter`: the least mean squared error
    of the acceleration with the gain near 1 in the motion's band), which are held meanwhile and
    lose nothing. ``estimate_wrench_delay`` (with matched filtering): at that moment also
    estimate how late the wrench stamps are behind the joint states' from the held data
    (:func:`~inertial_id.core.gathering.stamp_offset.estimate_delay`) and, with clear evidence, move
    every wrench stamp earlier by it; otherwise ``wrench_delay`` (s) is that correction.
    ``delay`` (s): the most a sample may wait for the joint states after its
    stamp (the lag; < 0: half the window, zero phase). ``polyorder``: the polynomial's
    order. ``matched``: with a kinematic model (:meth:`Gathering.match`), filter the
    sensor-frame kinematics and the wrench with the same kernel (matched filtering,
    unbiased); otherwise only the joints are filtered. ``errors_in_variables`` (with
    ``matched``): the batches also carry the covariance of the noise the joints' position
    noise leaves in the acceleration (see :mod:`inertial_id.core.gathering.synchronizer`).
    """

    window: float = 0.0
    polyorder: int = 3
    use_measured_velocity: bool = False
    max_span: float = 0.5
    locked_joint_names: tuple[str, ...] = ()
    delay: float = 0.01
    matched: bool = True
    errors_in_variables: bool = True
    decision_time: float = 4.0
    estimate_wrench_delay: bool = True
    wrench_delay: float = 0.0

    def __post_init__(self) -> None:
        if not (self.window >= 0.0 and self.decision_time > 0.0 and self.polyorder >= 2):
            raise InertialIdError(f"filter window must be >= 0 s, decision_time > 0 s and "
                                  f"polyorder >= 2, got {self.window}, {self.decision_time}, "
                                  f"{self.polyorder}")


class FrameFollower:
    """The frame of the wrench stream: the first wrench's; a wrench in another frame is
    dropped (one batch carries one frame_id, so one stray wrench must not relabel the good
    ones around it), unless ``switch_after`` wrenches in a row carry the new frame (the driver
    changed it): then the stream follows."""

    def __init__(self, switch_after: int = FRAME_SWITCH_AFTER) -> None:
        self.frame = ""
        self.switch_after = switch_after
        self._candidate, self._count = "", 0

    def accept(self, frame: str) -> bool:
        """Whether a wrench in ``frame`` belongs to the stream."""
        if frame == self.frame or not self.frame:
            self.frame, self._count = frame, 0
            return True
        self._count = self._count + 1 if frame == self._candidate else 1
        self._candidate = frame
        if self._count >= self.switch_after:
            self.frame, self._count = frame, 0
            return True
        return False


def message_kind(message: JointStateSample | WrenchSample) -> str:
    """``joint_state`` or ``wrench``: the kind a message's drops are counted under
    (:func:`~inertial_id.core.gathering.ledger.drop_key`)."""
    return "joint_state" if isinstance(message, JointStateSample) else "wrench"


class Gathering:
    """Joint states and wrenches in, synchronised filtered samples out (model joint order).

    ``ledger`` counts what it drops, by reason (:class:`DropLedger`: the messages
    :meth:`add` and :meth:`add_messages` refuse, and the synchronizer's counters), a new one
    unless given; ``frames`` follows the wrench stream's frame (:attr:`wrench_frame`).
    """

    def __init__(self, urdf: str, settings: GathererSettings | None = None,
                 kinematics: SensorKinematics | None = None,
                 ledger: DropLedger | None = None) -> None:
        self.ledger = DropLedger() if ledger is None else ledger
        self.frames = FrameFollower()
        self.settings = settings or GathererSettings()
        locked = set(self.settings.locked_joint_names)
        model = load_urdf_model(urdf)
        self.joint_names = [n for n in movable_joint_names(model) if n not in locked]
        self.prismatic = frozenset(
            n for n in self.joint_names
            if model.joints[model.getJointId(n)].shortname().startswith("JointModelP"))
        """Joints whose positions are in m (the others' in rad)."""
        self.mapper = JointMapper(self.joint_names)
        s = self.settings
        self.wrench_delay = self.settings.wrench_delay
        """s subtracted from every wrench stamp (settings, plus the estimate once made)."""
        self.stamp_delay: StampDelay | None = None
        """The estimate of the remaining delay and its evidence, once made."""
        self.delay_tracker: DelayTracker | None = None
        """Once the filter is chosen (``estimate_wrench_delay`` with matched filtering): the
        delay kept estimated on the released samples, applied whenever clear."""
        self.choice: FilterChoice | None = None
        """The filter in use, with its evidence; None while the first joint states are held
        to choose it (:meth:`decide`)."""
        self.watch = MotionWatch(s.decision_time, s.delay, s.polyorder)
        """The recent joint states, to revisit the filter when the motion changes."""
        placeholder = s.polyorder + 2 + (s.polyorder + 3) % 2  # replaced before any filtering
        self._max_speed = [model.velocityLimit[model.joints[model.getJointId(n)].idx_v]
                           for n in self.joint_names]
        self.synchronizer = FixedLagSynchronizer(
            len(self.joint_names), placeholder, s.polyorder, s.use_measured_velocity,
            s.max_span, lag=0, max_speed=self._max_speed)
        self.provisional: FixedLagSynchronizer | None = None
        """While the filter is chosen: a second synchronizer, with a fixed short window, whose
        samples an estimate can use at once (:meth:`pop_provisional`); None otherwise."""
        self.provisional_choice: FilterChoice | None = None
        self.ledger.track(self.synchronizer.counters)
        if kinematics is not None:
            self.match(kinematics)

    def match(self, kinematics: SensorKinematics) -> None:
        """Use the sensor's kinematics for matched filtering (when ``settings.matched``): the
        batches then carry the smoothed twist and proper acceleration (and, with
        ``settings.errors_in_variables``, its noise covariance). Call before data."""
        if not self.settings.matched:
            return
        if kinematics.joint_names != self.joint_names:
            raise InertialIdError(f"gatherer joints {self.joint_names} differ from the "
                                  f"model's {kinematics.joint_names}: lock the same joints")
        self.synchronizer.kinematics = kinematics.compute
        compiled_kernel()  # compiled or loaded from numba's cache now, not at the first data
        if self.settings.errors_in_variables:
            self.synchronizer.jacobians = kinematics.jacobians
        self.synchronizer.reset()

    def add_joint_state(self, t: float, names: Sequence[str], positions: Sequence[float],
                        velocities: Sequence[float] = ()) -> bool:
        """One ``sensor_msgs/JointState`` (stamp in s); False when its stamp was dropped."""
        q = self.mapper.select(names, positions)
        v = None
        if self.settings.use_measured_velocity:
            v = self.mapper.select(names, velocities)
        accepted = self.synchronizer.add_joint_state(t, q, v)
        if self.provisional is not None:
            self.provisional.add_joint_state(t, q, v)
        if accepted and self.watch.watching:  # per message: no arrays unless watched
            self.watch.add(np.array([t]), q[None])
        return accepted

    def add_wrench(self, t: float, wrench: ArrayLike) -> bool:
        """One wrench ``[fx, fy, fz, tx, ty, tz]`` (stamp in s); False when dropped."""
        if self.provisional is not None:
            self.provisional.add_wrench(t - self.wrench_delay, wrench)
        return self.synchronizer.add_wrench(t - self.wrench_delay, wrench)

    @property
    def settled(self) -> bool:
        """Whether the filter is chosen for good (chosen, and not from a motion it watches
        to choose again): from then on the samples do not depend on when they are popped."""
        return self.choice is not None and not self.watch.watching

    def pop_ready(self) -> SyncedSamples:
        """Samples whose filter windows are complete (none until the filter is chosen)."""
        if self.choice is None and not self.decide():
            return SyncedSamples.empty(len(self.joint_names))
        batch = self.synchronizer.pop_ready()
        if self.delay_tracker is not None and len(batch):
            delay = self.delay_tracker.add(batch)
            if delay is not None:  # measured on the stamps already moved by wrench_delay
                self.wrench_delay += delay
                self.synchronizer.shift_wrench_stamps(delay)
        if self.watch.due():
            assert self.choice is not None
            better = self.watch.propose(self.choice)
            if better is not None:
                self._switch(better)
        return batch

    def pop_provisional(self) -> SyncedSamples:
        """While the filter is being chosen (:meth:`decide`), the samples of a provisional
        one, so that an estimate can start within the first second of motion: once
        :data:`PROVISIONAL_TIME` of joint states are held, a second synchronizer filters the
        same messages with a fixed window of
        :data:`~inertial_id.core.gathering.filter_choice.NO_MOTION_WINDOW_TIME` (the lag as
        set). Nothing is lost: the held messages still go through the chosen filter once it
        is chosen, and :meth:`pop_ready` gives every sample then; the provisional samples
        are extra, for a provisional estimate until then. Empty once the filter is chosen
        (the provisional synchronizer is dropped) or while too little is held."""
        if self.choice is not None:
            self.provisional = None
            return SyncedSamples.empty(len(self.joint_names))
        if self.provisional is None:
            self._start_provisional()
        if self.provisional is None:
            return SyncedSamples.empty(len(self.joint_names))
        return self.provisional.pop_ready()

    def _start_provisional(self) -> None:
        """The provisional synchronizer, fed with everything held so far."""
        count, span = self.synchronizer.joint_span
        if count < MIN_SAMPLES or span < PROVISIONAL_TIME:
            return
        s, sync = self.settings, self.synchronizer
        history = sync.history()
        choice = choose_filter(history[0], history[1], s.polyorder, s.delay,
                               s.window or NO_MOTION_WINDOW_TIME)
        provisional = FixedLagSynchronizer(
            len(self.joint_names), choice.window, s.polyorder, s.use_measured_velocity,
            s.max_span, lag=choice.lag, kinematics=sync.kinematics, jacobians=sync.jacobians,
            max_speed=self._max_speed)
        arrival = np.sort(np.concatenate((history[0], history[3])))
        if provisional.extend(*history, arrival):
            self.provisional, self.provisional_choice = provisional, choice

    def _switch(self, choice: FilterChoice) -> None:
        """Filter with ``choice`` from now on (:mod:`inertial_id.core.gathering.filter_revisit`).

        The buffers restart: the wrenches not yet filtered are dropped and counted
        (``wrench_filter_change``), and samples come again once the new window has filled.
        Matched filtering keeps the rigid-body equation between the filtered signals for any
        kernel, so what the estimator gathered stays valid; the new past span
        (:attr:`FilterChoice.past_span`) tells the estimator to relearn its contact monitor's
        covariance."""
        counters = self.synchronizer.counters
        held = self.synchronizer.wrenches_held
        self.synchronizer.reset()
        counters["wrench_reset"] -= held
        counters["wrench_filter_change"] += held
        self.synchronizer.set_filter(choice.window, choice.lag)
        self.choice = choice
        if self.delay_tracker is not None:
            self.delay_tracker.correlation_time = choice.window_time
        self.watch.switches += 1
        self.watch.stop()

    def decide(self, final: bool = False) -> bool:
        """Choose the filter once the held joint states suffice (``decision_time`` of them
        when the window is chosen, the few that give the rate when it is set; ``final``:
        whatever is held, at the end of a record). True once it is chosen. A stamp jump that
        clears the buffers while holding starts the wait again."""
        if self.choice is not None:
            return True
        count, span = self.synchronizer.joint_span
        s = self.settings
        held = span >= s.decision_time  # the delay estimate needs as much, even when set
        if count < MIN_SAMPLES or not (final or s.window > 0.0 or held):
            return False
        history = self.synchronizer.history()
        self.provisional = None  # the chosen filter takes over every held message
        self.choice = choose_filter(history[0], history[1], s.polyorder, s.delay, s.window)
        self.synchronizer.set_filter(self.choice.window, self.choice.lag)
        if self.choice.source not in ("data", "setting"):  # the no-motion default
            self.watch.start(float(history[0][-1]))
        if s.estimate_wrench_delay and held and self.synchronizer.kinematics is not None:
            self.stamp_delay = held_delay(history, self.choice, self.synchronizer)
            if self.stamp_delay.clear:  # measured on stamps already moved by wrench_delay
                self.wrench_delay += self.stamp_delay.delay
                self.synchronizer.shift_wrench_stamps(self.stamp_delay.delay)
        if s.estimate_wrench_delay and self.synchronizer.kinematics is not None:
            self.delay_tracker = DelayTracker(self.choice.window_time)
        return True

    @property
    def wrench_frame(self) -> str:
        """The wrench stream's frame (header frame_id; ``""`` before the first wrench)."""
        return self.frames.frame

    @property
    def wrenches_held(self) -> int:
        """Wrenches buffered and not yet synchronised (nor dropped), the ones held while the
        filter is chosen included."""
        return self.synchronizer.wrenches_held

    def add_messages(self, messages: Sequence[JointStateSample | WrenchSample]) -> Counter[str]:
        """Joint states and wrenches in arrival order; the count of those dropped, by reason.

        Wrenches in another frame than the stream's are dropped first (:data:`OTHER_FRAME`,
        as :meth:`add` does). A clean block (one joint name list, valid values, increasing
        stamps) goes into the synchronizer at once; any other block one message at a time,
        which gives the same result as the node's per-message path, drops and resets
        included.
        """
        dropped: Counter[str] = Counter()
        kept = self._follow_frames(messages, dropped)
        if self._extend(kept):
            return dropped
        counters = self.synchronizer.counters
        before = {key: counters[key] for key in MESSAGE_DROPS}
        for message in kept:
            try:
                self._add(message)
            except SampleError as exc:
                dropped[self._refuse(message, exc)] += 1
        for key in MESSAGE_DROPS:
            if counters[key] > before[key]:
                dropped[key] += counters[key] - before[key]
        return dropped

    def _follow_frames(self, messages: Sequence[JointStateSample | WrenchSample],
                       dropped: Counter[str]) -> Sequence[JointStateSample | WrenchSample]:
        """``messages`` without the wrenches in another frame than the stream's, which are
        counted in ``dropped`` (:data:`OTHER_FRAME`)."""
        kept: list[JointStateSample | WrenchSample] = []
        accept = self.frames.accept
        for message in messages:
            if isinstance(message, WrenchSample) and not accept(message.frame_id):
                dropped[self.ledger.refuse(OTHER_FRAME, self._frame_error(message.frame_id))] += 1
                continue
            kept.append(message)
        return messages if len(kept) == len(messages) else kept

    def _frame_error(self, frame: str) -> str:
        return f"frame {frame!r} is not the wrench stream's {self.frames.frame!r}"

    def _refuse(self, message: JointStateSample | WrenchSample, exc: InertialIdError) -> str:
        """Count ``message`` refused with ``exc`` in the ledger; its key."""
        return self.ledger.refuse(drop_key(message_kind(message), exc), str(exc))

    def add(self, message: JointStateSample | WrenchSample) -> bool:
        """One message (:meth:`add_joint_state` or :meth:`add_wrench`); False when its stamp
        was dropped. A message refused for its values (:class:`InertialIdError`) or, a
        wrench, for its frame (:class:`OtherFrameError`, :data:`OTHER_FRAME`) is counted in
        the ledger, then the error is raised."""
        try:
            if isinstance(message, WrenchSample) and not self.frames.accept(message.frame_id):
                raise OtherFrameError(self._frame_error(message.frame_id))
            return self._add(message)
        except InertialIdError as exc:
            self._refuse(message, exc)
            raise

    def _add(self, message: JointStateSample | WrenchSample) -> bool:
        """:meth:`add` without the frame check."""
        if isinstance(message, JointStateSample):
            return self.add_joint_state(message.stamp, message.names, message.position,
                                        message.velocity)
        return self.add_wrench(message.stamp, message.wrench)

    def add_block(self, block: MessageBlock) -> Counter[str]:
        """A :class:`MessageBlock`: the same as :meth:`add_messages` of its messages (the
        count of those dropped, by reason), without an object per message when the block is
        clean and its wrenches are in the stream's frame."""
        has_wrench = block.wrench.shape[0] > 0
        if ((not has_wrench or self.frames.frame in ("", block.frame_id))
                and self._extend_arrays(block.stamps, block.is_wrench, block.names,
                                        block.position, block.velocity, block.wrench)):
            if has_wrench:
                self.frames.accept(block.frame_id)
            return Counter()
        return self.add_messages(block.messages())

    def _extend(self, messages: Sequence[JointStateSample | WrenchSample]) -> bool:
        """The block path of :meth:`add_messages`; False when the block is not clean."""
        joints = [m for m in messages if isinstance(m, JointStateSample)]
        wrenches = [m for m in messages if not isinstance(m, JointStateSample)]
        names = joints[0].names if joints else ()
        if any(m.names is not names and m.names != names for m in joints):
            return False
        try:
            position = np.array([m.position for m in joints], dtype=float)
            velocity = (np.array([m.velocity for m in joints], dtype=float)
                        if self.settings.use_measured_velocity else None)
            wrench = (np.array([m.wrench for m in wrenches], dtype=float) if wrenches
                      else np.empty((0, 6)))
            stamps = np.array([m.stamp for m in messages], dtype=float)
        except (ValueError, TypeError):  # ragged or malformed arrays
            return False
        is_wrench = np.array([not isinstance(m, JointStateSample) for m in messages],
                             dtype=bool)
        return self._extend_arrays(stamps, is_wrench, names, position, velocity, wrench)

    def _extend_arrays(self, stamps: NDArray[np.float64], is_wrench: NDArray[np.bool_],
                       names: Sequence[str], position: NDArray[np.float64],
                       velocity: NDArray[np.float64] | None,
                       wrench: NDArray[np.float64]) -> bool:
        """Messages as arrays (arrival order: ``stamps`` (M,) s, ``is_wrench`` (M,); joint
        states (J, k) in the order of ``names``; wrenches (W, 6)) into the synchronizer at
        once; False (nothing buffered) when they are not clean."""
        joint_t = stamps[~is_wrench]
        measured = self.settings.use_measured_velocity
        try:
            if joint_t.size:
                if self.mapper.has_duplicates(names):
                    return False
                index = self.mapper.indices(names)
                if position.shape != (joint_t.size, len(names)):
                    return False
                if measured:
                    if velocity is None or velocity.shape != position.shape:
                        return False
                    velocity = velocity[:, index]
                position = position[:, index]
            else:
                position = np.empty((0, len(self.joint_names)))
                velocity = position if measured else None
        except SampleError:  # missing joints
            return False
        wrench_t = stamps[is_wrench] - self.wrench_delay
        if wrench.shape != (wrench_t.size, 6):
            return False
        arrival = stamps - np.where(is_wrench, self.wrench_delay, 0.0)
        if not self.synchronizer.extend(joint_t, position, velocity, wrench_t, wrench, arrival):
            return False
        if self.provisional is not None:
            self.provisional.extend(joint_t, position, velocity, wrench_t, wrench, arrival)
        self.watch.add(joint_t, position)
        return True
