"""Client-side rate limiting, as Kueue's ``clientConnection`` sets it: client-go's token bucket.

Kueue gives its manager one ``flowcontrol.NewTokenBucketRateLimiter(qps, burst)`` that every
request of every client made from its rest config shares (writes, Events, lists, the start of a
watch). That limiter is ``golang.org/x/time/rate``: tokens refill at ``qps`` a second up to
``burst``; each request takes one, and one that finds none waits for its own, in the order the
requests came. :class:`TokenBucket` keeps the same account: a request reserves the next token
at once (the count may go below zero) and sleeps until that token is due, so waiting requests
are served first come, first served without a queue.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol

KUEUE_QPS = 300.0
"""Kueue's ``clientConnection.qps`` default (``apis/config/v1beta2/defaults.go``)."""
KUEUE_BURST = 500
"""Kueue's ``clientConnection.burst`` default."""


class Pace(Protocol):
    """What holds a request back until it may go: a :class:`TokenBucket`, or a test's gate."""

    async def wait(self) -> None: ...


class TokenBucket:
    """At most ``burst`` requests at once, then ``qps`` a second, in arrival order."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if not qps > 0:
            raise ValueError(f"qps must be above zero, got {qps!r}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst!r}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock()

    def reserve(self) -> float:
        """Take the next token: the seconds until it is due (0 when the bucket had one)."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def wait(self) -> None:
        """Return when this request may be sent."""
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)
