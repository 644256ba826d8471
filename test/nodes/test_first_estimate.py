"""A first estimate while the gatherer still chooses its filter from the data: its
provisional samples reach the solver flagged, the solver publishes their estimate at once,
and once the chosen filter's samples come they alone make the estimate and the ledgers (the
three nodes in one executor, over real topics; inertial_id.core.gathering.gatherer
``pop_provisional``, inertial_id.core.estimation.stage)."""

from __future__ import annotations

from node_harness import TRUE_MASS, harness
from recordings import Recording

DECISION_TIME = 4.0  # s, the shipped filter_decision_time


def test_an_estimate_comes_before_the_filter_is_chosen_and_nothing_is_lost() -> None:
    data = Recording(seconds=7.0)
    with harness(gatherer={"filter_window": 0.0, "filter_decision_time": DECISION_TIME}) as h:
        h.stream(data, 0.0, 2.5)
        h.drain()
        early = h.wait_for_estimate()
        gatherer, solver = h.nodes["gatherer"], h.nodes["solver"]
        assert gatherer.gathering.choice is None  # still choosing
        assert abs(early.mass - TRUE_MASS) < 0.02 * TRUE_MASS, early.mass
        assert solver.stage.current is not solver.online
        assert solver.stage.received == solver.stage.provisional_received > 0
        status = h.fresh_diagnostics(["solver"])["solver"]
        assert status.values["estimate_provisional"] == "1", status.values
        h.stream(data, 2.5, 7.0)
        h.settle()
        assert gatherer.gathering.choice is not None
        assert solver.stage.current is solver.online and solver.online.estimate is not None
        # every wrench once through the chosen filter: the provisional samples are extra
        chosen = gatherer.published - gatherer.provisional_published
        assert gatherer.provisional_published > 0
        stage = solver.stage
        assert stage.received - stage.provisional_received == chosen, (stage.ledger(), chosen)
        assert sum(v for k, v in stage.ledger().items() if k != "received") == stage.received
        assert abs(h.probe.parameters[-1].mass - TRUE_MASS) < 0.01 * TRUE_MASS
        h.assert_nothing_inconsistent()
