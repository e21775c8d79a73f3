"""Kubernetes Events about the objects kadmit acts on (``kubectl describe`` shows them).

Recording is best effort, as client-go's recorder is: a failed write is logged at debug level
and never fails the caller, and :meth:`EventRecorder.emit` never makes a loop wait.

Events are paced as Kueue's are at most: a token bucket of Kueue's ``clientConnection`` defaults
(300 a second, bursts of 500). Kueue's Events share that budget with all its other requests, so
they never get more. An admission storm makes several Events per admission, each a request to the API
server much like a status write (in Kueue's baseline scalability test, unpaced, they were a
third of the local API server's CPU and a quarter of kadmit's); past the budget they wait, and
past MAX_QUEUED waiting they are dropped, as client-go drops what does not fit its queue.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable

from kadmit.kube.client import Client
from kadmit.kube.errors import ApiError
from kadmit.kube.objects import Obj
from kadmit.kube.ratelimit import KUEUE_BURST, KUEUE_QPS, Pace, TokenBucket
from kadmit.kube.resources import EVENTS
from kadmit.kube.timestamps import format_time

logger = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
MAX_MESSAGE = 1024
MAX_QUEUED = 1000
"""Events waiting to be written at most; more are dropped, as client-go's broadcaster drops what
does not fit its queue of 1,000 (an event is never worth holding memory or the API server for)."""


class EventRecorder:
    """Writes core/v1 Events as ``component``: at most ``concurrency`` writes at once, each when
    ``pace`` lets it go (by default Kueue's client budget, which its events share: ``KUEUE_QPS``
    a second, bursts of ``KUEUE_BURST``, from :mod:`kadmit.kube.ratelimit`)."""

    def __init__(self, client: Client, component: str, *, concurrency: int = 4,
                 clock: Callable[[], float] = time.time, pace: Pace | None = None) -> None:
        self.client = client
        self.component = component
        self.clock = clock
        self.pace: Pace = pace if pace is not None else TokenBucket(KUEUE_QPS, KUEUE_BURST)
        self._limit = asyncio.Semaphore(concurrency)
        self._pending: set[asyncio.Task[None]] = set()
        self.dropped = 0

    def emit(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        """Record in the background: a loop never waits for its events to be written."""
        if len(self._pending) >= MAX_QUEUED:
            if self.dropped % 10_000 == 0:
                logger.warning("events: %d wait to be written, so %s and more are dropped (%d so far)",
                               len(self._pending), reason, self.dropped + 1)
            self.dropped += 1
            return
        task = asyncio.create_task(self._bounded(obj, event_type, reason, message))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _bounded(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        async with self._limit:
            await self.pace.wait()
            await self.record(obj, event_type, reason, message)

    async def drain(self) -> None:
        """Wait for the events still being written (on shutdown)."""
        if self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def record(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        """Write one Event now (the caller waits for it; it still never raises an API failure)."""
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        now = format_time(self.clock())
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.get('name', 'object')}.{secrets.token_hex(8)}",
                         "namespace": namespace},
            "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                               "name": meta.get("name"), "namespace": meta.get("namespace"),
                               "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
            "reason": reason,
            "message": message[:MAX_MESSAGE],
            "type": event_type,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.client.create(EVENTS, event)
        except ApiError as exc:
            logger.debug("event %s for %s/%s not recorded: %s", reason, namespace, meta.get("name"), exc)
