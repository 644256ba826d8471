"""Calling the dedicated SDP solver: numba compilation (cached on disk), the public entry
points, and a node's background preparation (:mod:`inertial_id.core.estimation.sdp`)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

import inertial_id.core.estimation.sdp.interior as interior
import inertial_id.core.estimation.sdp.linalg as linalg
import inertial_id.core.estimation.sdp.newton as newton
import inertial_id.core.estimation.sdp.problem as problem
from inertial_id.core.estimation.sdp.linalg import CENTRE, N_PI
from inertial_id.core.estimation.sdp.problem import SdpResult, result_of

_NONE_PI, _NONE_DUAL, _NONE_OFFSET = np.full(N_PI, np.nan), np.full((4, 4), np.nan), \
    np.full(6, np.nan)
"""The compiled code's "none" for a start, its dual and the offset (never written; writable
all the same: a read-only array is another type to numba, see :func:`_compiled_input`)."""


def _compiled_input(array: ArrayLike) -> NDArray[np.float64]:
    """``array`` as the one type the compiled functions are compiled for: float64,
    C-contiguous and writable (copied when it is not). Another type (a read-only
    ``Estimate.offset``, a transposed view) would compile a new specialisation there and
    then, for about a minute."""
    return np.require(array, dtype=float, requirements=["C", "W"])


def _start(start: ArrayLike | None, start_dual: ArrayLike | None
           ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Warm-start arrays for the compiled code (NaN: none)."""
    first = _NONE_PI if start is None else _compiled_input(start)
    dual = _NONE_DUAL if start_dual is None else _compiled_input(start_dual)
    return first, dual


def solve_lmi_qp(hessian: ArrayLike, gradient: ArrayLike, margin: ArrayLike,
                 start: ArrayLike | None = None, start_dual: ArrayLike | None = None,
                 tolerance: float = 1e-12, max_iterations: int = 60) -> SdpResult:
    """``min 1/2 pi^T H pi - g^T pi  s.t.  J(pi) - M >= 0`` (module docstring).

    ``hessian`` (10, 10) positive definite, ``gradient`` (10,), ``margin`` ``M`` (4, 4)
    symmetric, ``start`` a previous solution and ``start_dual`` its :attr:`SdpResult.dual`
    (warm start; any point, made strictly feasible here). A result that is not
    :attr:`SdpResult.ok` says why; a Hessian that is not positive definite raises
    ``numpy.linalg.LinAlgError``.
    """
    compiled()
    first, dual = _start(start, start_dual)
    return result_of(*problem.solve_unscaled(
        _compiled_input(hessian), _compiled_input(gradient), _compiled_input(margin), first,
        dual, float(tolerance), int(max_iterations)))


def solve_statistics(information: NDArray[np.float64], moment: NDArray[np.float64],
                     prior: NDArray[np.float64], prior_weight: float, epsilon: float,
                     known_offset: ArrayLike | None = None, start: ArrayLike | None = None,
                     start_dual: ArrayLike | None = None, tolerance: float = 1e-12,
                     max_iterations: int = 60) -> tuple[NDArray[np.float64], SdpResult]:
    """The payload's consistent estimate from its sufficient statistics in one compiled
    call: ``min ||A x - b||^2_W + w sum_i s_i (pi_i - prior_i)^2`` (``s``:
    :func:`prior_scale`) subject to ``J(pi) >= epsilon I``, ``x = [pi; offset]`` (16,
    kg, kg m, kg m^2; N, N m), the offset fixed to ``known_offset`` or estimated. Returns
    ``x`` and the :class:`SdpResult` of the 10-parameter problem (warm start: the previous
    ``result.pi`` and ``result.dual``)."""
    if not _COMPILED:
        compiled()
    first, dual = _start(start, start_dual)
    offset = _NONE_OFFSET if known_offset is None else _compiled_input(known_offset)
    x, *rest = problem.solve_payload(
        _compiled_input(information), _compiled_input(moment), _compiled_input(prior),
        float(prior_weight), float(epsilon), offset, first, dual, float(tolerance),
        int(max_iterations))
    return x, result_of(x[:N_PI], *rest)


_COMPILED_FUNCTIONS = (
    (linalg, ("assemble", "adjoint", "matmul", "matvec", "rotation", "rotate_columns",
              "left_singular", "congruence", "jacobi", "smallest_jacobi", "max_step",
              "cholesky", "inverse", "cholesky_solve")),
    (interior, ("_direction", "iterate")),
    (newton, ("_face_rank", "active_newton", "_frame_projection", "_face_normals",
              "_pair_matrix", "_stationary_dual")),
    (problem, ("_solve", "solve_unscaled", "_prior_scale", "solve_payload")),
)
"""The functions the compiled solve runs through, module by module (each calls the others by
the names its module holds)."""


def _compile() -> bool:
    """Compile :data:`_COMPILED_FUNCTIONS` with numba (cached on disk) where it is
    installed, and point every module's name for one of them at the compiled version (a
    module imported it by name); ``False`` leaves them plain numpy (the same algorithm,
    about 50 times slower)."""
    try:
        import numba
    except ImportError:
        return False
    # numpy's error model: a division by zero gives inf or nan as in the uncompiled code
    # (numba's default raises ZeroDivisionError, seen once in 40 hypothesis draws); the
    # result's checks then report a failed solve and cvxpy takes over.
    jit = numba.njit(cache=True, nogil=True, error_model="numpy")
    compiled_versions = {name: jit(getattr(module, name))
                         for module, names in _COMPILED_FUNCTIONS for name in names}
    for module, _ in _COMPILED_FUNCTIONS:
        for name, function in compiled_versions.items():
            if name in vars(module):
                setattr(module, name, function)
    return True


_COMPILED: list[bool] = []
_LOADED = threading.Event()  # the compiled machine code is loaded in this process
_LOCK = threading.Lock()
_COMPILE_LOCK = threading.Lock()
_PREPARATION: list[threading.Thread] = []  # a background preparation, once started


def compiled() -> bool:
    """Whether the iterations run compiled (numba installed). The first call imports numba
    and wraps the functions (about 0.4 s; compilation itself happens on the first solve, or
    is read from numba's disk cache), so processes that never use this solver pay nothing."""
    with _COMPILE_LOCK:
        if not _COMPILED:
            _COMPILED.append(_compile())
    return _COMPILED[0]


def warm_up() -> bool:
    """Compile the solver, or load it from numba's disk cache, now (blocking: about 40 s to
    compile, under 1 s to load), by solving a small problem; ``False`` without numba."""
    if not compiled():
        return False
    with _LOCK:
        if not _LOADED.is_set():
            information = np.eye(N_PI + 6)
            information[:N_PI, :N_PI] = np.diag([1.0, 1e-2, 1e-2, 1e-2, 1e-4, 0.0, 0.0, 1e-4,
                                                 0.0, 1e-4]) + 1e-6 * np.eye(N_PI)
            moment = information @ np.r_[CENTRE * np.r_[1.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0,
                                                        1.0, 0.0, 1.0], np.zeros(6)]
            solve_statistics(information, moment, np.zeros(N_PI), 0.0, 1e-8)
            _LOADED.set()
    return True


def available() -> bool:
    """Whether the compiled solver can run now without stalling its caller: loaded; or,
    unless :func:`prepare_in_background` is under way or failed, loaded (compiled if need
    be) now by :func:`warm_up`."""
    if _LOADED.is_set():
        return True
    if _PREPARATION:
        return False
    return warm_up()


def prepare_in_background(report: Callable[[str], None]) -> None:
    """Get the compiled solver ready without stalling this process (a node's start): a
    separate Python process at the lowest priority compiles it into numba's disk cache if it
    is not there yet, then a thread of this one loads it (:func:`warm_up`, about 0.5 s: the
    longest pause it gave a busy main thread was 43 ms); :func:`available` is ``False`` until
    then. ``report`` gets one line: how long it took, or why the solver stays off (cvxpy
    solves meanwhile and then)."""
    if _PREPARATION or _LOADED.is_set():
        return

    def prepare() -> None:
        start = time.monotonic()
        try:
            package_root = str(Path(__file__).resolve().parents[2])  # this inertial_id
            path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH"))
                                   if p)
            done = subprocess.run([sys.executable, "-c", PREPARATION_PROGRAM, str(os.getpid())],
                                  capture_output=True, text=True, cwd="/",
                                  env={**os.environ, "PYTHONPATH": path},
                                  timeout=PREPARATION_TIMEOUT, check=False)
            if done.returncode != 0:
                lines = done.stderr.strip().splitlines() or ["no message"]
                report(f"the dedicated SDP solver did not compile ({lines[-1]}): cvxpy solves")
                return
            if warm_up():
                report(f"dedicated SDP solver ready after {time.monotonic() - start:.1f} s")
            else:
                report("numba is not installed: cvxpy solves the SDP")
        except (OSError, subprocess.SubprocessError) as exc:
            report(f"the dedicated SDP solver could not be prepared ({exc}): cvxpy solves")

    thread = threading.Thread(target=prepare, name="sdp-preparation", daemon=True)
    _PREPARATION.append(thread)
    thread.start()


PREPARATION_TIMEOUT = 600.0
"""s a background compilation may take before the solver stays off."""
PREPARATION_PROGRAM = """
import ctypes, os, signal, sys
if hasattr(os, "nice"):
    os.nice(19)  # the lowest priority: the node's own work goes first
if sys.platform == "linux":  # ends with the node, however it ends
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)  # the node ended before the line above
from inertial_id.core.estimation import sdp
sdp.warm_up()
"""
"""What the separate process of :func:`prepare_in_background` runs (at the lowest priority,
and it ends when the node does)."""
