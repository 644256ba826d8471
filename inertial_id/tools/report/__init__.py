"""Plots and a markdown summary of an offline replay (``inertial-id replay --report DIR``).

:func:`write_report` turns a :class:`~inertial_id.tools.replay.ReplayResult` into PNG figures and a
``summary.md`` that embeds them. Times on every axis are seconds since the bag's first
message (``result.start_time``), the same clock as ``result.contacts``. Parameters are in the
sensor frame (DESIGN.md): CoM in mm, inertia in kg m^2 about the CoM, wrenches in N and N m.

Contents, one module per concept: :mod:`~inertial_id.tools.report.series` (the quantities taken
from the result and the truth), :mod:`~inertial_id.tools.report.figures` (the PNG figures, drawn
without ``pyplot``) and :mod:`~inertial_id.tools.report.summary` (``summary.md``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from inertial_id.tools.report.figures import GOOD_CONDITION, write_figures
from inertial_id.tools.report.summary import summary_markdown

if TYPE_CHECKING:
    from inertial_id.tools.replay import ReplayResult

__all__ = ["GOOD_CONDITION", "write_report"]


def write_report(result: ReplayResult, directory: Path, truth: dict[str, Any] | None = None,
                 *, bag: str | Path | None = None) -> list[Path]:
    """Write the replay report into ``directory`` (created if needed); the files written.

    ``convergence.png``, ``error.png`` (with a truth), ``wrench_fit.png`` (measured against
    the final estimate's prediction), ``offset.png``, ``residual.png``, ``t2.png`` and
    ``condition.png`` are written when the history holds data for them; ``summary.md``
    always. ``truth`` is a synthetic bag's
    ``ground_truth.yaml`` (``payload: {mass, com, inertia_com, pi}``, optional
    ``wrench_offset`` and ``payload_change``); ``bag`` names the bag in the summary
    (default: ``result.bag`` when the result carries it).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    written = write_figures(result, truth, directory)
    name = bag if bag is not None else getattr(result, "bag", None)
    summary = directory / "summary.md"
    summary.write_text(summary_markdown(result, truth, [p.name for p in written], name))
    return [*written, summary]
