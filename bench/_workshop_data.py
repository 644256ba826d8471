"""Loader, noise protocol and metrics of the workshop_tools data set (20 tools, exact truth).

Data of Nadeau, Giamou, Kelly, "The Sum of Its Parts: Visual Part Segmentation for Inertial
Parameter Identification of Manipulated Objects", ICRA 2023 (MIT licence); see the data
directory's README. Per tool ``<Name>``: ``<Name>.csv`` (1000 samples at 100 Hz, world axes),
``<Name>.ply`` (segmented point cloud, mesh frame) and one shared ``ground_truth.json``.

Conventions of the files (checked numerically by :func:`zero_noise_residual`):

- ``R = R_WS`` (sensor axes in world), row-major in ``ft_R00..ft_R22``;
- ``ft_v*``, ``ft_w*``: linear velocity of the sensor origin and angular velocity, world axes;
- ``ft_a*``: the origin's **classical** linear acceleration, ``ft_al*``: angular acceleration,
  world axes;
- ``Fx_W..Tz_W``: the wrench the **sensor applies to the tool**, about the sensor origin,
  world axes; gravity is ``(0, 0, +9.81)`` in world;
- ``pi_sensor`` is ``[m, mcx, mcy, mcz, Ixx, Ixy, Ixz, Iyy, Iyz, Izz]`` in the sensor frame
  about the sensor origin (the package's order).

In the sensor frame the model is ``R^T [F; T] = Y(v, a_g) pi_sensor`` with the body twist
``v = [R^T v; R^T w]`` and the proper acceleration
``a_g = [R^T a - w_s x v_s - R^T g; R^T alpha]`` (spatial, not classical, linear part).

Nothing here imports ROS; the maths comes from :mod:`inertial_id.core`.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache, cached_property
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike, NDArray

from inertial_id.core.parameters import BodyParameters, is_physically_consistent
from inertial_id.core.regressor import regressor

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "workshop_tools"
"""``<repo>/../shared/data/workshop_tools`` (override with ``--data DIR``)."""

GRAVITY_WORLD = np.array([0.0, 0.0, 9.81])
"""Gravity of the data set in world axes (m/s^2); note the sign, see the module docstring."""

GROUND_TRUTH_FILE = "ground_truth.json"

_ROTATION_COLUMNS = [f"ft_R{i}{j}" for i in range(3) for j in range(3)]
_COLUMNS = {
    "position": ["ft_px", "ft_py", "ft_pz"],
    "velocity": ["ft_vx", "ft_vy", "ft_vz"],
    "angular_velocity": ["ft_wx", "ft_wy", "ft_wz"],
    "acceleration": ["ft_ax", "ft_ay", "ft_az"],
    "angular_acceleration": ["ft_alx", "ft_aly", "ft_alz"],
    "wrench": ["Fx_W", "Fy_W", "Fz_W", "Tx_W", "Ty_W", "Tz_W"],
}


class WorkshopDataError(RuntimeError):
    """The data directory or one of its files is missing or malformed."""


# --------------------------------------------------------------------------------------------
# Noise protocol
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoiseLevel:
    """Standard deviations of the authors' zero-mean Gaussian noise, added in world axes.

    ``linear_acceleration`` (m/s^2) and ``angular_acceleration`` (rad/s^2) go on the classical
    acceleration of the sensor origin and the angular acceleration, ``force`` (N) and
    ``torque`` (N m) on the wrench. Velocities and poses stay exact, as in the paper.
    """

    name: str
    linear_acceleration: float
    angular_acceleration: float
    force: float
    torque: float

    @property
    def is_zero(self) -> bool:
        """True when no noise is added at all."""
        return not any((self.linear_acceleration, self.angular_acceleration, self.force,
                        self.torque))

    @property
    def weight_stds(self) -> tuple[float, float]:
        """(force, torque) std devs to weight the wrench rows by; the Low ones when noise-free.

        Estimators weight rows by inverse variances, which must be positive; with no noise any
        positive weights give the exact answer, so the Low level's ratio is used.
        """
        if self.force > 0.0 and self.torque > 0.0:
            return self.force, self.torque
        low = NOISE_LEVELS["low"]
        return low.force, low.torque


def _scaled(name: str, factor: float) -> NoiseLevel:
    return NoiseLevel(name, 0.025 * factor, 0.25 * factor, 0.05 * factor, 0.0025 * factor)


NOISE_LEVELS: dict[str, NoiseLevel] = {
    "none": _scaled("none", 0.0),
    "low": _scaled("low", 1.0),
    "mod": _scaled("mod", 2.0),
    "high": _scaled("high", 4.0),
}
"""The paper's Low / Mod (x2) / High (x4) levels, plus ``none`` for exact-data checks."""


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolData:
    """One tool: world-frame trajectory (possibly noisy), ground truth and file locations.

    Arrays are (N, 3) unless noted. ``rotation`` is (N, 3, 3) ``R_WS``; ``wrench`` is (N, 6),
    the wrench the sensor applies to the tool, about the sensor origin, world axes.
    ``pi_true`` is the exact ``pi`` (sensor frame, about its origin). ``extents`` are the
    point-cloud bounding-box extents in sensor axes as the authors compute them (signed: the
    mesh-frame extents rotated; use their absolute values). ``noise`` names the noise level
    applied (``none`` for the files as stored).

    Methods must estimate from the samples only; ``pi_true`` is there for scoring (and for
    priors that the paper itself builds from the true mass, which such a method must say).
    """

    name: str
    directory: Path
    time: NDArray[np.float64]
    rotation: NDArray[np.float64]
    position: NDArray[np.float64]
    velocity: NDArray[np.float64]
    angular_velocity: NDArray[np.float64]
    acceleration: NDArray[np.float64]
    angular_acceleration: NDArray[np.float64]
    wrench: NDArray[np.float64]
    pi_true: NDArray[np.float64]
    rotation_sensor_mesh: NDArray[np.float64]
    position_sensor_mesh: NDArray[np.float64]
    extents: NDArray[np.float64]
    noise: str = "none"

    @property
    def n_samples(self) -> int:
        """Number of time samples."""
        return int(self.time.size)

    @property
    def ply_path(self) -> Path:
        """The tool's segmented point cloud ``<Name>.ply``."""
        return self.directory / f"{self.name}.ply"

    @cached_property
    def sensor_samples(self) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                      NDArray[np.float64]]:
        """``(twist, proper_acceleration, wrench)``, each (N, 6), in the sensor frame.

        ``twist = [R^T v; R^T w]``, ``proper_acceleration = [R^T a - w_s x v_s - R^T g;
        R^T alpha]`` (spatial linear acceleration of the origin minus gravity) and
        ``wrench = R^T [F; T]`` (sensor on tool), so that ``wrench = Y(twist, a_g) pi``.
        """
        rt = np.transpose(self.rotation, (0, 2, 1))

        def to_sensor(x: NDArray[np.float64]) -> NDArray[np.float64]:
            return np.einsum("nij,nj->ni", rt, x)

        v_s = to_sensor(self.velocity)
        w_s = to_sensor(self.angular_velocity)
        a_spatial = to_sensor(self.acceleration) - np.cross(w_s, v_s)
        g_s = to_sensor(np.broadcast_to(GRAVITY_WORLD, self.velocity.shape))
        twist = np.hstack((v_s, w_s))
        proper = np.hstack((a_spatial - g_s, to_sensor(self.angular_acceleration)))
        wrench = np.hstack((to_sensor(self.wrench[:, :3]), to_sensor(self.wrench[:, 3:])))
        return twist, proper, wrench

    def with_noise(self, level: NoiseLevel, rng: np.random.Generator) -> ToolData:
        """A copy with the authors' noise added to the world-frame accelerations and wrench."""
        if level.is_zero:
            return replace(self, noise=level.name)
        n = self.n_samples

        def noisy(x: NDArray[np.float64], std: float) -> NDArray[np.float64]:
            return x + std * rng.standard_normal((n, 3))

        wrench = np.hstack((noisy(self.wrench[:, :3], level.force),
                            noisy(self.wrench[:, 3:], level.torque)))
        return replace(
            self,
            acceleration=noisy(self.acceleration, level.linear_acceleration),
            angular_acceleration=noisy(self.angular_acceleration, level.angular_acceleration),
            wrench=wrench,
            noise=level.name,
        )


def noise_rng(seed: int, tool_name: str) -> np.random.Generator:
    """The generator of one (seed, tool) run: independent of which other tools are selected."""
    return np.random.default_rng([int(seed), zlib.crc32(tool_name.encode())])


def load_ground_truth(data_dir: Path) -> dict[str, dict]:
    """``ground_truth.json`` of ``data_dir``: ``{tool: {pi_sensor, R_sensor_mesh, ...}}``."""
    path = Path(data_dir) / GROUND_TRUTH_FILE
    if not path.is_file():
        raise WorkshopDataError(f"{path}: no such file (give the data directory with --data)")
    with path.open() as f:
        return json.load(f)


def tool_names(data_dir: Path) -> list[str]:
    """Names of the tools in ``data_dir`` (sorted), from ``ground_truth.json``."""
    return sorted(load_ground_truth(data_dir))


def _read_csv(path: Path) -> dict[str, NDArray[np.float64]]:
    if not path.is_file():
        raise WorkshopDataError(f"{path}: no such file")
    with path.open() as f:
        header = f.readline().strip().split(",")
    values = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    if values.shape[1] != len(header):
        raise WorkshopDataError(f"{path}: {values.shape[1]} columns, header has {len(header)}")
    return {name: values[:, i] for i, name in enumerate(header)}


def load_tool(data_dir: Path, name: str, ground_truth: dict[str, dict] | None = None) -> ToolData:
    """Read one tool's trajectory and ground truth (noise-free, as stored)."""
    data_dir = Path(data_dir)
    truth_all = load_ground_truth(data_dir) if ground_truth is None else ground_truth
    if name not in truth_all:
        raise WorkshopDataError(f"{data_dir / GROUND_TRUTH_FILE}: no tool {name!r}")
    truth = truth_all[name]
    path = data_dir / f"{name}.csv"
    columns = _read_csv(path)
    try:
        stack = {key: np.column_stack([columns[c] for c in cols])
                 for key, cols in _COLUMNS.items()}
        rotation = np.column_stack([columns[c] for c in _ROTATION_COLUMNS]).reshape(-1, 3, 3)
        time = columns["t"]
    except KeyError as exc:
        raise WorkshopDataError(f"{path}: missing column {exc}") from None
    return ToolData(
        name=name,
        directory=data_dir,
        time=time,
        rotation=rotation,
        pi_true=np.asarray(truth["pi_sensor"], dtype=float),
        rotation_sensor_mesh=np.asarray(truth["R_sensor_mesh"], dtype=float),
        position_sensor_mesh=np.asarray(truth["p_sensor_mesh"], dtype=float),
        extents=np.asarray(truth["extents_sensor"], dtype=float),
        **stack,
    )


def load_tools(data_dir: Path, names: Sequence[str] | None = None) -> list[ToolData]:
    """Load several tools (all of them by default)."""
    truth = load_ground_truth(data_dir)
    return [load_tool(data_dir, n, truth) for n in (sorted(truth) if names is None else names)]


# --------------------------------------------------------------------------------------------
# Point cloud (for shape priors)
# --------------------------------------------------------------------------------------------


def read_ply(path: Path) -> dict[str, NDArray[np.float64]]:
    """Columns of an ASCII PLY vertex list, by property name (``x y z ... volume segment``).

    Files are parsed once per process (methods call this for every seed); callers get copies.
    """
    return {name: values.copy() for name, values in _read_ply_cached(str(path)).items()}


@cache
def _read_ply_cached(path_text: str) -> dict[str, NDArray[np.float64]]:
    path = Path(path_text)
    if not path.is_file():
        raise WorkshopDataError(f"{path}: no such file")
    names: list[str] = []
    count = None
    with path.open() as f:
        if f.readline().strip() != "ply":
            raise WorkshopDataError(f"{path}: not a PLY file")
        header_lines = 1
        for line in f:
            header_lines += 1
            words = line.split()
            if not words:
                continue
            if words[0] == "format" and words[1] != "ascii":
                raise WorkshopDataError(f"{path}: only ASCII PLY is supported, got {words[1]}")
            if words[:2] == ["element", "vertex"]:
                count = int(words[2])
            elif words[0] == "property" and count is not None:
                names.append(words[-1])
            elif words[0] == "end_header":
                break
    values = np.loadtxt(path, skiprows=header_lines, max_rows=count, ndmin=2)
    if count is None or values.shape != (count, len(names)):
        raise WorkshopDataError(f"{path}: expected {count} vertices with {len(names)} properties")
    return {name: values[:, i] for i, name in enumerate(names)}


def load_point_cloud_sensor(tool: ToolData) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The tool's point cloud in the **sensor frame**: points (N, 3) in m, volumes (N,) in m^3.

    Each point is the centroid of a tetrahedron of the tool's volume mesh and ``volume`` is
    that tetrahedron's volume, so ``sum(volumes)`` is the tool's volume and a uniform-density
    prior is ``rho * volumes``. Points are mapped from the mesh frame with
    ``p_S = R_sensor_mesh p_M + p_sensor_mesh``. (The part segmentation is in
    ``read_ply(tool.ply_path)["segmentation"]``.)
    """
    columns = read_ply(tool.ply_path)
    points_mesh = np.column_stack((columns["x"], columns["y"], columns["z"]))
    points = points_mesh @ tool.rotation_sensor_mesh.T + tool.position_sensor_mesh
    return points, columns["volume"]


# --------------------------------------------------------------------------------------------
# Checks and metrics
# --------------------------------------------------------------------------------------------


def zero_noise_residual(tool: ToolData) -> float:
    """``max |Y(v, a_g) pi_true - R^T [F; T]|`` over samples and axes (N and N m).

    With the conventions of the module docstring this is at rounding level (~1e-10) on the
    stored files; anything larger means a convention is wrong.
    """
    twist, proper, wrench = tool.sensor_samples
    predicted = regressor(twist, proper) @ tool.pi_true
    return float(np.max(np.abs(predicted - wrench)))


def mass_error_pct(pi_est: ArrayLike, pi_true: ArrayLike) -> float:
    """``100 |m_est - m| / m`` (the paper's mass error, %)."""
    m_est, m = float(np.asarray(pi_est)[0]), float(np.asarray(pi_true)[0])
    return 100.0 * abs(m_est - m) / m


def com_error_pct(pi_est: ArrayLike, pi_true: ArrayLike, extents: ArrayLike) -> float:
    """Mean over x, y, z of ``100 |c_est,i - c_i| / |a_i|`` with ``a`` the bounding-box extents.

    The paper's CoM error (% of the object's size along each sensor axis). inf when the
    estimated mass is not positive. (The authors' code stores the three per-axis values in an
    integer array, which truncates them; this function does not.)
    """
    est, ref = BodyParameters.from_pi(pi_est), BodyParameters.from_pi(pi_true)
    if est.mass <= 0.0:
        return float("inf")
    return float(np.mean(100.0 * np.abs(est.com - ref.com) / np.abs(np.asarray(extents))))


def box_inertia_scale(mass: float, extents: ArrayLike) -> NDArray[np.float64]:
    """``(m/12)(delta_ij sum a^2 - a_i a_j)`` as a 3x3 matrix: the paper's per-entry scale.

    The diagonal is the inertia of a uniform box of the object's extents about its centre; the
    off-diagonal entries are ``-m |a_i a_j| / 12`` (errors are taken relative to their size).
    """
    a = np.abs(np.asarray(extents, dtype=float))
    return (mass / 12.0) * (np.sum(a**2) * np.eye(3) - np.outer(a, a))


def inertia_error_pct(
    pi_est: ArrayLike, pi_true: ArrayLike, extents: ArrayLike, about: str = "com"
) -> float:
    """Mean over the 6 entries of ``100 |I_est,ij - I_ij| / |(m/12)(delta_ij sum a^2 - a_i a_j)|``.

    ``m`` is the **true** mass and ``a`` the extents. ``about="com"`` compares the inertias
    about each estimate's own CoM (the README's definition); ``about="origin"`` compares them
    about the sensor origin, which is what the authors' evaluation code actually does.
    inf when ``about="com"`` and the estimated mass is not positive.
    """
    est, ref = BodyParameters.from_pi(pi_est), BodyParameters.from_pi(pi_true)
    if about == "com":
        if est.mass <= 0.0:
            return float("inf")
        i_est, i_ref = est.inertia_com, ref.inertia_com
    elif about == "origin":
        i_est, i_ref = est.inertia_origin, ref.inertia_origin
    else:
        raise ValueError(f"about must be 'com' or 'origin', got {about!r}")
    scale = box_inertia_scale(ref.mass, extents)
    rows, cols = np.triu_indices(3)
    return float(np.mean(100.0 * np.abs(i_est - i_ref)[rows, cols] / np.abs(scale[rows, cols])))


METRIC_NAMES = ("consistent", "mass", "com", "inertia")


def tool_metrics(
    pi_est: ArrayLike, tool: ToolData, inertia_about: str = "com"
) -> dict[str, float]:
    """The paper's four metrics of one estimate: ``consistent`` (0/1), ``mass``, ``com``,
    ``inertia`` (all %). A non-finite estimate (failed method) gives NaN errors, 0 consistent."""
    pi_est = np.asarray(pi_est, dtype=float)
    if not np.all(np.isfinite(pi_est)):
        return {"consistent": 0.0, "mass": np.nan, "com": np.nan, "inertia": np.nan}
    return {
        "consistent": float(is_physically_consistent(pi_est)),
        "mass": mass_error_pct(pi_est, tool.pi_true),
        "com": com_error_pct(pi_est, tool.pi_true, tool.extents),
        "inertia": inertia_error_pct(pi_est, tool.pi_true, tool.extents, inertia_about),
    }
