"""A de-duplicating work queue of object keys, as client-go's controllers use.

A key added many times before a worker takes it is reconciled once; a key added while it
is being reconciled is reconciled again afterwards, never by two workers at once. The
bookkeeping is client-go's: a key is *dirty* from when it is added until a worker takes it,
and a dirty key goes back in line when the worker that held it is done.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
_TIMER_SLACK = 0.001  # the loop may run a timer a hair before its time; that counts as due


class WorkQueue(Generic[K]):
    """The one work queue of the local cluster: the simulated controllers' and the garbage collector's."""

    def __init__(self) -> None:
        self._ready: asyncio.Queue[K] = asyncio.Queue()  # dirty keys no worker holds, in order
        self._dirty: set[K] = set()
        self._active: set[K] = set()
        # Keys to add later: a heap by due time, each key's earliest due time, one timer for the
        # heap's head (client-go's delaying queue keeps the same three).
        self._waiting: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}
        self._order = itertools.count()
        self._timer: asyncio.Handle | None = None  # uvloop's, for under 0.5 ms, has no when()
        self._timer_due = math.inf
        self._drained = asyncio.Event()  # nothing dirty, nothing being worked on
        self._drained.set()

    def add(self, key: K) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        self._drained.clear()
        if key not in self._active:
            self._ready.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` after ``delay`` seconds; an earlier wake-up already set for it wins."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        if self._due.get(key, math.inf) <= due:
            return
        self._due[key] = due
        heapq.heappush(self._waiting, (due, next(self._order), key))
        if self._timer is None or due < self._timer_due:
            self._arm(loop)

    def _arm(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_due = self._waiting[0][0] if self._waiting else math.inf
        self._timer = loop.call_at(self._timer_due, self._release, loop) if self._waiting else None

    def _release(self, loop: asyncio.AbstractEventLoop) -> None:
        """Add every key whose time has come (entries superseded by an earlier one are dropped)."""
        now = loop.time() + _TIMER_SLACK
        while self._waiting and self._waiting[0][0] <= now:
            due, _, key = heapq.heappop(self._waiting)
            if self._due.get(key) == due:
                del self._due[key]
                self.add(key)
        self._timer = None
        self._arm(loop)

    async def run_worker(self, reconcile: Callable[[K], Awaitable[None]]) -> None:
        """Take keys forever; ``reconcile`` handles its own errors (it may re-add the key)."""
        while True:
            key = await self._ready.get()
            self._dirty.discard(key)
            self._active.add(key)
            try:
                await reconcile(key)
            finally:
                self._active.discard(key)
                if key in self._dirty:  # added again meanwhile
                    self._ready.put_nowait(key)
                elif not self._dirty and not self._active:
                    self._drained.set()

    async def drained(self) -> None:
        """Wait until every key added so far has been worked on (keys due later do not count)."""
        await self._drained.wait()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiting.clear()
        self._due.clear()

    def __len__(self) -> int:
        return self._ready.qsize()
