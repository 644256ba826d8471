"""Managed (lifecycle) versions of the pipeline nodes: ``--managed``, or ``managed:=true`` in
the launch file.

A managed node starts *unconfigured* with its parameters declared (``ros2 param set`` works)
and follows the ROS 2 lifecycle (``ros2 lifecycle set /solver configure``, or a lifecycle
manager):

- **configure** builds the node (:meth:`PipelineNode.setup`): the URDF is loaded and the
  frames checked; a mistake fails the transition with a one-line reason, and the node stays
  unconfigured with nothing half-built;
- **activate** starts the timers and lets data in: the node publishes;
- **deactivate** stops them and ignores incoming data: the solver holds its estimate (and
  its statistics) until it is activated again;
- **cleanup** destroys everything configure built (publishers, subscriptions, timers,
  services): back to unconfigured, ready for a new configure with new parameters;
- **shutdown** does the same from any state.

The wrapper is generic: it gates the subscription callbacks and timers the node creates in
``setup`` and records what to destroy, so the nodes' own code is the same in both modes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rclpy.lifecycle import LifecycleNodeMixin, LifecycleState, TransitionCallbackReturn
from rclpy.qos import DurabilityPolicy
from rclpy.timer import Timer

from inertial_id.core.errors import InertialIdError
from inertial_id.nodes.common import PipelineNode

MANAGED_FLAG = "--managed"
"""Command-line flag of the node executables that starts the managed version; also as
``--managed=true`` / ``--managed=false`` (what the launch file's ``managed`` argument passes)."""
_TRUTH = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def managed_requested(arguments: list[str]) -> bool:
    """Whether the non-ROS command-line ``arguments`` (without the program name) ask for the
    managed version; raises :class:`InertialIdError` for a value that is not a boolean."""
    wanted = False
    for argument in arguments:
        if argument == MANAGED_FLAG:
            wanted = True
        elif argument.startswith(MANAGED_FLAG + "="):
            value = argument.split("=", 1)[1]
            if value.lower() not in _TRUTH:
                raise InertialIdError(f"{MANAGED_FLAG}= takes true or false, got {value!r}")
            wanted = _TRUTH[value.lower()]
    return wanted


def _entities(node: PipelineNode) -> list[Any]:
    return [*node.publishers, *node.subscriptions, *node.timers, *node.services, *node.clients]


class ManagedMixin(LifecycleNodeMixin):
    """Lifecycle transitions around a :class:`PipelineNode` (module docstring). Combine with
    the node class through :func:`managed`."""

    managed = True

    def __init__(self, **kwargs: Any) -> None:
        self._active = False
        self._owned: list[Any] = []
        self._autostart: list[Timer] = []
        PipelineNode.__init__(self, **kwargs)  # parameters only (managed = True)
        LifecycleNodeMixin.__init__(self)

    # --- what setup() creates -------------------------------------------------------------

    def create_subscription(self, msg_type: Any, topic: str, callback: Callable[[Any], None],
                            *args: Any, **kwargs: Any) -> Any:
        """A subscription whose callback runs only while the node is active; latched
        (transient-local) topics such as ``robot_description`` are configuration, not data,
        and always get through (their one message would otherwise be lost)."""
        qos = args[0] if args else kwargs.get("qos_profile")
        if getattr(qos, "durability", None) == DurabilityPolicy.TRANSIENT_LOCAL:
            return super().create_subscription(msg_type, topic, callback, *args, **kwargs)

        def gated(message: Any) -> None:
            if self._active:
                callback(message)

        return super().create_subscription(msg_type, topic, gated, *args, **kwargs)

    def create_timer(self, timer_period_sec: float, callback: Callable[[], None],
                     *args: Any, autostart: bool = True, **kwargs: Any) -> Timer:
        """A timer that runs only while the node is active (one created with ``autostart``
        starts at activate)."""
        timer = super().create_timer(timer_period_sec, callback, *args,
                                     autostart=autostart and self._active, **kwargs)
        if autostart:
            self._autostart.append(timer)
        return timer

    # --- transitions ----------------------------------------------------------------------

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Build the node; on a set-up mistake, log it and stay unconfigured."""
        before = {id(e) for e in _entities(self)}
        try:
            self.set_up()
        except InertialIdError as exc:
            self.get_logger().error(f"configure failed: {exc}")
            self._owned = [e for e in _entities(self) if id(e) not in before]
            self._release()
            return TransitionCallbackReturn.FAILURE
        self._owned = [e for e in _entities(self) if id(e) not in before]
        return super().on_configure(state)

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Let data in and start the timers."""
        self._active = True
        for timer in self._autostart:
            timer.reset()
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop the timers and ignore data; everything learned is kept."""
        self._active = False
        for timer in self._timers_owned():
            timer.cancel()
        self.timers_stopped()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Destroy what configure built."""
        self._release()
        return super().on_cleanup(state)

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        """Stop and destroy what configure built, from any state."""
        self._active = False
        self._release()
        return super().on_shutdown(state)

    def _timers_owned(self) -> list[Timer]:
        return [e for e in self._owned if isinstance(e, Timer)]

    def _release(self) -> None:
        destroy = {"Publisher": self.destroy_publisher,
                   "Subscription": self.destroy_subscription, "Timer": self.destroy_timer,
                   "Service": self.destroy_service, "Client": self.destroy_client}
        for entity in self._owned:
            kind = next(k for k in destroy if any(c.__name__ == k for c in type(entity).__mro__))
            destroy[kind](entity)
        self._owned, self._autostart = [], []
        self.is_set_up = False


def managed(node_class: type[PipelineNode]) -> type[PipelineNode]:
    """The lifecycle version of ``node_class`` (module docstring)."""
    return type(f"Managed{node_class.__name__}", (ManagedMixin, node_class),
                {"__doc__": f"{node_class.__name__} under lifecycle management."})
