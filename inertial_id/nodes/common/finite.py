"""No NaN or inf leaves the package: the check of a whole ROS message (:func:`all_finite`)
and the publisher's guard (:class:`FiniteGuard`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np


def all_finite(msg: Any) -> bool:
    """Every floating-point field of a ROS message (nested messages and arrays included) is
    finite."""
    for name in msg.get_fields_and_field_types():
        value = getattr(msg, name)
        if isinstance(value, float):
            if not math.isfinite(value):
                return False
        elif hasattr(value, "get_fields_and_field_types"):
            if not all_finite(value):
                return False
        elif isinstance(value, (list, tuple)) and value and not isinstance(value[0], str):
            if hasattr(value[0], "get_fields_and_field_types"):
                if not all(all_finite(item) for item in value):
                    return False
            elif not np.isfinite(np.asarray(value, dtype=float)).all():
                return False
        elif isinstance(value, np.ndarray) or type(value).__name__ == "array":
            array = np.asarray(value)
            if array.dtype.kind == "f" and not np.isfinite(array).all():
                return False
    return True


class FiniteGuard:
    """Publishes a message only when every float in it is finite (:func:`all_finite`): a
    controller must never read a NaN or an inf from this package. ``withheld`` counts the
    others by topic (of those built: :meth:`publish_read` builds none while nobody reads)."""

    def __init__(self) -> None:
        self.withheld: Counter[str] = Counter()

    def publish(self, publisher: Any, msg: Any) -> bool:
        """Publish ``msg`` on ``publisher`` if it is finite; whether it was."""
        if all_finite(msg):
            publisher.publish(msg)
            return True
        self.withheld[publisher.topic_name] += 1
        return False

    def publish_read(self, publisher: Any, build: Callable[[], Any]) -> bool:
        """:meth:`publish` the message ``build()`` makes, built only while ``publisher`` has a
        subscriber (asked every time: about 1 us, where building and checking a message
        takes tens; the publishers this is for are volatile, so a reader that comes later
        misses nothing it could have had); whether it was published."""
        if not publisher.get_subscription_count():
            return False
        return self.publish(publisher, build())
