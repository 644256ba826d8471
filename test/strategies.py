"""Hypothesis strategies shared by the maths tests."""

from __future__ import annotations

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation


def vectors(n, lo=-1.0, hi=1.0):
    """n-vectors with entries in [lo, hi]."""
    element = st.floats(lo, hi, allow_nan=False, allow_infinity=False)
    return st.lists(element, min_size=n, max_size=n).map(np.array)


@st.composite
def rotations(draw):
    """A rotation matrix from a (normalised) random quaternion."""
    q = draw(vectors(4))
    assume(np.linalg.norm(q) > 0.1)
    return Rotation.from_quat(q).as_matrix()


@st.composite
def physical_bodies(draw):
    """(mass, com, inertia about the CoM) of a physically consistent body.

    The inertia about the CoM is ``R diag(Ly + Lz, Lx + Lz, Lx + Ly) R^T`` with positive second
    moments ``L`` of the density about the CoM, so its principal moments satisfy the triangle
    inequalities strictly.
    """
    mass = draw(st.floats(0.05, 20.0))
    com = draw(vectors(3, -0.3, 0.3))
    second_moments = mass * draw(vectors(3, 1e-3, 0.05))
    lx, ly, lz = second_moments
    principal = np.array([ly + lz, lx + lz, lx + ly])
    rot = draw(rotations())
    return mass, com, rot @ np.diag(principal) @ rot.T
