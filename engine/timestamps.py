"""The one time convention: POSIX seconds (a float) inside kadmit, RFC 3339 in UTC on the wire.

``metav1.Time`` (conditions' ``lastTransitionTime``, ``creationTimestamp``, ``requeueAt``) has
whole seconds; ``metav1.MicroTime`` (Leases, Events) has exactly six fractional digits. A float
second carries about a microsecond near the present, so both formatters first round to the
microsecond, as ``datetime.fromtimestamp`` does, and ``format_time`` then drops the fraction
the way Go's ``time.Format`` truncates it.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta, timezone
from functools import lru_cache

_MICRO = 1_000_000
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:(Z)|([+-])(\d{2}):(\d{2}))"
)


def _split_micros(seconds: float) -> tuple[int, int]:
    return divmod(round(seconds * _MICRO), _MICRO)


@lru_cache(maxsize=256)
def format_time(seconds: float) -> str:
    """``metav1.Time`` on the wire: ``2026-01-02T03:04:05Z``. Cached: one cycle stamps every
    condition it writes with the same ``now``."""
    whole, _ = _split_micros(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(whole))


def format_micro_time(seconds: float) -> str:
    """``metav1.MicroTime`` on the wire: ``2026-01-02T03:04:05.123456Z``."""
    whole, micros = _split_micros(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{micros:06d}Z"


def parse_time(value: str) -> float:
    """POSIX seconds of an RFC 3339 time as the API server writes it: ``T`` between date and time,
    optional fractional seconds (up to nanoseconds), then ``Z`` or a numeric offset.

    Strict, unlike ``datetime.fromisoformat``, which would also take dates alone, week dates
    and spaces: anything else raises ``ValueError`` naming the value.
    """
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not an RFC 3339 time")
    return _parse_time(value)


@lru_cache(maxsize=4096)
def _parse_time(value: str) -> float:
    """:func:`parse_time` of a string, kept: whole-second times repeat across the conditions of
    many Workloads (every Workload event and status webhook call reads all of them), and the
    regular expression and ``datetime`` cost about ten times a look-up. A failure is not kept."""
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise ValueError(f"{value!r} is not an RFC 3339 time")
    year, month, day, hour, minute, second, fraction, zulu, sign, off_hours, off_minutes = match.groups()
    if zulu:
        zone = UTC
    else:
        if int(off_hours) > 23 or int(off_minutes) > 59:
            raise ValueError(f"{value!r} is not an RFC 3339 time: offset out of range")
        offset = timedelta(hours=int(off_hours), minutes=int(off_minutes))
        zone = timezone(-offset if sign == "-" else offset)
    try:
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=zone)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not an RFC 3339 time: {exc}") from None
    seconds = moment.timestamp()
    return seconds + float(f"0.{fraction}") if fraction else seconds
