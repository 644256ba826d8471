"""The replay report's PNG figures (:func:`write_figures`): estimate and errors over time,
wrench fit, F/T offset, residual, contact monitor and excitation. Times in s since the bag's
first message, CoM in mm, inertia in kg m^2 about the CoM, wrenches in N and N m, all in the
sensor frame; contacts shaded, payload changes marked.

Figures are drawn on matplotlib's Agg canvas through :class:`matplotlib.figure.Figure`, never
through ``pyplot``: no display is needed and no global backend state is touched.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from numpy.typing import NDArray

from inertial_id.core.metrics import parameter_errors
from inertial_id.tools.report.series import (
    WRENCH_NAMES,
    derived_series,
    final_fit,
    since_first_message,
    truth_pi,
    truth_segments,
    truth_value,
)

if TYPE_CHECKING:
    from inertial_id.tools.replay import ReplayResult


DPI = 150
"""Resolution of the PNG figures (dots per inch)."""
CAPTION_WIDTH = 150
"""Characters per line of a caption under a figure (its 9 in width at the caption's size)."""
AXES = ("x", "y", "z")
COLORS = ("tab:red", "tab:green", "tab:blue")
CONTACT_STYLE = {"color": "tab:orange", "alpha": 0.2, "lw": 0}
CHANGE_STYLE = {"color": "tab:purple", "ls": ":", "lw": 1.5}
GOOD_CONDITION = 50.0
"""Condition numbers below this are shaded as well excited in ``condition.png`` (guidance:
the bundled exciting trajectory gives about 13, the TIAGo recording 4.6)."""


def write_figures(result: ReplayResult, truth: dict[str, Any] | None,
                  directory: Path) -> list[Path]:
    """The figures the history holds data for, written into ``directory``; the paths written
    (see :func:`inertial_id.tools.report.write_report`)."""
    return [path for path in (
        _convergence_plot(result, truth, directory / "convergence.png"),
        _error_plot(result, truth, directory / "error.png"),
        _fit_plot(result, directory / "wrench_fit.png"),
        _offset_plot(result, truth, directory / "offset.png"),
        _residual_plot(result, directory / "residual.png"),
        _t2_plot(result, directory / "t2.png"),
        _condition_plot(result, directory / "condition.png"),
    ) if path is not None]


def _figure(rows: int, height: float) -> tuple[Figure, list[Axes]]:
    """A figure of ``rows`` panels sharing the time axis, on the Agg canvas."""
    figure = Figure(figsize=(9.0, height))
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, 1, sharex=True, squeeze=False)[:, 0]
    return figure, list(axes)


def _save(figure: Figure, path: Path, caption: str = "") -> Path:
    """Lay out and write ``figure``; a ``caption`` goes under the axes, wrapped, where it
    covers neither the data nor a legend."""
    if caption:
        lines = textwrap.wrap(caption, CAPTION_WIDTH)
        figure.text(0.01, 0.01, "\n".join(lines), fontsize=7.5, va="bottom")
        height = figure.get_figheight()
        figure.tight_layout(rect=(0.0, (0.15 * len(lines) + 0.1) / height, 1.0, 1.0))
    else:
        figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    return path


def _mark_events(ax: Axes, result: ReplayResult, label: bool = True) -> None:
    """Shade the detected contacts and mark the payload changes (s since the first message)."""
    for k, (start, end) in enumerate(result.contacts):
        ax.axvspan(float(start), float(end), label="contact" if label and k == 0 else None,
                   **CONTACT_STYLE)
    for k, t in enumerate(result.payload_changes):
        ax.axvline(float(t), label="payload change" if label and k == 0 else None,
                   **CHANGE_STYLE)


def _finish_axes(ax: Axes, ylabel: str, legend: bool = True) -> None:
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize="small", ncol=2)


def _band(ax: Axes, t: NDArray[np.float64], value: NDArray[np.float64],
          sigma: NDArray[np.float64], color: str, label: str) -> None:
    """An estimate held from one solve to the next (steps) with its +-1 sigma band (none
    where sigma is not finite, e.g. an unexcited parameter)."""
    sigma = np.where(np.isfinite(sigma), sigma, np.nan)
    ax.plot(t, value, color=color, lw=1.2, label=label, drawstyle="steps-post")
    ax.fill_between(t, value - sigma, value + sigma, color=color, alpha=0.2, lw=0,
                    step="post")


def _truth_lines(ax: Axes, truth: dict[str, Any] | None, quantity: str, axis: int,
                 color: str, label: str) -> None:
    """Dashed true values; finite ends of the steps are clipped to the plotted range."""
    lo, hi = ax.get_xlim()
    for k, (start, end, payload) in enumerate(truth_segments(truth)):
        a, b = max(start, lo), min(end, hi)
        if a < b:
            ax.hlines(truth_value(payload, quantity, axis), a, b, colors=color,
                      linestyles="--", lw=1.0, label=label if k == 0 else None)
    ax.set_xlim(lo, hi)


def _convergence_plot(result: ReplayResult, truth: dict[str, Any] | None,
                      path: Path) -> Path | None:
    """Mass, CoM and CoM-inertia diagonal per solve, with +-1 sigma bands and the truth."""
    h = result.pipeline.history
    if not h.solve_time:
        return None
    t = since_first_message(h.solve_time, result)
    s = derived_series(np.asarray(h.pi), np.asarray(h.std))
    figure, (ax_m, ax_c, ax_i) = _figure(3, 9.0)
    _band(ax_m, t, s["mass"], s["mass_std"], "tab:blue", "estimate")
    for ax, key in ((ax_c, "com_mm"), (ax_i, "inertia")):
        names = AXES if key == "com_mm" else ("xx", "yy", "zz")
        prefix = "c_" if key == "com_mm" else "I_"
        for i, color in enumerate(COLORS):
            _band(ax, t, s[key][:, i], s[f"{key}_std"][:, i], color, prefix + names[i])
    for ax in (ax_m, ax_c, ax_i):
        _mark_events(ax, result, label=ax is ax_m)
    _truth_lines(ax_m, truth, "mass", 0, "k", "truth")
    for i, color in enumerate(COLORS):
        _truth_lines(ax_c, truth, "com_mm", i, color, "truth" if i == 0 else "")
        _truth_lines(ax_i, truth, "inertia", i, color, "truth" if i == 0 else "")
    ax_m.set_title(f"Payload estimate over time (±1σ bands, sensor frame {result.frame})")
    _finish_axes(ax_m, "mass (kg)")
    _finish_axes(ax_c, "centre of mass (mm)")
    _finish_axes(ax_i, "inertia about CoM (kg m²)")
    ax_i.set_xlabel("time since first message (s)")
    return _save(figure, path)


def _error_plot(result: ReplayResult, truth: dict[str, Any] | None,
                path: Path) -> Path | None:
    """Errors against the truth per solve, log scale (the final error stays visible)."""
    h = result.pipeline.history
    if not h.solve_time or not truth_segments(truth):
        return None
    t = since_first_message(h.solve_time, result)
    errors = [parameter_errors(pi, truth_pi(truth, time))
              for pi, time in zip(h.pi, t, strict=True)]
    figure, (ax,) = _figure(1, 4.5)
    ax.plot(t, _positive([e.mass_pct for e in errors]), label="mass (%)")
    ax.plot(t, _positive([e.com_mm for e in errors]), label="CoM (mm)")
    ax.plot(t, _positive([e.inertia_pct for e in errors]), label="inertia about CoM (%)")
    _mark_events(ax, result)
    ax.set_yscale("log")
    ax.set_title("Errors against the ground truth")
    _finish_axes(ax, "error (%, mm)")
    ax.set_xlabel("time since first message (s)")
    return _save(figure, path)


def _fit_plot(result: ReplayResult, path: Path) -> Path | None:
    """Measured wrench against the final estimate's prediction, six panels."""
    fit = final_fit(result)
    if fit is None:
        return None
    t, measured, predicted = fit
    figure, axes = _figure(6, 13.0)
    for i, ax in enumerate(axes):
        ax.plot(t, measured[:, i], color="0.5", lw=0.6, label="measured")
        ax.plot(t, predicted[:, i], color="tab:blue", lw=0.8, label="predicted")
        _mark_events(ax, result, label=i == 0)
        _finish_axes(ax, f"{WRENCH_NAMES[i]} ({'N' if i < 3 else 'N m'})", legend=i == 0)
    axes[0].set_title("Measured wrench and the final estimate's prediction (sensor frame)")
    axes[-1].set_xlabel("time since first message (s)")
    return _save(figure, path)


def _offset_plot(result: ReplayResult, truth: dict[str, Any] | None,
                 path: Path) -> Path | None:
    """The estimated F/T offset per solve, with ±1 sigma bands (and the truth)."""
    h = result.pipeline.history
    if not h.solve_time:
        return None
    t = since_first_message(h.solve_time, result)
    offset, std = np.asarray(h.offset), np.asarray(h.offset_std)
    figure, (ax_f, ax_t) = _figure(2, 6.5)
    for i, color in enumerate(COLORS):
        for ax, k in ((ax_f, i), (ax_t, 3 + i)):
            _band(ax, t, offset[:, k], std[:, k], color, WRENCH_NAMES[k])
            if truth and truth.get("wrench_offset") is not None:
                ax.axhline(float(truth["wrench_offset"][k]), color=color, ls="--", lw=0.8)
    _mark_events(ax_f, result)
    _mark_events(ax_t, result, label=False)
    ax_f.set_title("F/T offset (bias) over time, ±1σ" + (" (dashed: truth)" if truth else ""))
    _finish_axes(ax_f, "force offset (N)")
    _finish_axes(ax_t, "torque offset (N m)")
    ax_t.set_xlabel("time since first message (s)")
    return _save(figure, path)


def _residual_plot(result: ReplayResult, path: Path) -> Path | None:
    """RMS residual wrench per batch: forces (N) and torques (N m)."""
    h = result.pipeline.history
    if not h.batch_time:
        return None
    t = since_first_message(h.batch_time, result)
    rms = np.asarray(h.batch_residual_rms, dtype=float).reshape(-1, 6)
    rms[np.all(rms == 0.0, axis=1)] = np.nan  # no estimate yet: nothing was predicted
    figure, (ax_f, ax_t) = _figure(2, 6.5)
    for i, color in enumerate(COLORS):
        ax_f.plot(t, rms[:, i], color=color, lw=0.8, label=WRENCH_NAMES[i])
        ax_t.plot(t, rms[:, 3 + i], color=color, lw=0.8, label=WRENCH_NAMES[3 + i])
    _mark_events(ax_f, result)
    _mark_events(ax_t, result, label=False)
    ax_f.set_title("Residual wrench (measured − predicted), RMS per batch")
    _finish_axes(ax_f, "force RMS (N)")
    _finish_axes(ax_t, "torque RMS (N m)")
    ax_t.set_xlabel("time since first message (s)")
    return _save(figure, path)


def _positive(values: Sequence[float]) -> NDArray[np.float64]:
    """Values with non-positive and non-finite entries as NaN (gaps on a log axis)."""
    v = np.asarray(values, dtype=float)
    return np.where(np.isfinite(v) & (v > 0.0), v, np.nan)


def _t2_plot(result: ReplayResult, path: Path) -> Path | None:
    """Largest Hotelling T^2 per batch against the threshold, log scale, contacts shaded."""
    h = result.pipeline.history
    if not h.batch_time:
        return None
    t = since_first_message(h.batch_time, result)
    t2, threshold = _positive(h.batch_t2_max), _positive(h.batch_threshold)
    figure, (ax,) = _figure(1, 4.5)
    ax.plot(t, t2, color="tab:blue", lw=0.8, label="max T² per batch")
    ax.plot(t, threshold, color="k", ls="--", lw=1.0, label="threshold")
    _mark_events(ax, result)
    if np.any(np.isfinite(t2)) or np.any(np.isfinite(threshold)):
        ax.set_yscale("log")
    else:
        ax.text(0.5, 0.5, "contact monitor not trained", transform=ax.transAxes,
                ha="center", va="center")
    c = result.pipeline.online.config
    ax.set_title("Contact monitor: Hotelling T² of the residual wrench")
    _finish_axes(ax, "T² (dimensionless)")
    ax.set_xlabel("time since first message (s)")
    return _save(figure, path, f"A contact starts after {c.on_samples} consecutive samples "
                 f"above the threshold and ends after {c.off_samples} below {c.release:g} × "
                 "threshold: a single sample above it (a spike of the per-batch maximum) is "
                 "no contact.")


def _condition_plot(result: ReplayResult, path: Path) -> Path | None:
    """Condition number of the column-scaled regressor at each solve, log scale."""
    h = result.pipeline.history
    if not h.solve_time:
        return None
    t = since_first_message(h.solve_time, result)
    cond = _positive(h.condition_number)
    figure, (ax,) = _figure(1, 4.0)
    ax.plot(t, cond, color="tab:blue", marker=".", lw=1.0, label="condition number")
    _mark_events(ax, result)
    if np.any(np.isfinite(cond)):
        ax.set_yscale("log")
    ax.axhspan(1.0, GOOD_CONDITION, color="tab:green", alpha=0.08)
    ax.set_title("Excitation: condition number of the scaled regressor")
    _finish_axes(ax, "condition number (–)")
    ax.set_xlabel("time since first message (s)")
    return _save(figure, path, f"Shaded: below {GOOD_CONDITION:g}, a well exciting motion (the "
                 "bundled exciting trajectory: about 13); in the thousands some parameters "
                 "are barely determined: look at their std.")
