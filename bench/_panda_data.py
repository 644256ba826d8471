"""The Franka Emika Panda recording and the two published models of Gaz et al. (2019).

Data and numbers from C. Gaz, M. Cognetti, A. Oliva, P. Robuffo Giordano, A. De Luca,
"Dynamic Identification of the Franka Emika Panda Robot With Retrieval of Feasible Parameters
Using Penalty-Based Optimization", IEEE RA-L 2019, and its supplementary material (see the data
folder's README): the recording of the exciting trajectory (joint torque sensors, about 1 kHz),
the modified-DH kinematics of ``Load_Franka_DH.m``, the feasible models of Tables VIII-IX
(**p_hat**, the authors' penalty method; **delta**, the LMI method of Sousa and Cortesao),
each link's mass, CoM and inertia about the CoM in its DH frame, and the sigmoid friction of
``get_FrictionTorque.m``. Joint limits: Franka's published ones.

``c1z`` of p_hat is not given (``*``: not identifiable, it moves no joint torque: joint 1
turns about ``z1`` and gravity is along it); 0 is used. Nothing here imports ROS.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.signal
from numpy.typing import NDArray

from inertial_id.core.joint_torque.dh import DHRow, modified_dh_urdf
from inertial_id.core.parameters import BodyParameters

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "panda"
"""``shared/data/panda`` next to the repository (override with ``--data``)."""

# Load_Franka_DH.m, modified DH; the 8th row is the flange (fixed).
_D = (0.333, 0.0, 0.316, 0.0, 0.384, 0.0, 0.0, 0.107)
_A = (0.0, 0.0, 0.0, 0.0825, -0.0825, 0.0, 0.088, 0.0)
_ALPHA = (0.0, -np.pi / 2, np.pi / 2, np.pi / 2, -np.pi / 2, np.pi / 2, np.pi / 2, 0.0)
DH_ROWS = tuple(DHRow(a=a, alpha=al, d=d, fixed=(i == 7))
                for i, (a, al, d) in enumerate(zip(_A, _ALPHA, _D, strict=True)))

POSITION_LIMITS = ((-2.8973, 2.8973), (-1.7628, 1.7628), (-2.8973, 2.8973), (-3.0718, -0.0698),
                   (-2.8973, 2.8973), (-0.0175, 3.7525), (-2.8973, 2.8973))
VELOCITY_LIMITS = (2.175, 2.175, 2.175, 2.175, 2.61, 2.61, 2.61)
EFFORT_LIMITS = (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)

# Tables VIII-IX: mass (kg), CoM (m), inertia about the CoM [xx xy xz yy yz zz] (kg m^2).
P_HAT = {
    "mass": (4.970684, 0.646926, 3.228604, 3.587895, 1.225946, 1.666555, 7.35522e-01),
    "com": ((3.875e-03, 2.081e-03, 0.0), (-3.141e-03, -2.872e-02, 3.495e-03),
            (2.7518e-02, 3.9252e-02, -6.6502e-02), (-5.317e-02, 1.04419e-01, 2.7454e-02),
            (-1.1953e-02, 4.1065e-02, -3.8437e-02), (6.0149e-02, -1.4117e-02, -1.0517e-02),
            (1.0517e-02, -4.252e-03, 6.1597e-02)),
    "inertia": ((7.0337e-01, -1.3900e-04, 6.7720e-03, 7.0661e-01, 1.9169e-02, 9.1170e-03),
                (7.9620e-03, -3.9250e-03, 1.0254e-02, 2.8110e-02, 7.0400e-04, 2.5995e-02),
                (3.7242e-02, -4.7610e-03, -1.1396e-02, 3.6155e-02, -1.2805e-02, 1.0830e-02),
                (2.5853e-02, 7.7960e-03, -1.3320e-03, 1.9552e-02, 8.6410e-03, 2.8323e-02),
                (3.5549e-02, -2.1170e-03, -4.0370e-03, 2.9474e-02, 2.2900e-04, 8.6270e-03),
                (1.9640e-03, 1.0900e-04, -1.1580e-03, 4.3540e-03, 3.4100e-04, 5.4330e-03),
                (1.2516e-02, -4.2800e-04, -1.1960e-03, 1.0027e-02, -7.4100e-04, 4.8150e-03)),
}
DELTA = {
    "mass": (2.0643e-05, 9.2017, 1.4575, 4.5856, 0.5231, 2.0604, 0.1718),
    "com": ((5.202e-08, 5.202e-08, -0.1750), (0.0015, -0.0578, -0.0384), (0.1096, 0.05, -0.1),
            (-0.0485, 0.15, 0.0147), (-0.004, 0.045, -0.05), (0.0732, -0.0251, -0.0276),
            (-0.0326, 0.0087, 0.0396)),
    "inertia": ((0.6, -3.2497e-14, -6.4280e-09, 0.6, -6.4280e-09, 2.0353e-06),
                (0.028, 5.5650e-05, 0.0056, 0.0291, -2.7636e-04, 0.0011),
                (2.0154e-06, -5.9144e-09, 1.1523e-08, 2.0243e-06, 6.0956e-09, 2.0164e-06),
                (2.0242e-06, 7.1405e-09, 8.8917e-10, 2.0036e-06, -2.2039e-09, 2.0260e-06),
                (2.0057e-06, 1.6453e-10, -3.6824e-10, 2.0037e-06, 2.3080e-09, 2.0028e-06),
                (2.0026e-06, 1.5823e-09, 2.0530e-09, 2.0070e-06, -4.9387e-10, 2.0073e-06),
                (2.0026e-06, 2.6159e-10, 1.4055e-09, 2.0037e-06, -4.2047e-10, 2.0020e-06)),
}

# get_FrictionTorque.m: tau_f = A / (1 + exp(-alpha (qd + s))) - A / (1 + exp(-alpha s)).
FRICTION_A = np.array([0.54615, 0.87224, 0.64068, 1.2794, 0.83904, 0.30301, 0.56489])
FRICTION_SHIFT = np.array([0.039533, 0.025882, -0.04607, 0.036194, 0.026226, -0.021047,
                           0.0035526])
FRICTION_ALPHA = np.array([5.1181, 9.0657, 10.136, 5.5903, 8.3469, 17.133, 10.336])


def published_bodies(table: dict) -> list[BodyParameters]:
    """The seven links of a published model (p_hat or delta), each in its DH frame."""
    return [BodyParameters.from_mass_com_inertia(m, c, i)
            for m, c, i in zip(table["mass"], table["com"], table["inertia"], strict=True)]


def published_friction(qd: NDArray[np.float64]) -> NDArray[np.float64]:
    """The sigmoid friction torque of ``get_FrictionTorque.m`` (N m) for (N, 7) velocities."""
    def sigmoid(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return 1.0 / (1.0 + np.exp(-x))

    return FRICTION_A * (sigmoid(FRICTION_ALPHA * (qd + FRICTION_SHIFT))
                         - sigmoid(FRICTION_ALPHA * FRICTION_SHIFT))


def panda_urdf(bodies: list[BodyParameters] | None = None) -> str:
    """The Panda arm as a URDF from the DH table (links ``panda_link1..7``, flange
    ``panda_link8``), with ``bodies`` as its inertials (default: p_hat)."""
    bodies = bodies if bodies is not None else published_bodies(P_HAT)
    return modified_dh_urdf("panda", DH_ROWS, [*bodies, None], EFFORT_LIMITS, VELOCITY_LIMITS,
                            POSITION_LIMITS)


@dataclass(frozen=True)
class Recording:
    """The trajectory on a uniform grid: ``t`` (s), ``q`` (rad), ``qd`` (rad/s), ``qdd``
    (rad/s^2), ``tau`` (N m, low-passed) and ``tau_raw`` (N m, only resampled); (N, 7)."""

    t: NDArray[np.float64]
    q: NDArray[np.float64]
    qd: NDArray[np.float64]
    qdd: NDArray[np.float64]
    tau: NDArray[np.float64]
    tau_raw: NDArray[np.float64]


def _column(path: Path) -> NDArray[np.float64]:
    return np.loadtxt(path, dtype=float).reshape(-1)


def read_raw(data_dir: Path = DEFAULT_DATA_DIR
             ) -> tuple[NDArray[np.float64], dict[str, NDArray[np.float64]]]:
    """``trajectory_1`` as recorded: the stamps (N,) s and ``positions``, ``velocity``,
    ``torques`` (N, 7) rad, rad/s, N m, on those (jittery) stamps."""
    folder = Path(data_dir) / "trajectory_1"
    stamps = _column(folder / "exciting_traj_time.txt")
    raw = {name: _column(folder / f"exciting_traj_{name}.txt").reshape(-1, 7)
           for name in ("positions", "velocity", "torques")}
    if not all(len(v) == len(stamps) for v in raw.values()):
        raise ValueError("the Panda files do not have one row per stamp")
    return stamps, raw


def load_recording(data_dir: Path = DEFAULT_DATA_DIR, rate: float = 1000.0,
                   cutoff: float = 10.0, order: int = 4) -> Recording:
    """Read ``trajectory_1``, resample linearly onto a uniform ``rate`` grid (the stamps are
    jittery), low-pass positions, velocities and torques with a zero-phase Butterworth of
    ``order`` at ``cutoff`` Hz (``filtfilt``: no lag), accelerations by central differences of
    the filtered velocity."""
    stamps, raw = read_raw(data_dir)
    t = np.arange(stamps[0], stamps[-1], 1.0 / rate)

    def resample(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.column_stack([np.interp(t, stamps, x[:, j]) for j in range(x.shape[1])])

    b, a = scipy.signal.butter(order, cutoff / (0.5 * rate))

    def low_pass(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return scipy.signal.filtfilt(b, a, x, axis=0)

    q, qd, tau = (resample(raw[k]) for k in ("positions", "velocity", "torques"))
    qd_f = low_pass(qd)
    return Recording(t, low_pass(q), qd_f, np.gradient(qd_f, 1.0 / rate, axis=0),
                     low_pass(tau), tau)


# ------------------------------------------------------------ the authors' released model
#
# The ``.m`` files of ``reference_model`` are MATLAB Symbolic Toolbox output: temporaries
# ``tN = expression;`` and one final matrix literal. :func:`_matlab_function` turns such a file
# into a vectorised numpy function of the joint arrays (each ``q(i)``, ``dq(i)`` an (N,) array).


def _python_expression(text: str) -> str:
    """A MATLAB scalar expression as Python: element-wise operators, 1-based indexing."""
    import re

    text = text.replace(".^", "**").replace("^", "**").replace(".*", "*").replace("./", "/")
    return re.sub(r"\b(q|dq|Bstack_hat)\((\d+)\)",
                  lambda m: f"{m.group(1)}[{int(m.group(2)) - 1}]", text)


def _matlab_function(path: Path, result: str, shape: tuple[int, ...]) -> object:
    """``f(q, dq)`` (each a list of (N,) arrays) -> array of ``shape + (N,)``, evaluating the
    file's statements in order; ``result`` is the name of its output."""
    import re

    body = path.read_text()
    body = re.sub(r"%[^\n]*", "", body)                 # comments
    body = re.sub(r"\.\.\.\s*\n", " ", body)            # continuations
    body = body[body.index("\n", body.index("function")):]
    statements = [s.strip() for s in body.split(";\n") if s.strip()]
    lines = []
    for statement in statements:
        name, _, value = statement.partition("=")
        name, value = name.strip(), value.strip().rstrip(";")
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            continue
        if value.startswith("["):
            rows = [r for r in value.strip("[]").split(";") if r.strip()]
            cells = [c for r in rows for c in r.split(",")]
            value = "_stack([" + ", ".join(_python_expression(c) for c in cells) + "])"
        else:
            value = _python_expression(value)
        lines.append(f"{name} = {value}")
    source = "\n".join(lines)
    code = compile(source, str(path), "exec")

    def function(q: list, dq: list) -> NDArray[np.float64]:
        n = np.broadcast(*q).shape

        def _stack(cells: list) -> NDArray[np.float64]:
            return np.array([np.broadcast_to(c, n) for c in cells])

        scope = {"q": q, "dq": dq, "cos": np.cos, "sin": np.sin, "sqrt": np.sqrt,
                 "_stack": _stack, "np": np}
        exec(code, scope)  # noqa: S102 - the authors' model files, read as formulas
        return np.asarray(scope[result]).reshape(shape + n)

    return function


def reverse_engineered_torques(q: NDArray[np.float64], qd: NDArray[np.float64],
                               qdd: NDArray[np.float64], data_dir: Path = DEFAULT_DATA_DIR
                               ) -> NDArray[np.float64]:
    """The authors' released model (``get_MassMatrix``, ``get_CoriolisVector``,
    ``get_GravityVector`` with Table III's reverse-engineered coefficients, plus
    ``get_FrictionTorque``): ``M(q) qdd + c(q, qd) + g(q) + tau_f(qd)``, (N, 7) N m."""
    folder = Path(data_dir) / "reference_model"
    mass = _matlab_function(folder / "get_MassMatrix.m", "MassMatrix", (7, 7))
    coriolis = _matlab_function(folder / "get_CoriolisVector.m", "cqdq", (7,))
    gravity = _matlab_function(folder / "get_GravityVector.m", "g_li_hat", (7,))
    qs, dqs = list(q.T), list(qd.T)
    m = mass(qs, dqs)                                   # (7, 7, N)
    return (np.einsum("ijn,nj->ni", m, qdd) + coriolis(qs, dqs).T + gravity(qs, dqs).T
            + published_friction(qd))
