"""Go-style durations (``5s``, ``500ms``, ``1m30s``) as the local cluster's annotations spell them."""

from __future__ import annotations

import durationpy


class DurationError(ValueError):
    """A string that is not a non-negative Go duration."""


def parse_duration(value: str | int | float) -> float:
    """Seconds in ``value``: a Go duration string, or a bare number of seconds."""
    if isinstance(value, bool):
        raise DurationError(f"invalid duration {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            try:
                seconds = durationpy.from_str(text).total_seconds()
            except (durationpy.DurationError, ValueError) as exc:
                raise DurationError(f"invalid duration {value!r}: use e.g. 5s, 500ms or 1m30s") from exc
    if seconds < 0:
        raise DurationError(f"invalid duration {value!r}: must not be negative")
    return seconds
