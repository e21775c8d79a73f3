"""Time as Kubernetes writes it: RFC 3339 in UTC, to the second (``metav1.Time``) or to the
microsecond (``metav1.MicroTime``). The server stamps objects with it, the simulated controllers
write conditions with it, and tables and quotas read it back.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

_SECONDS = "%Y-%m-%dT%H:%M:%SZ"
_MICROSECONDS = "%Y-%m-%dT%H:%M:%S.%fZ"

_last_stamp: tuple[int, str] = (0, "")


def format_time(moment: datetime, *, micro: bool = False) -> str:
    """``moment`` in UTC, as ``2024-05-01T12:00:00Z`` (or with six decimals when ``micro``)."""
    return moment.astimezone(UTC).strftime(_MICROSECONDS if micro else _SECONDS)


def now() -> str:
    """The current time to the second, cached per second: every write stamps objects with it."""
    global _last_stamp
    second = int(time.time())
    if _last_stamp[0] != second:
        _last_stamp = (second, format_time(datetime.fromtimestamp(second, UTC)))
    return _last_stamp[1]


def parse_time(text: str) -> datetime:
    """A timestamp as written by :func:`format_time` (or any RFC 3339 one); ValueError otherwise.

    A timestamp without a zone is taken to be UTC, as Kubernetes' are.
    """
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
