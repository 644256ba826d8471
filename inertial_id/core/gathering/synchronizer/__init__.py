"""Time synchronisation of joint states and wrenches with a fixed-lag Savitzky-Golay filter.

Each wrench sample (stamp ``t``) becomes one synchronised sample at ``t``: the joint positions,
velocities and accelerations come from a polynomial fitted to the ``window`` joint samples
around ``t`` that end ``lag`` samples after it, and the wrench is smoothed by a polynomial of
the same order over the wrench samples spanning the same time. Both fits cover the same span
with ``t`` at the same place in it, so both signals are filtered alike and stay in phase; a
sample is ready ``lag`` joint periods after its stamp. ``lag`` = half the window (the default)
is the classical zero-phase filter with the least noise; a shorter lag answers sooner at the
price of noisier derivatives. Only header stamps are used, never arrival times.

With a ``kinematics`` function (joint positions, velocities, accelerations to the sensor
frame's twist and proper acceleration) the synchronizer also *matches* the filters: the
polynomial's acceleration is exactly the true acceleration smoothed by a kernel ``ghat``
(:mod:`inertial_id.core.signals`, matched filtering), so the kinematics are computed at every
joint sample (three-point differences) and smoothed by that kernel, and the wrench by the same
kernel. The rigid-body equation then holds between the filtered wrench and the filtered
kinematics; a polynomial's value smooths the wrench far less than its second derivative
smooths the acceleration, which biased the inertia by O((w T)^2).

With ``jacobians`` too (joint positions to the sensor frame's Jacobians), each matched sample
also carries the covariance of the noise that the joints' position noise puts into its
smoothed acceleration, ``|h|^2 J diag(sigma_q^2) J^T`` (``h`` the filter's second-derivative
weights on the positions, ``sigma_q`` estimated from the data by
:class:`~inertial_id.core.signals.PositionNoise`): the solver removes the bias that noise in
the regressor gives least squares (errors in variables).

Contents, one module per concept: :mod:`~inertial_id.core.gathering.synchronizer.spikes`
(joint-state spikes), :mod:`~inertial_id.core.gathering.synchronizer.filters` (the plain and
matched filters of a batch), :mod:`~inertial_id.core.gathering.synchronizer.fixed_lag`
(:class:`FixedLagSynchronizer`: the buffers); what goes in and comes out
(:class:`~inertial_id.core.samples.SyncedSamples`, the plausibility bound) is in
:mod:`inertial_id.core.samples`, below every user; the public names are importable from this
package.
"""

from inertial_id.core.gathering.synchronizer.fixed_lag import FixedLagSynchronizer
from inertial_id.core.gathering.synchronizer.spikes import (
    DEFAULT_MAX_JOINT_SPEED,
    SPIKE_FOLLOW,
    SPIKE_SLACK,
    SPIKE_SPEED_MARGIN,
)
from inertial_id.core.samples import (
    MAX_ABS_VALUE,
    JacobianFunction,
    SensorFunction,
    SyncedSamples,
    plausible,
)

__all__ = ["DEFAULT_MAX_JOINT_SPEED", "MAX_ABS_VALUE", "SPIKE_FOLLOW", "SPIKE_SLACK",
           "SPIKE_SPEED_MARGIN", "FixedLagSynchronizer", "JacobianFunction", "SensorFunction",
           "SyncedSamples", "plausible"]
