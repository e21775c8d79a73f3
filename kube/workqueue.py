"""A de-duplicating, rate-limited work queue of keys, as client-go's workqueue (controller-runtime's).

Adding a key that is already waiting does nothing; adding a key that is being processed marks it
dirty, and it is queued again when its processing ends. So any number of events about one object
cost at most one reconcile in flight and one waiting, and the latest state wins. Delayed adds
(timers) keep only the earliest deadline per key.

Failures are retried through :meth:`WorkQueue.add_rate_limited`: the delay doubles per key from
``base_delay`` up to ``max_delay`` until :meth:`WorkQueue.forget` (after a success) resets it,
client-go's ``ItemExponentialFailureRateLimiter``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

BASE_DELAY = 0.5
MAX_DELAY = 60.0


class ShutDown(Exception):
    """Raised by :meth:`WorkQueue.get` once the queue is shut down."""


class WorkQueue(Generic[K]):
    def __init__(self, *, base_delay: float = BASE_DELAY, max_delay: float = MAX_DELAY) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._waiting: set[K] = set()
        self._processing: set[K] = set()
        self._dirty: set[K] = set()
        # Each key's timer and its due time (loop time): uvloop hands back a plain Handle, which has
        # no when(), for a delay under half a millisecond.
        self._timers: dict[K, tuple[float, asyncio.Handle]] = {}
        self._failures: dict[K, int] = {}
        self._shut = False

    def add(self, key: K) -> None:
        if self._shut or key in self._waiting:
            return
        if key in self._processing:
            self._dirty.add(key)
            return
        self._waiting.add(key)
        self._queue.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` after ``delay`` seconds, unless an earlier timer for it is already set."""
        if self._shut:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        existing = self._timers.get(key)
        if existing is not None:
            due, timer = existing
            if not timer.cancelled() and due <= when:
                return
            timer.cancel()
        self._timers[key] = (when, loop.call_at(when, self._fire, key))

    def add_rate_limited(self, key: K, at_least: float = 0.0) -> float:
        """Add ``key`` again after its next backoff (or ``at_least``, a server's Retry-After); returns it."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = max(min(self.base_delay * 2.0**failures, self.max_delay), at_least)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """The key succeeded: its next failure starts the backoff afresh."""
        self._failures.pop(key, None)

    def requeues(self, key: K) -> int:
        """How many times the key was added rate-limited since it was last forgotten."""
        return self._failures.get(key, 0)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    async def get(self) -> K:
        """The next key; the caller must call :meth:`done` with it when finished."""
        if self._shut:
            raise ShutDown
        key = await self._queue.get()
        if self._shut:
            raise ShutDown
        self._waiting.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._dirty.discard(key)
            self.add(key)

    def __len__(self) -> int:
        return self._queue.qsize()

    @property
    def idle(self) -> bool:
        return self._queue.empty() and not self._processing

    def shutdown(self) -> None:
        """Stop handing out keys; workers blocked in :meth:`get` are cancelled by their owner."""
        self._shut = True
        for _, timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
