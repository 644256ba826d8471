"""The base class of the pipeline's nodes (:class:`PipelineNode`: parameters declared at
construction, the rest built by :meth:`~PipelineNode.setup`) and the one-line set-up check
(:func:`check`).
"""

from __future__ import annotations

from typing import Any

from rclpy.node import Node

from inertial_id.core.errors import InertialIdError
from inertial_id.nodes.common.parameters import declare_all
from inertial_id.params.spec import Param


class PipelineNode(Node):
    """A pipeline node (gatherer, kinematics, solver): its parameters are declared when it is
    constructed, everything else (model, estimator, publishers, subscriptions, timers,
    services) in :meth:`setup`: at once for a plain start, or at the lifecycle's configure
    transition for a managed one (:mod:`inertial_id.nodes.managed`). Runtime parameter
    changes reach :meth:`apply_parameters` once it is set up (before, they are only stored).
    """

    NAME = ""
    PARAMS: tuple[Param, ...] = ()
    managed = False
    """Set by :func:`inertial_id.nodes.managed.managed`: :meth:`setup` waits for configure."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(self.NAME, **kwargs)
        self.is_set_up = False
        declare_all(self, self.declared_params(), self._apply, self.PARAMS)
        if not self.managed:
            self.set_up()

    def declared_params(self) -> tuple[Param, ...]:
        """The parameters this node declares: :attr:`PARAMS` (the solver's depend on its
        mode); a value given for one of :attr:`PARAMS` it does not declare is ignored."""
        return self.PARAMS

    def set_up(self) -> None:
        """:meth:`setup` with the parameters' current values."""
        self.setup(dict(self.live_parameters.values))
        self.is_set_up = True

    def setup(self, values: dict[str, Any]) -> None:
        """Build the node from its parameter values; raise :class:`InertialIdError` with a
        one-line reason when it cannot (a URDF that does not parse, an unknown frame)."""
        raise NotImplementedError

    def apply_parameters(self, values: dict[str, Any], changed: set[str]) -> None:
        """Apply runtime parameter changes
        (:class:`~inertial_id.nodes.common.parameters.LiveParameters`); none by default."""

    def timers_stopped(self) -> None:
        """Every timer of the node was just cancelled (a lifecycle deactivation): forget
        what was known of them; nothing by default."""

    def _apply(self, values: dict[str, Any], changed: set[str]) -> None:
        if self.is_set_up:
            self.apply_parameters(values, changed)


def check(condition: bool, message: str) -> None:
    """Raise :class:`InertialIdError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise InertialIdError(message)
