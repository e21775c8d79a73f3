"""A de-duplicating work queue of object keys, as client-go's controllers use.

A key added many times before a worker takes it is reconciled once; a key added while it
is being reconciled is reconciled again afterwards, never by two workers at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(self) -> None:
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._queued: set[K] = set()
        self._active: set[K] = set()
        self._again: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}

    def add(self, key: K) -> None:
        if key in self._active:
            self._again.add(key)
            return
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` after ``delay`` seconds; an earlier pending timer for it wins."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        existing = self._timers.get(key)
        if existing is not None and existing.when() <= loop.time() + delay:
            return
        if existing is not None:
            existing.cancel()
        self._timers[key] = loop.call_later(delay, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    async def run_worker(self, reconcile: Callable[[K], Awaitable[None]]) -> None:
        """Take keys forever; ``reconcile`` handles its own errors (it may re-add the key)."""
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            self._active.add(key)
            try:
                await reconcile(key)
            finally:
                self._active.discard(key)
                if key in self._again:
                    self._again.discard(key)
                    self.add(key)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def __len__(self) -> int:
        return len(self._queued)
