"""The replay report's ``summary.md`` (:func:`summary_markdown`): the final estimate with its
std (mass in kg, CoM in mm, inertia in kg m^2 about the CoM, offsets in N and N m; sensor
frame), the ten parameters about the sensor origin, errors against a ground truth, the
residual of the final estimate, contacts and dropped data.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from inertial_id.core.metrics import parameter_errors
from inertial_id.core.parameters import PI_NAMES, vector_from_symmetric
from inertial_id.tools.report.series import WRENCH_NAMES, derived_series, final_fit, final_truth

if TYPE_CHECKING:
    from inertial_id.core.estimate import Estimate
    from inertial_id.tools.replay import ReplayResult


def _fmt(values: Sequence[float] | NDArray[np.float64], spec: str) -> str:
    return "[" + ", ".join(format(float(v), spec) for v in values) + "]"


def _estimate_table(e: Estimate) -> list[str]:
    """Mass, CoM, inertia about the CoM, offset and the consistency figures."""
    std = e.std
    d = derived_series(e.pi[None, :], std[None, :])
    rel = e.relative_std
    return [
        "| quantity | value | σ | unit |",
        "|---|---|---|---|",
        f"| mass | {e.body.mass:.5g} | {std[0]:.2g} ({rel[0]:.2g} %) | kg |",
        f"| CoM x, y, z | {_fmt(1e3 * e.body.com, '.3f')} | {_fmt(d['com_mm_std'][0], '.2g')} "
        "| mm |",
        f"| inertia about CoM xx, xy, xz, yy, yz, zz | "
        f"{_fmt(vector_from_symmetric(e.body.inertia_com), '.4g')} | "
        f"diag {_fmt(d['inertia_std'][0], '.2g')} | kg m² |",
        f"| wrench offset fx, fy, fz | {_fmt(e.offset[:3], '.4f')} | "
        f"{_fmt(e.offset_std[:3], '.2g')} | N |",
        f"| wrench offset tx, ty, tz | {_fmt(e.offset[3:], '.5f')} | "
        f"{_fmt(e.offset_std[3:], '.2g')} | N m |",
        f"| physically consistent | {e.physically_consistent} | | |",
        f"| min eigenvalue of J(π) | {e.min_eigenvalue:.3e} | | kg m² |",
        f"| condition number | {e.condition_number:.1f} | | – |",
        f"| method, samples | {e.method}, {e.samples:.0f} | | |",
    ]


def _pi_table(e: Estimate, truth: dict[str, Any] | None) -> list[str]:
    """The ten parameters about the sensor origin with σ and σ % (and the truth)."""
    ref = final_truth(truth)
    head = "| parameter | estimate | σ | σ % |" + (" truth |" if ref else "")
    lines = [head, "|---" * (5 if ref else 4) + "|"]
    for k, name in enumerate(PI_NAMES):
        row = f"| {name} | {e.pi[k]:.5g} | {e.std[k]:.2g} | {e.relative_std[k]:.3g} |"
        lines.append(row + (f" {float(ref['pi'][k]):.5g} |" if ref else ""))
    return lines


def _error_lines(e: Estimate, truth: dict[str, Any] | None) -> list[str]:
    """Errors against the ground truth (the payload carried at the end of the bag)."""
    ref = final_truth(truth)
    if ref is None or "pi" not in ref:
        return []
    err = parameter_errors(e.pi, ref["pi"])
    lines = ["## Errors against the ground truth", "",
             f"- mass: {err.mass_pct:.3f} %",
             f"- CoM: {err.com_mm:.3f} mm",
             f"- inertia about the CoM: {err.inertia_pct:.2f} % (Frobenius norm)"]
    if truth and truth.get("wrench_offset") is not None:
        d = np.abs(e.offset - np.asarray(truth["wrench_offset"], dtype=float))
        lines.append(f"- offset: max {d[:3].max():.4f} N (force), {d[3:].max():.5f} N m "
                     "(torque)")
    return [*lines, ""]


def _event_lines(result: ReplayResult, truth: dict[str, Any] | None) -> list[str]:
    """Detected contacts, payload changes and (for synthetic bags) the true contacts."""
    lines = [f"## Contacts ({len(result.contacts)} detected)", ""]
    lines += [f"- {float(a):.3f} s – {float(b):.3f} s ({1e3 * (float(b) - float(a)):.0f} ms)"
              for a, b in result.contacts] or ["- none"]
    if truth and truth.get("contacts"):
        lines.append("- true contacts: " + ", ".join(f"{float(a):.3f} s – {float(b):.3f} s"
                                                     for a, b in truth["contacts"]))
    if result.payload_changes:
        lines.append("- payload changes at " + ", ".join(f"{float(t):.3f} s"
                                                         for t in result.payload_changes))
    return [*lines, ""]


def _fit_lines(result: ReplayResult) -> list[str]:
    """Residual statistics of the final estimate on the kept samples outside the detected
    contacts (a contact's force is no noise: inside one the ratio to the configured noise
    says nothing about the fit)."""
    fit = final_fit(result)
    if fit is None:
        return []
    t, measured, predicted = fit
    inside = np.zeros(t.shape, dtype=bool)
    for start, end in result.contacts:
        inside |= (t >= float(start)) & (t <= float(end))
    residual = (measured - predicted)[~inside]
    if residual.shape[0] < 3:
        return []
    payload = result.pipeline.online.config.payload
    noise = np.repeat([payload.force_noise_std, payload.torque_noise_std], 3)
    rms = np.sqrt(np.mean(residual**2, axis=0))
    lag1 = [float(np.corrcoef(r[:-1], r[1:])[0, 1]) for r in residual.T]
    left_out = (f"; {int(inside.sum())} inside the {len(result.contacts)} detected "
                "contact(s) left out" if inside.any() else "")
    return [
        "## Residual of the final estimate", "",
        f"Measured minus predicted raw wrench on {residual.shape[0]} kept samples "
        f"(every 10th{left_out}):", "",
        "| | " + " | ".join(WRENCH_NAMES) + " |", "|---" * 7 + "|",
        "| RMS | " + " | ".join(f"{v:.3g}" for v in rms) + " |",
        "| mean | " + " | ".join(f"{v:.3g}" for v in residual.mean(axis=0)) + " |",
        "| RMS / configured noise | " + " | ".join(f"{v:.2f}" for v in rms / noise) + " |",
        "| lag-1 autocorrelation | " + " | ".join(f"{v:.2f}" for v in lag1) + " |", "",
    ]


def _dropped_lines(result: ReplayResult) -> list[str]:
    """Messages dropped by replay, what the synchroniser discarded, failed solves."""
    lines = ["## Dropped data", ""]
    if result.ledger:
        ledger = result.ledger
        lines += [f"- wrenches {ledger['wrenches']}: synchronised {ledger['synchronised']}, "
                  f"used {ledger['used']} ({100.0 * ledger['used_share']:.1f} %)"]
    dropped = dict(result.dropped)
    synchronizer = getattr(result.pipeline.gathering, "synchronizer", None)
    counters = dict(getattr(synchronizer, "counters", {}) or {})
    lines += [f"- {reason}: {count}" for reason, count in dropped.items()]
    lines += [f"- synchroniser {reason}: {count}" for reason, count in counters.items() if count]
    failures = result.pipeline.solve_failures
    if failures:
        lines.append(f"- failed solves: {len(failures)} (last: {failures[-1]})")
    if len(lines) == 2:
        lines.append("- none")
    return [*lines, ""]


def summary_markdown(result: ReplayResult, truth: dict[str, Any] | None = None,
                     images: Sequence[str] = (), bag: str | Path | None = None) -> str:
    """The ``summary.md`` text; ``images`` are file names relative to it."""
    h = result.pipeline.history
    name = Path(bag).name if bag is not None else "(unnamed bag)"
    duration = (max(h.batch_time) - float(result.start_time)) if h.batch_time else 0.0
    lines = [f"# Replay of {name}", ""]
    lines += [f"> **SET-UP ERROR**: {error}" for error in result.setup_errors]
    lines += [""] if result.setup_errors else []
    lines += [
        f"- sensor frame: {result.frame}",
        f"- duration of processed samples: {duration:.2f} s (from the first message)",
        f"- samples processed: {result.samples_processed}, used in the estimate: "
        f"{result.samples_used}",
        f"- solves: {len(h.solve_time)}", "",
        "## Final estimate", "",
    ]
    v = result.pipeline.online.verdicts
    lines += [f"Converged (std under the thresholds): mass {v.mass}, CoM {v.com}, inertia "
              f"{v.inertia}" + (" (but a set-up error stands)" if result.setup_errors else ""),
              ""]
    e = result.estimate
    if e is None:
        lines += ["No estimate: too few samples, or every solve failed.", ""]
    else:
        lines += [*_estimate_table(e), "", "Parameters about the sensor origin "
                  "(π = [m, mcx, mcy, mcz, Ixx, Ixy, Ixz, Iyy, Iyz, Izz], SI):", "",
                  *_pi_table(e, truth), "", *_error_lines(e, truth)]
    lines += [*_fit_lines(result), *_event_lines(result, truth), *_dropped_lines(result)]
    if images:
        lines += ["## Figures", ""]
        lines += [f"![{Path(image).stem}]({image})" for image in images]
        lines.append("")
    return "\n".join(lines)
