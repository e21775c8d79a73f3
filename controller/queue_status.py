"""ClusterQueue and LocalQueue status: counts, flavorsReservation, flavorsUsage and ``Active``.

The numbers are the engine's (as Kueue's come from its scheduler cache): what it charges, with
the reservations it has assumed. Any change to a Workload or a queue schedules one update a
moment later (changes arriving in a burst are folded into one), and only queues whose status
actually differs are written. :meth:`QueueStatusReconciler.recompute` counts the same from the
Workloads as the API holds them, with pending split into active and inadmissible, for metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from kadmit import workload as ws
from kadmit.controller import queue_stats
from kadmit.engine import Engine
from kadmit.kube import ApiError, Client, Obj
from kadmit.kube.informer import Informer
from kadmit.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES
from kadmit.kube.writes import update_status

logger = logging.getLogger(__name__)



def apply_queue_status(
    status: Obj, fields: Obj, active: tuple[bool, str, str], now: float, weighted_share: int | None = None
) -> bool:
    """Write the counters and flavor usage the engine computed, and the ``Active`` condition."""
    changed = False
    for key, value in fields.items():
        if status.get(key) != value:
            status[key] = value
            changed = True
    if (
        weighted_share is not None
        and (status.get("fairSharing") or {}).get("weightedShare") != weighted_share
    ):
        status["fairSharing"] = {**(status.get("fairSharing") or {}), "weightedShare": weighted_share}
        changed = True
    is_active, reason, message = active
    return (
        ws.set_condition(status, "Active", "True" if is_active else "False", reason, message, now) or changed
    )


class QueueStatusReconciler:
    def __init__(
        self,
        kube: Client,
        engine: Engine,
        workloads: Informer,
        cluster_queues: Informer,
        local_queues: Informer,
        *,
        delay: float = 0.2,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.kube = kube
        self.engine = engine
        self.workloads = workloads
        self.cluster_queues = cluster_queues
        self.local_queues = local_queues
        self.delay = delay
        self.clock = clock
        self.stats = queue_stats.Stats()
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        for informer in (workloads, cluster_queues, local_queues):
            informer.add_handler(self._on_change)

    def _on_change(self, event: str, obj: Obj, old: Obj | None) -> None:
        self._dirty.set()

    def recompute(self) -> queue_stats.Stats:
        lqs = {
            (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in self.local_queues.list()
        }
        self.stats = queue_stats.compute(self.workloads.list(), lqs)
        return self.stats

    async def start(self) -> None:
        self._dirty.set()
        self._task = asyncio.create_task(self._run(), name="queue-status")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await self._dirty.wait()
            await asyncio.sleep(self.delay)  # fold a burst of events into one recount
            self._dirty.clear()
            try:
                await self.sync()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("queue status update failed; retrying")
                self._dirty.set()

    async def sync(self) -> None:
        now = self.clock()
        engine = self.engine
        for cq in self.cluster_queues.list():
            name = cq["metadata"]["name"]
            share = engine.weighted_share(name) if engine.fair_sharing else None
            await self._write(
                CLUSTER_QUEUES,
                cq,
                functools.partial(
                    apply_queue_status,
                    fields=engine.cluster_queue_status(name),
                    active=engine.cluster_queue_active(name),
                    now=now,
                    weighted_share=share,
                ),
            )
        for lq in self.local_queues.list():
            namespace, name = lq["metadata"].get("namespace", ""), lq["metadata"]["name"]
            await self._write(
                LOCAL_QUEUES,
                lq,
                functools.partial(
                    apply_queue_status,
                    fields=engine.local_queue_status(namespace, name),
                    active=engine.local_queue_active(namespace, name),
                    now=now,
                ),
            )

    async def _write(self, resource: Any, obj: Obj, mutate: Callable[[Obj], bool]) -> None:
        try:
            await update_status(self.kube, resource, obj, mutate)
        except ApiError as exc:
            if not exc.not_found:
                raise
