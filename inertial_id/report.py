"""Plots and a markdown summary of an offline replay (``inertial-id replay --report DIR``).

:func:`write_report` turns a :class:`~inertial_id.replay.ReplayResult` into PNG figures and a
``summary.md`` that embeds them. Times on every axis are seconds since the bag's first
message (``result.start_time``), the same clock as ``result.contacts``. Parameters are in the
sensor frame (DESIGN.md): CoM in mm, inertia in kg m^2 about the CoM, wrenches in N and N m.

Figures are drawn on matplotlib's Agg canvas through :class:`matplotlib.figure.Figure`, never
through ``pyplot``: no display is needed and no global backend state is touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from numpy.typing import NDArray

from inertial_id.core.metrics import parameter_errors
from inertial_id.core.parameters import PI_NAMES, vector_from_symmetric
from inertial_id.core.regressor import predicted_wrench

if TYPE_CHECKING:
    from inertial_id.core.estimators import Estimate
    from inertial_id.replay import ReplayResult

DPI = 150
"""Resolution of the PNG figures (dots per inch)."""
AXES = ("x", "y", "z")
COLORS = ("tab:red", "tab:green", "tab:blue")
INERTIA_NAMES = ("xx", "xy", "xz", "yy", "yz", "zz")
WRENCH_NAMES = ("fx", "fy", "fz", "tx", "ty", "tz")
CONTACT_STYLE = {"color": "tab:orange", "alpha": 0.2, "lw": 0}
CHANGE_STYLE = {"color": "tab:purple", "ls": ":", "lw": 1.5}
GOOD_CONDITION = 50.0
"""Condition numbers below this are shaded as well excited in ``condition.png`` (guidance:
the bundled exciting trajectory gives about 13, the TIAGo recording 4.6)."""


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
    written = [path for path in (
        _convergence_plot(result, truth, directory / "convergence.png"),
        _error_plot(result, truth, directory / "error.png"),
        _fit_plot(result, directory / "wrench_fit.png"),
        _offset_plot(result, truth, directory / "offset.png"),
        _residual_plot(result, directory / "residual.png"),
        _t2_plot(result, directory / "t2.png"),
        _condition_plot(result, directory / "condition.png"),
    ) if path is not None]
    name = bag if bag is not None else getattr(result, "bag", None)
    summary = directory / "summary.md"
    summary.write_text(summary_markdown(result, truth, [p.name for p in written], name))
    return [*written, summary]


# --- data -------------------------------------------------------------------------------


def _relative(times: Sequence[float], result: ReplayResult) -> NDArray[np.float64]:
    """Stamps (s) as seconds since the bag's first message."""
    return np.asarray(times, dtype=float).reshape(-1) - float(result.start_time)


def derived_series(pi: NDArray[np.float64], std: NDArray[np.float64]
                   ) -> dict[str, NDArray[np.float64]]:
    """Mass (kg), CoM (mm) and CoM-inertia diagonal (kg m^2) per row of ``pi`` (K, 10), with
    first-order standard deviations from ``std`` (K, 10), entries taken as uncorrelated.

    ``com = h / m``; ``I_com,xx = Ixx - (hy^2 + hz^2) / m`` (and cyclic). Rows with ``m <= 0``
    give NaN.
    """
    pi = np.atleast_2d(pi)
    std = np.atleast_2d(std)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.where(pi[:, 0] > 0.0, pi[:, 0], np.nan)[:, None]
        h, sm, sh = pi[:, 1:4], std[:, :1], std[:, 1:4]
        com = h / m
        com_std = np.hypot(sh / m, h * sm / m**2)
        diag_o = pi[:, [4, 7, 9]]
        others = ((1, 2), (0, 2), (0, 1))
        inertia = np.stack([diag_o[:, i] - (h[:, j]**2 + h[:, k]**2) / m[:, 0]
                            for i, (j, k) in enumerate(others)], axis=1)
        inertia_std = np.stack([np.sqrt(
            std[:, [4, 7, 9][i]]**2 + (2 * h[:, j] * sh[:, j] / m[:, 0])**2
            + (2 * h[:, k] * sh[:, k] / m[:, 0])**2
            + ((h[:, j]**2 + h[:, k]**2) * sm[:, 0] / m[:, 0]**2)**2)
            for i, (j, k) in enumerate(others)], axis=1)
    return {"mass": m[:, 0], "mass_std": sm[:, 0], "com_mm": 1e3 * com,
            "com_mm_std": 1e3 * com_std, "inertia": inertia, "inertia_std": inertia_std}


def truth_segments(truth: dict[str, Any] | None) -> list[tuple[float, float, dict[str, Any]]]:
    """``(from s, to s, payload)``: the true payload over time (a step at a payload change)."""
    if not truth or "payload" not in truth:
        return []
    change = truth.get("payload_change")
    if change:
        t = float(change["time"])
        return [(-np.inf, t, truth["payload"]), (t, np.inf, change["payload"])]
    return [(-np.inf, np.inf, truth["payload"])]


def final_truth(truth: dict[str, Any] | None) -> dict[str, Any] | None:
    """The payload carried at the end of the bag (the one the final estimate is of)."""
    segments = truth_segments(truth)
    return segments[-1][2] if segments else None


def _truth_value(payload: dict[str, Any], quantity: str, axis: int) -> float:
    """The true mass (kg), CoM (mm) or CoM-inertia diagonal entry (kg m^2) of a payload."""
    if quantity == "mass":
        return float(payload["mass"])
    if quantity == "com_mm":
        return 1e3 * float(payload["com"][axis])
    return float(payload["inertia_com"][(0, 3, 5)[axis]])


# --- figures ----------------------------------------------------------------------------


def _figure(rows: int, height: float) -> tuple[Figure, list[Axes]]:
    """A figure of ``rows`` panels sharing the time axis, on the Agg canvas."""
    figure = Figure(figsize=(9.0, height))
    FigureCanvasAgg(figure)
    axes = figure.subplots(rows, 1, sharex=True, squeeze=False)[:, 0]
    return figure, list(axes)


def _save(figure: Figure, path: Path) -> Path:
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
            ax.hlines(_truth_value(payload, quantity, axis), a, b, colors=color,
                      linestyles="--", lw=1.0, label=label if k == 0 else None)
    ax.set_xlim(lo, hi)


def _convergence_plot(result: ReplayResult, truth: dict[str, Any] | None,
                      path: Path) -> Path | None:
    """Mass, CoM and CoM-inertia diagonal per solve, with +-1 sigma bands and the truth."""
    h = result.pipeline.history
    if not h.solve_time:
        return None
    t = _relative(h.solve_time, result)
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
    t = _relative(h.solve_time, result)
    errors = [parameter_errors(pi, _truth_pi(truth, time))
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


def _truth_pi(truth: dict[str, Any] | None, t: float) -> NDArray[np.float64]:
    """The true ``pi`` at ``t`` s since the first message."""
    for start, end, payload in truth_segments(truth):
        if start <= t < end:
            return np.asarray(payload["pi"], dtype=float)
    return np.asarray(truth_segments(truth)[-1][2]["pi"], dtype=float)


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


def final_fit(result: ReplayResult) -> tuple[NDArray[np.float64], ...] | None:
    """Times (s since the first message), measured (raw) and predicted wrench (N, 6) of the
    samples the history kept, predicted with the final estimate; None without one."""
    h, e = result.pipeline.history, result.estimate
    if e is None or not h.sample_time:
        return None
    t = np.concatenate(h.sample_time)
    rows = np.concatenate(h.sample_rows)
    predicted = predicted_wrench(e.pi, rows[:, :6], rows[:, 6:12], e.offset,
                                 result.pipeline.online.identifier.sign)
    return _relative(t, result), rows[:, 12:], predicted


def _offset_plot(result: ReplayResult, truth: dict[str, Any] | None,
                 path: Path) -> Path | None:
    """The estimated F/T offset per solve, with ±1 sigma bands (and the truth)."""
    h = result.pipeline.history
    if not h.solve_time:
        return None
    t = _relative(h.solve_time, result)
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
    t = _relative(h.batch_time, result)
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
    t = _relative(h.batch_time, result)
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
    ax.text(0.01, 0.02, f"a contact starts after {c.on_samples} consecutive samples above the "
            f"threshold and ends after {c.off_samples} below {c.release:g} × threshold:\n"
            "a single sample above it (a spike of the per-batch maximum) is no contact",
            transform=ax.transAxes, fontsize=7, va="bottom")
    ax.set_title("Contact monitor: Hotelling T² of the residual wrench")
    _finish_axes(ax, "T² (dimensionless)")
    ax.set_xlabel("time since first message (s)")
    return _save(figure, path)


def _condition_plot(result: ReplayResult, path: Path) -> Path | None:
    """Condition number of the column-scaled regressor at each solve, log scale."""
    h = result.pipeline.history
    if not h.solve_time:
        return None
    t = _relative(h.solve_time, result)
    cond = _positive(h.condition_number)
    figure, (ax,) = _figure(1, 4.0)
    ax.plot(t, cond, color="tab:blue", marker=".", lw=1.0, label="condition number")
    _mark_events(ax, result)
    if np.any(np.isfinite(cond)):
        ax.set_yscale("log")
    ax.axhspan(1.0, GOOD_CONDITION, color="tab:green", alpha=0.08)
    ax.text(0.01, 0.97, f"shaded: below {GOOD_CONDITION:g}, a well exciting motion (the "
            "bundled exciting trajectory: about 13); in the thousands some parameters are "
            "barely determined: look at their std", transform=ax.transAxes, fontsize=7,
            va="top")
    ax.set_title("Excitation: condition number of the scaled regressor")
    _finish_axes(ax, "condition number (–)")
    ax.set_xlabel("time since first message (s)")
    return _save(figure, path)


# --- summary ----------------------------------------------------------------------------


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
    """Residual statistics of the final estimate on the kept samples, contacts included."""
    fit = final_fit(result)
    if fit is None:
        return []
    _, measured, predicted = fit
    residual = measured - predicted
    payload = result.pipeline.online.config.payload
    noise = np.repeat([payload.force_noise_std, payload.torque_noise_std], 3)
    rms = np.sqrt(np.mean(residual**2, axis=0))
    lag1 = [float(np.corrcoef(r[:-1], r[1:])[0, 1]) if r.size > 2 else float("nan")
            for r in residual.T]
    return [
        "## Residual of the final estimate", "",
        f"Measured minus predicted raw wrench on {residual.shape[0]} kept samples "
        "(every 10th; contacts included):", "",
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
