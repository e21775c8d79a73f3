"""Events expire, as kube-apiserver's ``--event-ttl`` makes them (one hour by default).

A real API server stores each Event with an etcd lease of the TTL, renewed on every write of the
Event; when it lapses the Event is gone (watchers see it DELETED). Without that, a long-running
local cluster keeps every Event it was ever sent: kadmit writes about 2.6 per Workload in Kueue's
baseline scalability test, well over 100,000 in one run of its large-scale one. This keeps the
last write time of each Event (core ``v1`` and ``events.k8s.io/v1``) in write order and deletes
the ones not written for ``ttl`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable

from kadmit.localcluster.store import Event, Key, Store

EVENT_KEYS: frozenset[Key] = frozenset({("", "events"), ("events.k8s.io", "events")})
DEFAULT_TTL = 3600.0
SWEEP_INTERVAL = 10.0

_EventKey = tuple[Key, str | None, str]


class EventExpiry:
    """Deletes Events not written for ``ttl`` seconds, looking every ``min(ttl, 10 s)``."""

    def __init__(self, store: Store, ttl: float = DEFAULT_TTL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if ttl <= 0:
            raise ValueError(f"the event TTL must be positive, got {ttl}")
        self.store = store
        self.ttl = ttl
        self.clock = clock
        self._written: OrderedDict[_EventKey, float] = OrderedDict()
        self._task: asyncio.Task[None] | None = None
        store.add_listener(self._on_change)

    def _on_change(self, event: Event) -> None:
        if event.key not in EVENT_KEYS:
            return
        meta = event.object["metadata"]
        key = (event.key, meta.get("namespace"), meta["name"])
        if event.type == "DELETED":
            self._written.pop(key, None)
            return
        self._written[key] = self.clock()
        self._written.move_to_end(key)

    def expire(self) -> int:
        """Delete the Events whose time is up now; how many."""
        deadline = self.clock() - self.ttl
        expired = 0
        while self._written:
            key, written = next(iter(self._written.items()))
            if written > deadline:
                break
            del self._written[key]
            (group, plural), namespace, name = key
            if self.store.get(group, plural, namespace, name) is not None:
                self.store.remove(group, plural, namespace, name)
                expired += 1
        return expired

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="event-ttl")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(min(self.ttl, SWEEP_INTERVAL))
            self.expire()
