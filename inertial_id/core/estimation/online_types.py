"""What the online estimator is set with and what it reports: :class:`OnlineConfig` (its
settings, times in seconds), :class:`Verdicts` (which groups of an estimate have converged,
:func:`verdicts`) and :class:`StepResult` (one batch's residuals, ``T^2``, contact flags and
events); the estimator itself is :class:`inertial_id.core.estimation.online.OnlineEstimator`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import Estimate
from inertial_id.core.estimation.payload import PayloadConfig
from inertial_id.core.regressor import WRENCH_SIGNS


@dataclass(frozen=True)
class OnlineConfig:
    """Settings of :class:`OnlineEstimator` (times in seconds).

    ``min_samples``: samples before the first solve. Verdicts (:class:`Verdicts`), each from
    the estimate's std: the mass has converged when its std is under ``converged_mass_std``
    times the mass, the CoM when each of its std is under ``converged_com_std`` (m), the
    inertia when each std of the inertia about the CoM is under ``converged_inertia_std``
    times its largest principal moment; a group the data do not determine (infinite std)
    has not. The contact monitor starts training once mass and CoM have converged.
    ``confidence``, ``training_samples``, ``training_time``, ``on_samples``, ``off_samples``,
    ``release``: the
    :class:`T2Monitor`. ``gate_margin``: samples this close to a contact are not used.
    ``payload_change_after``: an anomaly this long is tested as a step of the bias or a new
    payload (0 disables). ``open_anomaly_after``: an anomaly this long is reported open and
    resolved (a bias step, a new payload, or unexplained: the monitor relearns); 0: never.
    ``bias_drift_warn`` (N/s; torques a tenth of it, N m/s): a modelled bias drift beyond it
    is a warning (:attr:`OnlineEstimator.drift_warning`); 0: never.
    """

    payload: PayloadConfig = field(default_factory=PayloadConfig)
    min_samples: int = 500
    converged_mass_std: float = 0.01
    converged_com_std: float = 0.002
    converged_inertia_std: float = 0.1
    monitor: bool = True
    confidence: float = 0.999
    training_samples: int = 1000
    training_time: float = 2.0
    on_samples: int = 3
    off_samples: int = 10
    release: float = 0.7
    gate_margin: float = 0.05
    payload_change_after: float = 1.5
    open_anomaly_after: float = 10.0
    bias_drift_warn: float = 0.05

    def __post_init__(self) -> None:
        if not (self.converged_mass_std > 0 and self.converged_com_std > 0
                and self.converged_inertia_std > 0):
            raise InertialIdError("the converged thresholds must be positive")
        if (self.min_samples < 1 or self.gate_margin < 0 or self.payload_change_after < 0
                or self.open_anomaly_after < 0 or self.bias_drift_warn < 0):
            raise InertialIdError("min_samples >= 1, gate_margin >= 0, payload_change_after "
                                  ">= 0, open_anomaly_after >= 0, bias_drift_warn >= 0")
        if not 0.0 < self.confidence < 1.0:
            raise InertialIdError(f"confidence must be in (0, 1), got {self.confidence}")
        if self.training_samples <= 2 * 6:
            raise InertialIdError(f"training_samples must exceed 12, got {self.training_samples}")
        if not self.training_time >= 0.0:
            raise InertialIdError(f"training_time must be >= 0 s, got {self.training_time}")


@dataclass(frozen=True)
class Verdicts:
    """Which groups of an estimate have converged (see :class:`OnlineConfig`)."""

    mass: bool = False
    com: bool = False
    inertia: bool = False

    @property
    def payload(self) -> bool:
        """Mass and CoM: what gravity compensation needs (the message's ``converged``)."""
        return self.mass and self.com


def other_sign(name: str) -> str:
    """The ``wrench_sign`` value that is not ``name``."""
    (other,) = (n for n in WRENCH_SIGNS if n != name)
    return other


def verdicts(estimate: Estimate | None, config: OnlineConfig) -> Verdicts:
    """The verdicts of ``estimate`` against ``config``'s thresholds; all False without one
    or while its offset is not determined."""
    if estimate is None or not np.isfinite(estimate.offset_std).all():
        return Verdicts()
    mass = float(estimate.pi[0])
    inertia = estimate.body.inertia_com
    if not (mass > 0.0 and np.isfinite(inertia).all()):
        return Verdicts()  # no body (an unconstrained fit may give one)
    mass_ok = bool(estimate.std[0] < config.converged_mass_std * mass)
    com_ok = bool(np.all(estimate.com_std < config.converged_com_std))
    largest = float(np.linalg.eigvalsh(inertia)[-1])
    inertia_ok = bool(largest > 0.0 and np.all(
        estimate.inertia_com_std < config.converged_inertia_std * largest))
    return Verdicts(mass_ok, mass_ok and com_ok, mass_ok and inertia_ok)


@dataclass(frozen=True)
class StepResult:
    """What :meth:`OnlineEstimator.add` saw in one batch of N samples.

    ``residual`` (N, 6) is the unfiltered measured minus the predicted wrench (zeros before
    the first estimate): the compensated F/T signal, i.e. the external wrench in the sensor's
    sign convention.
    ``t2`` and ``contact`` are the monitor's per-sample output (zeros / False until trained).
    ``events`` lists what happened (``"contact_start"``, ``"contact_end"``,
    ``"payload_change"``, ``"bias_step"``, ``"anomaly_unexplained"``, ``"monitor_trained"``).
    """

    times: NDArray[np.float64]
    residual: NDArray[np.float64]
    t2: NDArray[np.float64]
    contact: NDArray[np.bool_]
    threshold: float
    events: list[str]
