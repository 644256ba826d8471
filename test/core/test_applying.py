"""The gates of a live apply (inertial_id.core.applying)."""

from __future__ import annotations

import numpy as np

from inertial_id.core.applying import ApplyGate, GateSettings, Observation

STD = np.array([0.01, 0.001])


def seen(values: list[float], converged: bool = True) -> Observation:
    return Observation(values=np.array(values), std=STD, converged=converged)


def test_an_apply_waits_for_convergence_stability_and_no_contact() -> None:
    gate = ApplyGate(GateSettings(stable_s=2.0, change_std=3.0, min_interval=10.0))
    assert gate.refusal(0.0) == "no estimate yet"
    gate.observe(0.0, seen([1.5, 0.06], converged=False))
    assert gate.refusal(0.5) == "not converged"
    gate.observe(1.0, seen([1.5, 0.06]))
    assert gate.refusal(2.5).startswith("stable for 1.5 of 2 s")
    gate.observe(2.5, seen([1.51, 0.0605]))  # within 3 std: still the same stable period
    assert gate.refusal(3.0) == ""
    gate.contact(3.0, True)
    assert gate.refusal(3.1) == "in contact"
    gate.contact(3.2, False)
    gate.observe(3.3, seen([1.51, 0.0605]))
    assert gate.refusal(4.0).startswith("stable for 0.7")  # a contact restarts the period
    assert gate.refusal(4.0, manual=True) == ""  # ~/apply needs only converged, no contact
    gate.observe(4.5, seen([1.6, 0.0605]))  # moved by 10 std: the period restarts
    assert gate.stable_for(5.5) == 1.0


def test_a_second_apply_needs_a_change_of_a_few_std_and_the_rate_limit() -> None:
    gate = ApplyGate(GateSettings(stable_s=0.0, change_std=3.0, min_interval=10.0))
    gate.observe(0.0, seen([1.5, 0.06]))
    assert gate.refusal(0.0) == ""
    gate.mark_applied(0.0, gate.latest.values)
    gate.observe(20.0, seen([1.52, 0.062]))  # 2 std each: no change worth sending
    assert gate.refusal(20.0) == "within 3 std of what was applied"
    gate.observe(21.0, seen([1.55, 0.062]))
    assert gate.refusal(21.0) == ""
    gate.attempted(21.0)  # refused by the driver: the rate limit still counts it
    assert gate.refusal(25.0) == "rate limit: 6.0 s to wait"


def test_an_unknown_std_never_looks_changed() -> None:
    observation = Observation(values=np.array([2.0]), std=np.array([-1.0]), converged=True)
    assert not observation.moved(np.array([1.0]), 3.0)
