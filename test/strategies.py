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
