"""ClusterQueue and LocalQueue status: counts, flavorsReservation, flavorsUsage and ``Active``.

Any change to a Workload or a queue schedules one recount a moment later (changes arriving in a
burst are folded into one), and only queues whose status actually differs are written.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from controller import queue_stats
from controller import workload_status as ws
from controller.informer import Informer
from controller.kube import CLUSTER_QUEUES, LOCAL_QUEUES, ApiError, Kube
from controller.writes import update_status
from engine import Engine

logger = logging.getLogger(__name__)

Obj = dict[str, Any]


def _counts(status: Obj) -> tuple[Any, ...]:
    return (status.get("pendingWorkloads"), status.get("reservingWorkloads"), status.get("admittedWorkloads"),
            status.get("flavorsReservation"), status.get("flavorsUsage"))


def cluster_queue_status(status: Obj, cq: Obj, stats: queue_stats.QueueStats, active: tuple[bool, str, str],
                         now: float) -> bool:
    before = _counts(status)
    status["pendingWorkloads"] = stats.pending
    status["reservingWorkloads"] = stats.reserving
    status["admittedWorkloads"] = stats.admitted
    status["flavorsReservation"] = queue_stats.flavor_usage(cq, stats.reservation, borrowed=True)
    status["flavorsUsage"] = queue_stats.flavor_usage(cq, stats.usage, borrowed=True)
    after = _counts(status)
    is_active, reason, message = active
    changed = ws.set_condition(status, "Active", "True" if is_active else "False", reason, message, now)
    return changed or before != after


def local_queue_status(status: Obj, lq: Obj, stats: queue_stats.QueueStats, cq: Obj | None,
                       cq_active: bool, now: float) -> bool:
    before = _counts(status)
    status["pendingWorkloads"] = stats.pending
    status["reservingWorkloads"] = stats.reserving
    status["admittedWorkloads"] = stats.admitted
    status["flavorsReservation"] = queue_stats.flavor_usage(cq, stats.reservation, borrowed=False)
    status["flavorsUsage"] = queue_stats.flavor_usage(cq, stats.usage, borrowed=False)
    after = _counts(status)
    spec = lq.get("spec") or {}
    if spec.get("stopPolicy", "None") not in ("None", "", None):
        active = ("False", "Stopped", "LocalQueue is stopped")
    elif cq is None:
        active = ("False", "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
    elif not cq_active:
        active = ("False", "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")
    else:
        active = ("True", "Ready", "Can submit new workloads to localQueue")
    changed = ws.set_condition(status, "Active", *active, now)
    return changed or before != after


class QueueStatusReconciler:
    def __init__(self, kube: Kube, engine: Engine, workloads: Informer, cluster_queues: Informer,
                 local_queues: Informer, *, delay: float = 0.2,
                 clock: Callable[[], float] = time.time) -> None:
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
        lqs = {(o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
               for o in self.local_queues.list()}
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
        stats = self.recompute()
        now = self.clock()
        active_of: dict[str, bool] = {}
        for cq in self.cluster_queues.list():
            name = cq["metadata"]["name"]
            active = self.engine.cluster_queue_active(name)
            active_of[name] = active[0]
            cq_stats = stats.cluster_queues.get(name, queue_stats.QueueStats())
            await self._write(CLUSTER_QUEUES, cq, functools.partial(
                cluster_queue_status, cq=cq, stats=cq_stats, active=active, now=now))
        for lq in self.local_queues.list():
            meta = lq["metadata"]
            cq_name = str((lq.get("spec") or {}).get("clusterQueue", ""))
            cq_obj = self.cluster_queues.get(None, cq_name)
            lq_stats = stats.local_queues.get((meta.get("namespace", ""), meta["name"]),
                                              queue_stats.QueueStats())
            await self._write(LOCAL_QUEUES, lq, functools.partial(
                local_queue_status, lq=lq, stats=lq_stats, cq=cq_obj, cq_active=active_of.get(cq_name, False),
                now=now))

    async def _write(self, resource: Any, obj: Obj, mutate: Callable[[Obj], bool]) -> None:
        try:
            await update_status(self.kube, resource, obj, mutate)
        except ApiError as exc:
            if not exc.not_found:
                raise
