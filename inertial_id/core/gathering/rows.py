"""A growable array of rows: appended at the back, dropped from the front, viewed in place.

The synchronizer's buffers (stamps, joint states, wrenches, per-sample features) are
:class:`Rows`, so a pass over everything buffered costs no list conversion.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


class Rows:
    """Rows appended at the back and dropped from the front of a growable array; oldest first.

    ``view()`` is the live rows without copying, so a pass over the buffer costs no list
    conversion however many samples it holds.
    """

    def __init__(self, row_shape: tuple[int, ...] = (), capacity: int = 256) -> None:
        self._data = np.empty((capacity, *row_shape))
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def view(self) -> NDArray[np.float64]:
        """The buffered rows, oldest first (a view: copy before the buffer changes)."""
        return self._data[: self.size]

    def last(self) -> float:
        """The newest row of a buffer of scalars."""
        return float(self._data[self.size - 1])

    def _reserve(self, extra: int) -> None:
        if self.size + extra > self._data.shape[0]:
            grown = np.empty((max(2 * self._data.shape[0], self.size + extra),
                              *self._data.shape[1:]))
            grown[: self.size] = self._data[: self.size]
            self._data = grown

    def extend(self, rows: NDArray[np.float64]) -> None:
        """Append ``rows`` (k, *row_shape)."""
        k = rows.shape[0]
        self._reserve(k)
        self._data[self.size : self.size + k] = rows
        self.size += k

    def append(self, row: NDArray[np.float64] | float) -> None:
        """Append one row."""
        self._reserve(1)
        self._data[self.size] = row
        self.size += 1

    def drop_front(self, count: int) -> None:
        """Forget the ``count`` oldest rows."""
        count = min(count, self.size)
        if count > 0:
            remaining = self.size - count
            self._data[:remaining] = self._data[count : self.size]
            self.size = remaining

    def clear(self) -> None:
        """Forget every row."""
        self.size = 0
