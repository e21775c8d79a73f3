"""ClusterQueue, LocalQueue and Cohort status, kept current in proportion to what changed.

The numbers are the engine's (as Kueue's come from its scheduler cache): what it charges, with
the reservations it has assumed. An event marks only the queues it concerns: a Workload's
ClusterQueue and LocalQueue, as they were and as they are; a queue whose spec changed, and what
depends on it (a ClusterQueue's LocalQueues, whose ``Active`` follows its own; the members of a
cohort tree, whose cycles and fair shares follow its shape). Each marked queue is a key of its
kind's work queue, looked at ``delay`` seconds later (events meanwhile fold into that one look),
and never sooner than ``interval`` after its last write. Its status is computed from the engine
and, only if it differs, written through a write pipeline by a few workers per kind: a slow or
failing write holds up its own queue and never the others.

The counts behind the metrics come from :class:`~kadmit.controller.queue_stats.IncrementalStats`,
kept from the same Workload and LocalQueue events, so neither a scrape nor a status write walks
all the Workloads.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from collections.abc import Callable

from kadmit import workload as ws
from kadmit.controller.queue_stats import IncrementalStats, Stats, local_queue_key
from kadmit.engine import Engine
from kadmit.kube import ADDED, DELETED, ApiError, Client, Informer, Informers, Obj, Resource, Workers
from kadmit.kube.informer import Key, key_of
from kadmit.kube.pipeline import Change, WritePipeline
from kadmit.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    COHORTS,
    LOCAL_QUEUES,
    RESOURCE_FLAVORS,
    WORKLOADS,
)

logger = logging.getLogger(__name__)

StatusChange = Callable[[Obj], bool]
"""Edits a ``status`` dict in place into what it should be; returns whether it changed anything."""


def apply_queue_status(status: Obj, fields: Obj, active: tuple[bool, str, str], now: float) -> bool:
    """Write the counters and flavor usage the engine computed, and the ``Active`` condition."""
    changed = False
    for key, value in fields.items():
        if status.get(key) != value:
            status[key] = value
            changed = True
    is_active, reason, message = active
    value = "True" if is_active else "False"
    return ws.set_condition(status, "Active", value, reason, message, now) or changed


def apply_weighted_share(status: Obj, weighted_share: int | None) -> bool:
    """``fairSharing.weightedShare`` with Fair Sharing on; no ``fairSharing`` at all without (Kueue)."""
    if weighted_share is None:
        return status.pop("fairSharing", None) is not None
    fair_sharing = status.get("fairSharing") or {}
    if fair_sharing.get("weightedShare") == weighted_share:
        return False
    status["fairSharing"] = {**fair_sharing, "weightedShare": weighted_share}
    return True


def _both(*changes: StatusChange) -> StatusChange:
    def apply(status: Obj) -> bool:
        return any([change(status) for change in changes])  # every change applies: no short circuit

    return apply


def _probe(status: Obj) -> Obj:
    """A copy of ``status`` that a :data:`StatusChange` may edit: the changes replace top-level
    fields and edit conditions in place, so only the conditions need copies of their own."""
    return {**status, "conditions": [dict(c) for c in status.get("conditions") or []]}


def _spec_changed(event: str, new: Obj, old: Obj | None) -> bool:
    """The object appeared, went, or changed more than its status (a write of status alone, ours
    or anyone's, changes nothing the others depend on)."""
    if event == DELETED or old is None:
        return True
    meta, old_meta = new.get("metadata") or {}, old.get("metadata") or {}
    return new.get("spec") != old.get("spec") or meta.get("deletionTimestamp") != old_meta.get(
        "deletionTimestamp"
    )


def _cohort_of(cq: Obj | None) -> str:
    spec = (cq or {}).get("spec") or {}
    return str(spec.get("cohortName") or spec.get("cohort") or "")


def _cluster_queue_of(lq: Obj | None) -> str:
    return str(((lq or {}).get("spec") or {}).get("clusterQueue") or "")


class StatusWriter:
    """One kind's status writes: a work queue of the objects marked, workers that compute each
    one's status, and a write pipeline that writes it when it differs.

    ``desired`` gives, for an object as the cache holds it, the change that brings its status to
    what it should be now. Each worker awaits its own write, so ``workers`` bounds the writes in
    flight, a failed write is retried with the work queue's backoff for that key alone, and a
    slow one delays no other key.
    """

    def __init__(self, name: str, kube: Client, resource: Resource, cache: Informer,
                 desired: Callable[[Obj], StatusChange], *, delay: float, interval: float,
                 workers: int) -> None:
        self.name = name
        self.cache = cache
        self.delay = delay
        self.interval = interval
        self._desired = desired
        self.pipeline = WritePipeline(kube, resource, cache.get, workers=workers, background_workers=1,
                                      name=f"{name}-status-writes")
        self.workers: Workers[Key] = Workers(f"{name}-status", self._reconcile, count=workers)
        self._last_write: dict[Key, float] = {}
        self._own_versions: dict[Key, str] = {}
        self.looks = 0  # keys looked at
        self.writes = 0  # statuses written

    def mark(self, key: Key) -> None:
        """Look at ``key`` after ``delay``, or once ``interval`` has passed since its last write
        (a look already due sooner stays as it is)."""
        if not self.workers.running:
            return
        last = self._last_write.get(key)
        wait = self.delay if last is None else max(self.delay, last + self.interval - time.monotonic())
        self.workers.queue.add_after(key, wait)

    def own_write(self, obj: Obj) -> bool:
        """Whether ``obj`` is the version this writer's last write made (its watch event)."""
        key = key_of(obj)
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version is not None and self._own_versions.get(key) == version:
            del self._own_versions[key]
            return True
        return False

    async def start(self) -> None:
        """Look at every object once (a new term of leadership starts from what the API holds)."""
        await self.pipeline.start()
        await self.workers.start(key_of(obj) for obj in self.cache.list())

    async def stop(self) -> None:
        await self.workers.stop()
        await self.pipeline.stop()
        self._last_write.clear()
        self._own_versions.clear()

    async def _reconcile(self, key: Key) -> None:
        obj = self.cache.get(*key)
        if obj is None:
            self._last_write.pop(key, None)
            return
        self.looks += 1
        change = self._desired(obj)
        if not change(_probe(obj.get("status") or {})):
            return
        wait = self._last_write.get(key, -math.inf) + self.interval - time.monotonic()
        if wait > 0:  # written a moment ago: the next write waits its turn, with the state then
            self.workers.queue.add_after(key, wait)
            return
        self._last_write[key] = time.monotonic()
        outcome: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

        def written(new: Obj) -> None:
            self.writes += 1
            version = (new.get("metadata") or {}).get("resourceVersion")
            if version is not None:
                self._own_versions[key] = str(version)
            if not outcome.done():
                outcome.set_result(None)

        def dropped(error: BaseException | None) -> None:
            if not outcome.done():
                outcome.set_result(error)

        self.pipeline.submit(*key, Change(lambda o: change(o["status"]), written, dropped))
        error = await outcome
        if isinstance(error, ApiError) and not error.not_found:
            raise error  # the workers retry this key alone, with backoff
        # None: the newest copy had it already; not found: gone, its DELETED event follows.


class QueueStatusReconciler:
    """Status of every ClusterQueue, LocalQueue and Cohort, and the queue counts for metrics."""

    def __init__(
        self,
        kube: Client,
        engine: Engine,
        informers: Informers,
        *,
        delay: float = 0.1,
        interval: float = 1.0,
        workers: int = 4,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.workloads = informers.get(WORKLOADS)
        self.cluster_queues = informers.get(CLUSTER_QUEUES)
        self.local_queues = informers.get(LOCAL_QUEUES)
        self.cohorts = informers.get(COHORTS)
        self._stats = IncrementalStats(self.local_queues.get, self.workloads.get)
        self._local_queues_of: dict[str, set[Key]] = {}
        """Per ClusterQueue name: the LocalQueues that point at it."""
        self._cluster_queue_active: dict[str, tuple[bool, str, str]] = {}
        self._sampler: asyncio.Task[None] | None = None
        """Per ClusterQueue: its ``Active`` as last looked at (its LocalQueues follow a change)."""

        def writer(name: str, resource: Resource, cache: Informer,
                   desired: Callable[[Obj], StatusChange]) -> StatusWriter:
            return StatusWriter(name, kube, resource, cache, desired, delay=delay, interval=interval,
                                workers=workers)

        self.cluster_queue_writes = writer("cluster-queue", CLUSTER_QUEUES, self.cluster_queues,
                                           self._cluster_queue_status)
        self.local_queue_writes = writer("local-queue", LOCAL_QUEUES, self.local_queues,
                                         self._local_queue_status)
        self.cohort_writes = writer("cohort", COHORTS, self.cohorts, self._cohort_status)
        for lq in self.local_queues.list():
            self._on_local_queue(ADDED, lq, None)
        for wl in self.workloads.list():
            self._stats.workload_changed(wl)
        self.workloads.add_handler(self._on_workload)
        self.cluster_queues.add_handler(self._on_cluster_queue)
        self.local_queues.add_handler(self._on_local_queue)
        self.cohorts.add_handler(self._on_cohort)
        informers.get(RESOURCE_FLAVORS).add_handler(self._on_flavor)
        informers.get(ADMISSION_CHECKS).add_handler(self._on_admission_check)

    @property
    def stats(self) -> Stats:
        """Pending, reserving, admitted and finished Workloads per queue, as the API holds them."""
        return self._stats.stats

    @property
    def writers(self) -> tuple[StatusWriter, StatusWriter, StatusWriter]:
        return self.cluster_queue_writes, self.local_queue_writes, self.cohort_writes

    async def start(self) -> None:
        for writer in self.writers:
            await writer.start()
        afs = self.engine.admission_fair_sharing
        if afs is not None and self._sampler is None:
            self._sampler = asyncio.create_task(self._sample(afs.sampling_interval), name="afs-sampler")

    async def stop(self) -> None:
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
        for writer in self.writers:
            await writer.stop()
        self._cluster_queue_active.clear()

    async def _sample(self, interval: float) -> None:
        """Admission Fair Sharing: sample each LocalQueue's consumed resources once per
        ``usageSamplingInterval`` (Kueue's LocalQueue reconciler requeues itself as often) and
        write the status of those sampled."""
        tick = max(0.05, min(interval / 4, 5.0))
        while True:
            for namespace, name in self.engine.sample_admission_fair_sharing(self.clock()):
                self.local_queue_writes.mark((namespace, name))
            await asyncio.sleep(tick)

    # -- what each status should be

    def _cluster_queue_status(self, cq: Obj) -> StatusChange:
        name = cq["metadata"]["name"]
        engine = self.engine
        active = engine.cluster_queue_active(name)
        if self._cluster_queue_active.get(name) != active:
            self._cluster_queue_active[name] = active
            for key in self._local_queues_of.get(name, ()):
                self.local_queue_writes.mark(key)
        return _both(
            functools.partial(apply_queue_status, fields=engine.cluster_queue_status(name), active=active,
                              now=self.clock()),
            functools.partial(apply_weighted_share,
                              weighted_share=engine.weighted_share(name) if engine.fair_sharing else None),
        )

    def _local_queue_status(self, lq: Obj) -> StatusChange:
        namespace, name = lq["metadata"].get("namespace", ""), lq["metadata"]["name"]
        fields = self.engine.local_queue_status(namespace, name)
        return functools.partial(apply_queue_status, fields=fields,
                                 active=self.engine.local_queue_active(namespace, name), now=self.clock())

    def _cohort_status(self, cohort: Obj) -> StatusChange:
        share = self.engine.weighted_share(cohort["metadata"]["name"]) if self.engine.fair_sharing else None
        return functools.partial(apply_weighted_share, weighted_share=share)

    # -- what an event marks

    def _on_workload(self, event: str, new: Obj, old: Obj | None) -> None:
        if event == DELETED:
            self._stats.workload_deleted(new["metadata"].get("namespace", ""), new["metadata"]["name"])
        else:
            self._stats.workload_changed(new)
        cluster_queues: set[str] = set()
        local_queues: set[Key] = set()
        for wl in (new, old) if old is not None else (new,):
            self._queues_of(wl, cluster_queues, local_queues)
        for name in cluster_queues:
            self._mark_cluster_queue(name)
        for key in local_queues:
            self.local_queue_writes.mark(key)

    def _queues_of(self, wl: Obj, cluster_queues: set[str], local_queues: set[Key]) -> None:
        """The ClusterQueue a Workload reserves in, its LocalQueue and that queue's ClusterQueue."""
        reserved_in = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue")
        if reserved_in:
            cluster_queues.add(str(reserved_in))
        namespace, queue = local_queue_key(wl)
        if queue:
            local_queues.add((namespace, queue))
            queued_in = _cluster_queue_of(self.local_queues.get(namespace, queue))
            if queued_in:
                cluster_queues.add(queued_in)

    def _mark_cluster_queue(self, name: str) -> None:
        """A ClusterQueue, and under Fair Sharing the cohorts above it (their share follows its usage)."""
        self.cluster_queue_writes.mark((None, name))
        if self.engine.fair_sharing:
            for cohort in self._ancestors(_cohort_of(self.cluster_queues.get(None, name))):
                self.cohort_writes.mark((None, cohort))

    def _on_cluster_queue(self, event: str, new: Obj, old: Obj | None) -> None:
        if event != DELETED and self.cluster_queue_writes.own_write(new):
            return
        name = new["metadata"]["name"]
        self._mark_cluster_queue(name)
        if not _spec_changed(event, new, old):
            return
        if event == DELETED:
            self._cluster_queue_active.pop(name, None)
        for key in self._local_queues_of.get(name, ()):  # ClusterQueueDoesNotExist / IsInactive / Ready
            self.local_queue_writes.mark(key)
        if self.engine.fair_sharing:  # its quota is part of its tree's: every share there may move
            self._mark_trees({_cohort_of(new), _cohort_of(old)} - {""})

    def _on_local_queue(self, event: str, new: Obj, old: Obj | None) -> None:
        key = key_of(new)
        namespace, name = key[0] or "", key[1]
        for previous in {_cluster_queue_of(old), _cluster_queue_of(new)}:
            self._local_queues_of.get(previous, set()).discard(key)
        if event != DELETED:
            self._local_queues_of.setdefault(_cluster_queue_of(new), set()).add(key)
            if self.local_queue_writes.own_write(new):
                return
        self.local_queue_writes.mark(key)
        if not _spec_changed(event, new, old):
            return
        self._stats.local_queue_changed(namespace, name)  # its Workloads are routed, or not, anew
        for cq in {_cluster_queue_of(old), _cluster_queue_of(new)} - {""}:
            self._mark_cluster_queue(cq)

    def _on_cohort(self, event: str, new: Obj, old: Obj | None) -> None:
        if event != DELETED and self.cohort_writes.own_write(new):
            return
        name = new["metadata"]["name"]
        self.cohort_writes.mark((None, name))
        if not _spec_changed(event, new, old):
            return
        # Its place in the tree or its quota changed: cycles (Active) and shares, in the tree it
        # left and in the one it joined.
        parents = {str(((o or {}).get("spec") or {}).get("parentName") or "") for o in (new, old)}
        self._mark_trees({name, *parents} - {""})

    def _on_flavor(self, event: str, new: Obj, old: Obj | None) -> None:
        """A ClusterQueue naming a missing flavor is inactive (FlavorNotFound)."""
        name = new["metadata"]["name"]
        self._mark_cluster_queues_where(
            lambda spec: any(f.get("name") == name for g in spec.get("resourceGroups") or []
                             for f in g.get("flavors") or [])
        )

    def _on_admission_check(self, event: str, new: Obj, old: Obj | None) -> None:
        """A ClusterQueue whose check is missing or inactive is inactive (AdmissionCheck*)."""
        name = new["metadata"]["name"]

        def names_it(spec: Obj) -> bool:
            strategy = (spec.get("admissionChecksStrategy") or {}).get("admissionChecks") or []
            return name in (spec.get("admissionChecks") or []) or any(c.get("name") == name for c in strategy)

        self._mark_cluster_queues_where(names_it)

    # -- cohort trees

    def _ancestors(self, cohort: str) -> list[str]:
        """``cohort`` and the cohorts above it, by the Cohort objects' ``parentName`` (a cycle ends it)."""
        chain: list[str] = []
        while cohort and cohort not in chain:
            chain.append(cohort)
            cohort = str(((self.cohorts.get(None, cohort) or {}).get("spec") or {}).get("parentName") or "")
        return chain

    def _mark_trees(self, cohorts: set[str]) -> None:
        """Every ClusterQueue and Cohort in the trees ``cohorts`` belong to (a rare, spec-driven walk)."""
        named = {c for cohort in cohorts for c in self._ancestors(cohort)}
        roots = {self._ancestors(cohort)[-1] for cohort in named}

        def in_trees(cohort: str) -> bool:
            chain = self._ancestors(cohort)
            return bool(chain) and (chain[-1] in roots or not named.isdisjoint(chain))

        self._mark_cluster_queues_where(lambda spec: in_trees(_cohort_of({"spec": spec})))
        for obj in self.cohorts.list():
            if in_trees(obj["metadata"]["name"]):
                self.cohort_writes.mark((None, obj["metadata"]["name"]))

    def _mark_cluster_queues_where(self, test: Callable[[Obj], bool]) -> None:
        for cq in self.cluster_queues.list():
            if test(cq.get("spec") or {}):
                self._mark_cluster_queue(cq["metadata"]["name"])
