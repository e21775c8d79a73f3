"""The timestamps kadmit's I/O layer writes itself: a Lease's renewals and an Event's times.

kadmit keeps time as POSIX seconds (float) everywhere; this is where the I/O layer turns it into
the API's two wire formats. (The Workload vocabulary, above the engine, has the same convention
for the times in Kueue's objects; ``kube`` may import nothing of kadmit's, so it keeps these two.)
"""

from __future__ import annotations

import functools
import math
from datetime import UTC, datetime


def format_time(seconds: float) -> str:
    """``metav1.Time``: RFC 3339 in UTC, to the second."""
    return _format_second(math.floor(seconds))


@functools.lru_cache(maxsize=64)
def _format_second(whole: int) -> str:
    # Cached: every Event written within one second carries that second.
    return datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(seconds: float) -> str:
    """``metav1.MicroTime``: RFC 3339 in UTC, to the microsecond (Leases, ``eventTime``)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
