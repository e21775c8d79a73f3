"""The scheduling loop: run the engine when something changed, and write what it decided.

The loop sleeps until woken: by any informer event that reaches the engine, or by a timer set
for the next requeue time. Then it runs one :meth:`engine.Engine.schedule` and writes the
decisions. A reservation is already *assumed* in the engine when it is decided; it is written
once, on the resourceVersion the decision was made on, and if that write fails for any reason
the engine forgets it and the workload is queued again: a quota is never promised twice, and a
reservation is never applied to a Workload that changed under it. The engine learns that the
write landed only from the informer, in the API's order, so no stale event can undo it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from kadmit import workload as ws
from kadmit.engine import Decisions, Engine, Eviction, Preemption, Reservation
from kadmit.kube import Client, Obj
from kadmit.kube.events import EventRecorder
from kadmit.kube.informer import Informer
from kadmit.kube.resources import WORKLOADS
from kadmit.kube.writes import update_status

logger = logging.getLogger(__name__)

Clock = Callable[[], float]


class SchedulerObserver:
    """Hooks for metrics; the default does nothing."""

    def cycle(self, seconds: float, decisions: Decisions) -> None:
        return None

    def reserved(self, workload: Obj, reservation: Reservation, now: float) -> None:
        return None

    def admitted(self, workload: Obj, now: float) -> None:
        return None

    def evicted(self, workload: Obj, reason: str, underlying_cause: str) -> None:
        return None

    def preempted(self, preemptor_cluster_queue: str, reason: str) -> None:
        return None


class Scheduler:
    def __init__(
        self,
        engine: Engine,
        kube: Client,
        workloads: Informer,
        *,
        clock: Clock = time.time,
        observer: SchedulerObserver | None = None,
        events: EventRecorder | None = None,
        concurrency: int = 16,
    ) -> None:
        self.engine = engine
        self.kube = kube
        self.workloads = workloads
        self.clock = clock
        self.observer = observer or SchedulerObserver()
        self.events = events
        self._wake = asyncio.Event()
        self._timers: dict[float, asyncio.TimerHandle] = {}
        self._limit = asyncio.Semaphore(concurrency)
        self.cycles = 0

    def wake(self) -> None:
        self._wake.set()

    def wake_at(self, when: float) -> None:
        """Run a cycle at ``when`` (POSIX seconds): requeue backoffs end without any event."""
        when = round(when, 3)
        if when in self._timers:
            return
        delay = max(when - self.clock(), 0.0)
        loop = asyncio.get_running_loop()
        self._timers[when] = loop.call_later(delay + 0.01, self._fire, when)

    def _fire(self, when: float) -> None:
        self._timers.pop(when, None)
        self.wake()

    async def run(self) -> None:
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                await self.cycle()
        finally:
            for timer in self._timers.values():
                timer.cancel()
            self._timers.clear()

    async def cycle(self) -> Decisions:
        now = self.clock()
        started = time.perf_counter()
        decisions = self.engine.schedule(now)
        self.cycles += 1
        if decisions:
            await self._write(decisions, now)
        self.observer.cycle(time.perf_counter() - started, decisions)
        return decisions

    async def _write(self, decisions: Decisions, now: float) -> None:
        jobs: list[Awaitable[object]] = []
        # A workload requeued and reserved in the same cycle gets both in one write, in that order.
        requeued = {r.workload: r.conditions for r in decisions.requeues}
        reserved = {r.workload for r in decisions.reservations}
        jobs += [self._reserve(r, now, requeued.get(r.workload, [])) for r in decisions.reservations]
        jobs += [self._preempt(p, now) for p in decisions.preemptions]
        for pending in decisions.pending:
            jobs.append(self._status(pending.workload, _pending_writer(pending.conditions, now)))
        for admitted in decisions.admitted:
            jobs.append(self._admit(admitted.workload, admitted.conditions, now))
        jobs += [self._evict_for_checks(e, now) for e in decisions.evictions]
        for deactivation in decisions.deactivations:
            jobs.append(self._status(deactivation.workload, _conditions_writer(deactivation.conditions, now)))
        for requeue in decisions.requeues:
            if requeue.workload not in reserved:
                jobs.append(self._status(requeue.workload, _requeue_writer(requeue.conditions, now)))
        for cleared in decisions.cleared:
            jobs.append(self._status(cleared.workload, _cleared_writer(cleared.conditions, now)))
        await asyncio.gather(*jobs)

    async def _reserve(self, reservation: Reservation, now: float, requeue: list[Obj]) -> None:
        namespace, name = reservation.workload
        current = self.workloads.get(namespace, name)
        try:
            if current is None:
                raise LookupError("not in the cache")
            async with self._limit:

                def reserve(status: Obj) -> bool:
                    if requeue:
                        _requeue_writer(requeue, now)(status)
                    return ws.reserve(
                        status,
                        reservation.admission,
                        reservation.conditions,
                        reservation.admission_checks,
                        now,
                    )

                written = await update_status(self.kube, WORKLOADS, current, reserve, attempts=1)
        except Exception as exc:  # any failure: the quota was never ours
            logger.info(
                "reservation of %s/%s in %s not written (%s); forgetting it",
                namespace,
                name,
                reservation.cluster_queue,
                exc,
            )
            self.engine.forget(namespace, name)
            self.wake()
            if requeue:  # the engine has requeued it already: the condition must still be written
                await self._status(reservation.workload, _requeue_writer(requeue, now))
            return
        if written is not None:
            self.observer.reserved(written, reservation, now)
            self._event(
                written,
                "Normal",
                "QuotaReserved",
                f"Quota reserved in ClusterQueue {reservation.cluster_queue}",
            )
            if reservation.admitted:
                self.observer.admitted(written, now)
                message = f"Admitted by ClusterQueue {reservation.cluster_queue}"
                self._event(written, "Normal", "Admitted", message)
            # The engine keeps the reservation *assumed* until the informer delivers this write. It
            # is not fed the written copy directly: an older event still on its way through the
            # informer would then look like a release, and the quota would be promised twice.

    async def _preempt(self, preemption: Preemption, now: float) -> None:
        def evict(status: Obj) -> bool:
            if status.get("admission") is None or ws.is_true(status, ws.EVICTED):
                return False
            ws.evict(status, "Preempted", preemption.message, now)
            ws.apply_conditions(status, preemption.conditions, now)
            return True

        written = await self._status(preemption.victim, evict)
        if written is not None:
            self._event(written, "Normal", "Preempted", preemption.message)
            cq = str(((written.get("status") or {}).get("admission") or {}).get("clusterQueue", ""))
            self.observer.evicted(written, "Preempted", "")
            preemptor = self.workloads.get(*preemption.preemptor)
            preemptor_cq = cq
            if preemptor is not None:
                preemptor_cq = str(
                    ((preemptor.get("status") or {}).get("admission") or {}).get("clusterQueue", cq)
                )
            self.observer.preempted(preemptor_cq, preemption.reason)

    async def _admit(self, key: tuple[str, str], conditions: list[Obj], now: float) -> None:
        def admit(status: Obj) -> bool:
            if status.get("admission") is None or ws.is_true(status, ws.ADMITTED):
                return False
            return ws.apply_conditions(status, conditions, now)

        written = await self._status(key, admit)
        if written is not None:
            self.observer.admitted(written, now)
            cq = ((written.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
            self._event(written, "Normal", "Admitted", f"Admitted by ClusterQueue {cq}")

    async def _evict_for_checks(self, eviction: Eviction, now: float) -> None:
        def evict(status: Obj) -> bool:
            if status.get("admission") is None or ws.is_true(status, ws.EVICTED):
                return False
            if eviction.requeue_at is not None:
                state = status.get("requeueState") or {}
                previous = ws.parse_time(state.get("requeueAt"))
                state["requeueAt"] = ws.format_time(max(eviction.requeue_at, previous or 0.0))
                status["requeueState"] = state
            return ws.evict(status, eviction.reason, eviction.message, now)

        written = await self._status(eviction.workload, evict)
        if written is not None:
            self.observer.evicted(written, eviction.reason, "")
            self._event(written, "Normal", f"EvictedDueTo{eviction.reason}", eviction.message)
        if eviction.requeue_at is not None:
            self.wake_at(eviction.requeue_at)

    def _event(self, workload: Obj, kind: str, reason: str, message: str) -> None:
        if self.events is not None:
            self.events.emit(workload, kind, reason, message)

    async def _status(self, key: tuple[str, str], mutate: Callable[[Obj], bool]) -> Obj | None:
        current = self.workloads.get(*key)
        if current is None:
            return None
        try:
            async with self._limit:
                return await update_status(self.kube, WORKLOADS, current, mutate)
        except Exception as exc:
            logger.warning("status write of workload %s/%s failed: %s", key[0], key[1], exc)
            return None


def _pending_writer(conditions: list[Obj], now: float) -> Callable[[Obj], bool]:
    def write(status: Obj) -> bool:
        if ws.is_true(status, ws.QUOTA_RESERVED) or ws.is_true(status, ws.FINISHED):
            return False  # the decision is stale: the workload got a reservation meanwhile
        return ws.apply_conditions(status, conditions, now)

    return write


def _cleared_writer(conditions: list[Obj], now: float) -> Callable[[Obj], bool]:
    """A stopped queue took back a reservation that was not Admitted yet."""

    def write(status: Obj) -> bool:
        if status.get("admission") is None or ws.is_true(status, ws.ADMITTED):
            return False
        del status["admission"]
        ws.apply_conditions(status, conditions, now)
        return True

    return write


def _conditions_writer(conditions: list[Obj], now: float) -> Callable[[Obj], bool]:
    return lambda status: ws.apply_conditions(status, conditions, now)


def _requeue_writer(conditions: list[Obj], now: float) -> Callable[[Obj], bool]:
    def write(status: Obj) -> bool:
        changed = ws.apply_conditions(status, conditions, now)
        state = status.get("requeueState")
        if state and state.get("requeueAt"):
            state.pop("requeueAt", None)
            changed = True
        return changed

    return write
