"""Saved payload calibrations: write an estimate to YAML (and a URDF ``<inertial>``), read it back.

The YAML has the layout of ``inertial-id replay --output`` (DESIGN.md's replay contract): an
``estimate`` section with ``frame``, ``mass`` (kg), ``com`` (m), ``inertia_com`` (kg m^2,
``[xx, xy, xz, yy, yz, zz]`` about the CoM in the sensor axes), ``pi`` (10, about the sensor
origin), ``std``, ``wrench_offset`` (N, N m) and the rest. A calibration adds ``covariance``
(16 x 16 over ``[pi; offset]``, SI units), the verdicts and the time it was saved, so that a
file read back gives the same standard deviations. A replay output (no ``covariance``) reads
back with the diagonal covariance of its ``std`` and ``wrench_offset_std``.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray

from inertial_id.core.errors import InertialIdError
from inertial_id.core.estimate import N_PI, N_UNKNOWNS, Estimate
from inertial_id.core.parameters import BodyParameters, vector_from_symmetric

SAVED_METHOD = "saved"
"""``Estimate.method`` of an estimate read from a file."""


def _floats(values: NDArray[np.float64]) -> list[float]:
    return [float(v) for v in np.ravel(values)]


def estimate_document(estimate: Estimate, frame: str) -> dict[str, Any]:
    """The ``estimate`` section of the replay output and of a calibration (module docstring)."""
    e = estimate
    return {
        "frame": frame,
        "mass": float(e.body.mass),
        "com": _floats(e.body.com),
        "inertia_com": _floats(vector_from_symmetric(e.body.inertia_com)),
        "pi": _floats(e.pi),
        "std": _floats(e.std),
        "com_std": _floats(e.com_std),
        "inertia_com_std": _floats(e.inertia_com_std),
        "covariance_type": e.covariance_type,
        "wrench_offset": _floats(e.offset),
        "wrench_offset_std": _floats(e.offset_std),
        "physically_consistent": bool(e.physically_consistent),
    }


def urdf_inertial(estimate: Estimate) -> str:
    """The estimate as a URDF ``<inertial>`` element for the link of the sensor frame: origin
    at the CoM with the sensor's axes (``rpy 0 0 0``), inertia about the CoM (kg m^2)."""
    body = estimate.body
    x, y, z = body.com
    ixx, ixy, ixz, iyy, iyz, izz = vector_from_symmetric(body.inertia_com)
    return (
        "<inertial>\n"
        f'  <origin xyz="{x:.6g} {y:.6g} {z:.6g}" rpy="0 0 0"/>\n'
        f'  <mass value="{body.mass:.6g}"/>\n'
        f'  <inertia ixx="{ixx:.6g}" ixy="{ixy:.6g}" ixz="{ixz:.6g}" iyy="{iyy:.6g}" '
        f'iyz="{iyz:.6g}" izz="{izz:.6g}"/>\n'
        "</inertial>\n"
    )


def snippet_path(path: Path) -> Path:
    """Where :func:`save` writes the URDF snippet: beside the YAML, ``<stem>.inertial.xml``."""
    return path.with_name(f"{path.stem}.inertial.xml")


def save(path: Path, estimate: Estimate, frame: str, converged: Mapping[str, bool],
         extra: Mapping[str, Any] | None = None) -> Path:
    """Write the calibration YAML to ``path`` and the URDF snippet beside it (creating the
    directory); returns the snippet's path. ``extra`` sections (e.g. the applier's
    ``applied``) are added to the YAML. :class:`InertialIdError` when it cannot."""
    doc = {
        "estimate": estimate_document(estimate, frame),
        "covariance": [_floats(row) for row in estimate.covariance],
        "converged": {k: bool(v) for k, v in converged.items()},
        "samples": float(estimate.samples),
        "saved_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **(extra or {}),
    }
    snippet = snippet_path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(doc, sort_keys=False, default_flow_style=None))
        snippet.write_text(urdf_inertial(estimate))
    except OSError as exc:
        raise InertialIdError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return snippet


def _vector(section: Mapping[str, Any], key: str, size: int, path: Path) -> NDArray[np.float64]:
    try:
        out = np.asarray(section[key], dtype=float).reshape(-1)
    except (KeyError, TypeError, ValueError) as exc:
        raise InertialIdError(f"{path}: estimate.{key} missing or not numbers") from exc
    if out.size != size or not np.isfinite(out).all():
        raise InertialIdError(f"{path}: estimate.{key} needs {size} finite numbers")
    return out


def _covariance(doc: Mapping[str, Any], section: Mapping[str, Any],
                path: Path) -> NDArray[np.float64]:
    if "covariance" in doc:
        try:
            cov = np.asarray(doc["covariance"], dtype=float)
        except (TypeError, ValueError) as exc:
            raise InertialIdError(f"{path}: covariance is not a matrix of numbers") from exc
        if cov.shape != (N_UNKNOWNS, N_UNKNOWNS) or np.isnan(cov).any():
            raise InertialIdError(f"{path}: covariance must be {N_UNKNOWNS} x {N_UNKNOWNS}")
        return 0.5 * (cov + cov.T)
    std = _vector(section, "std", N_PI, path)
    offset_std = (_vector(section, "wrench_offset_std", 6, path)
                  if "wrench_offset_std" in section else np.full(6, np.inf))
    return np.diag(np.concatenate((std, offset_std)) ** 2)


def load(path: Path) -> tuple[Estimate, str]:
    """The estimate and frame saved in ``path`` (a calibration or a replay output).

    Raises :class:`InertialIdError` naming the file and what is wrong: unreadable, no
    estimate, missing or non-finite numbers, or parameters no rigid body can have.
    """
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InertialIdError(f"cannot read saved payload {path}: {exc}") from exc
    section = doc.get("estimate") if isinstance(doc, Mapping) else None
    if not isinstance(section, Mapping):
        raise InertialIdError(f"{path}: no estimate in it (a calibration or a replay output)")
    body = BodyParameters.from_pi(_vector(section, "pi", N_PI, path))
    estimate = Estimate(body=body, offset=_vector(section, "wrench_offset", 6, path),
                        covariance=_covariance(doc, section, path),
                        samples=float(doc.get("samples", 0.0) or 0.0), condition_number=np.nan,
                        method=SAVED_METHOD,
                        covariance_type=str(section.get("covariance_type", "saved")))
    if not estimate.physically_consistent:
        raise InertialIdError(f"{path}: the saved parameters are not physically consistent "
                              f"(smallest pseudo-inertia eigenvalue {estimate.min_eigenvalue:.3g})")
    return estimate, str(section.get("frame", ""))
