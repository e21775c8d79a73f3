"""Requeue backoff times, computed from the ``now`` the caller passes (kueue-contract §5.7, §6).

Kueue adds a jitter of at most 0.01% to these; the engine stays deterministic and does not.
"""

from __future__ import annotations

DEFAULT_BASE_SECONDS = 60
DEFAULT_MAX_SECONDS = 3600


def backoff_seconds(count: int, base: int = DEFAULT_BASE_SECONDS, maximum: int = DEFAULT_MAX_SECONDS) -> int:
    """``min(base * 2^(count-1), max)`` for the ``count``-th requeue (count ≥ 1)."""
    if count < 1:
        raise ValueError(f"requeue count must be at least 1, not {count}")
    if base <= 0:
        return 0
    exponent = count - 1
    if exponent >= maximum.bit_length() + 1:  # 2**exponent alone already exceeds the cap
        return maximum
    return min(base << exponent, maximum)


def pods_ready_requeue_at(
    now: float, count: int, base: int = DEFAULT_BASE_SECONDS, maximum: int = DEFAULT_MAX_SECONDS
) -> float:
    """``requeueState.requeueAt`` after the ``count``-th PodsReady timeout (``count`` already
    incremented, as Kueue writes both in one patch)."""
    return now + backoff_seconds(count, base, maximum)


def check_retry_requeue_at(previous: float | None, retries: list[tuple[float, int | None]]) -> float | None:
    """``requeueAt`` for Retry checks: the latest ``lastTransitionTime + requeueAfterSeconds``,
    never earlier than ``previous``; ``None`` (requeue at once) when no check asks to wait."""
    waits = [when + after for when, after in retries if after is not None]
    if not waits:
        return previous
    latest = max(waits)
    return latest if previous is None else max(previous, latest)
