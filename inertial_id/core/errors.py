"""Errors raised by the inertial_id core.

Every error the core raises on bad input derives from :class:`InertialIdError`, so callers
(nodes, the command line) can catch exactly these and keep running.
"""

from __future__ import annotations

from typing import ClassVar


class InertialIdError(Exception):
    """Base class of all inertial_id errors. ``drop_reason``: the reason a message refused
    with this error is counted under (``<kind>_<drop_reason>``,
    :func:`inertial_id.core.gathering.ledger.drop_key`)."""

    drop_reason: ClassVar[str] = "invalid"


class ModelError(InertialIdError):
    """The robot model is unusable: a URDF that does not parse, a missing frame or joint."""


class SampleError(InertialIdError):
    """A measurement cannot be used: NaN/inf, wrong size, unknown joints, stamps out of order."""


class SolverError(InertialIdError):
    """The estimator could not produce a (physically consistent) estimate."""


class ImplausibleValueError(SampleError):
    """A measurement is finite but beyond any a sensor gives (its squares would overflow the
    sufficient statistics, e.g. 1e200)."""


class DuplicateJointError(SampleError):
    """A joint state lists a model joint twice with different values."""

    drop_reason = "duplicate_joints"
