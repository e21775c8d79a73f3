"""The scheduling loop: run the engine when something changed, and hand what it decided to the writer.

The loop sleeps until woken: by any informer event that reaches the engine, or by a timer set
for the next requeue time. Then it runs one :meth:`engine.Engine.schedule` and submits the
decisions to a :class:`~kadmit.kube.pipeline.WritePipeline`, without waiting for the API: the
next cycle can start as soon as the engine has something to do. A reservation is already
*assumed* in the engine when it is decided; each change is applied to the newest copy of the
Workload and declines when its decision no longer fits it (the Workload finished, changed its
spec, was evicted or reserved meanwhile), and a reservation that is not written is forgotten and
the workload queued again: a quota is never promised twice. Any other decision that cannot be
written is undone in the engine by feeding it the Workload as the cache has it (or as this writer
found it finished, ahead of the watch), so the next cycle decides again (a failed preemption is
issued again). The engine learns that a write landed only from the informer, in the API's order,
so no stale event can undo it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable

from kadmit import workload as ws
from kadmit.controller.jobs.construct import JOB_UID_LABEL
from kadmit.engine import Decisions, Engine, Eviction, InvalidObject, Pending, Preemption, Reservation
from kadmit.engine.slices import REPLACED_REASON, replaced_message
from kadmit.kube import Client, Obj, copy_object
from kadmit.kube.events import EventRecorder
from kadmit.kube.informer import Informer
from kadmit.kube.pipeline import Change, WritePipeline
from kadmit.kube.ratelimit import Pace, TokenBucket
from kadmit.kube.resources import WORKLOADS
from kadmit.kube.turns import give_way

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

    def slice_replaced(self, cluster_queue: str) -> None:
        return None


WAITING_WRITES_PER_SECOND = 50.0
WAITING_WRITES_BURST = 100
"""How fast the conditions of waiting Workloads are written (``QuotaReserved=False`` with the
reason, and the Event that tells it). Reservations, preemptions and evictions are never held
back. A handful of Workloads is told at once; under a burst of thousands, each is told in turn
at this rate, and one that is reserved before its turn is never told it waited (the reservation
withdraws the condition still waiting). Kueue's own scalability run paces all of its requests at
this rate (minimalkueue's QPS 50, burst 100); here it spares kadmit and the API server a write,
its echo on every watch and an Event for states already past (7 to 14 % of the Workload writes
in ``bench/scalability.py``'s baseline; bench/README.md, stop 38)."""

WAITING = "waiting"
"""The pipeline slot of a waiting Workload's condition: each cycle's replaces the last one's."""


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
        waiting_pace: Pace | None = None,
    ) -> None:
        """``waiting_pace`` paces the conditions of waiting Workloads (default:
        :data:`WAITING_WRITES_PER_SECOND`, in bursts of :data:`WAITING_WRITES_BURST`)."""
        self.engine = engine
        self.workloads = workloads
        self.clock = clock
        self.observer = observer or SchedulerObserver()
        self.events = events
        if waiting_pace is None:
            waiting_pace = TokenBucket(WAITING_WRITES_PER_SECOND, WAITING_WRITES_BURST)
        self.writes = WritePipeline(kube, WORKLOADS, workloads.get, workers=concurrency,
                                    name="scheduler-writes", background_pace=waiting_pace)
        self._reserving: dict[tuple[str, str], Obj] = {}
        """The admission of each reservation submitted and not yet written or dropped: a
        preemption decided meanwhile was decided against it, which no copy of the object has yet."""
        self._wake = asyncio.Event()
        self._timers: dict[float, asyncio.TimerHandle] = {}
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
        await self.writes.start()
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                if (await self.cycle()).more:
                    self._wake.set()  # the engine stopped at its budget: go on once the loop had its turn
        finally:
            for timer in self._timers.values():
                timer.cancel()
            self._timers.clear()
            await self.writes.stop()  # what is not written yet is forgotten by the engine

    async def cycle(self) -> Decisions:
        """One engine cycle; its writes are submitted, not awaited (see :meth:`settled`)."""
        now = self.clock()
        started = time.perf_counter()
        decisions = self.engine.schedule(now)
        self.cycles += 1
        if decisions:
            self._submit(decisions, now)
        self.observer.cycle(time.perf_counter() - started, decisions)
        await give_way()  # informer events and webhook requests are served between two calls
        return decisions

    async def settled(self) -> None:
        """Until every write decided so far has landed or been dropped (tests, shutdown)."""
        await self.writes.drain()

    def _submit(self, decisions: Decisions, now: float) -> None:
        # A workload requeued and reserved in the same cycle gets both in one write, in that order.
        requeued = {r.workload: r.conditions for r in decisions.requeues}
        for reservation in decisions.reservations:
            self._reserve(reservation, now, requeued.get(reservation.workload, []))
        for preemption in decisions.preemptions:
            self._preempt(preemption, now)
        for pending in decisions.pending:
            # Only a condition that changed is written, and only a written one is told in an event;
            # a newer cycle's conditions replace ones still waiting to be written.
            self._change(pending.workload, _pending_writer(pending, now), urgent=False,
                         on_written=functools.partial(self._told_pending, pending), slot=WAITING)
        for admitted in decisions.admitted:
            self._admit(admitted.workload, admitted.conditions, now)
        for eviction in decisions.evictions:
            self._evict_for_checks(eviction, now)
        for deactivation in decisions.deactivations:
            self._change(deactivation.workload, _conditions_writer(deactivation.conditions, now))
        reserved = {r.workload for r in decisions.reservations}
        for requeue in decisions.requeues:
            if requeue.workload not in reserved:
                self._change(requeue.workload, _requeue_writer(requeue.conditions, now), urgent=False)
        for cleared in decisions.cleared:
            self._change(cleared.workload, _cleared_writer(cleared.conditions, now))

    def _change(self, key: tuple[str, str], mutate: Callable[[Obj], bool], *, urgent: bool = True,
                on_written: Callable[[Obj], None] | None = None, slot: str | None = None) -> None:
        """Submit a change; if it cannot be written, the engine is set back to what the cache says."""

        def dropped(error: BaseException | None) -> None:
            if error is not None:
                self._resync(key)

        self.writes.submit(*key, Change(mutate, on_written, dropped, slot), urgent=urgent)

    def _resync(self, key: tuple[str, str]) -> None:
        """Feed the engine the Workload as the cache has it: a decision that did not land is undone.

        One exception: a Workload that this writer found finished (read after a conflict) while the
        watch lags is fed as finished. Otherwise a victim that finished first would be preempted
        again in every cycle until the watch delivers its finish (under a burst, tens of seconds).
        Only a finish is taken ahead of the watch: it is final, so an older event arriving later
        can make the engine count its quota as held, never as free twice."""
        current = self.workloads.get(*key)
        newest = self.writes.latest(*key)
        if newest is not None and ws.is_true(newest, ws.FINISHED):
            current = newest
        if current is not None:
            try:
                self.engine.upsert_workload(copy_object(current))
            except InvalidObject as exc:
                logger.warning("workload %s/%s ignored by the scheduler: %s", *key, exc)
        self.wake()

    def _reserve(self, reservation: Reservation, now: float, requeue: list[Obj]) -> None:
        namespace, name = reservation.workload
        current = self.workloads.get(namespace, name)
        if current is None:
            self._forget(reservation, "not in the cache", requeue, now)
            return
        generation = current["metadata"].get("generation")

        def reserve(obj: Obj) -> bool:
            status = obj["status"]
            spec = obj.get("spec") or {}
            if obj["metadata"].get("generation") != generation or spec.get("active") is False:
                return False  # its spec changed (or it was deactivated): decide again
            if status.get("admission") is not None or ws.is_true(status, ws.QUOTA_RESERVED) \
                    or ws.is_true(status, ws.FINISHED):
                return False
            if requeue:
                _requeue_writer(requeue, now)(obj)
            return ws.reserve(status, reservation.admission, reservation.conditions,
                              reservation.admission_checks, now)

        def written(obj: Obj) -> None:
            # The engine keeps the reservation *assumed* until the informer delivers this write. It
            # is not fed the written copy directly: an older event still on its way through the
            # informer would then look like a release, and the quota would be promised twice.
            self._settled_reservation(reservation)
            self.observer.reserved(obj, reservation, now)
            waited = now - (ws.queued_since(obj) or now)
            self._event(obj, "Normal", "QuotaReserved",
                        f"Quota reserved in ClusterQueue {reservation.cluster_queue}, "
                        f"wait time since queued was {max(waited, 0.0):.0f}s")
            if reservation.admitted:
                self.observer.admitted(obj, now)
                self._event(obj, "Normal", "Admitted",
                            f"Admitted by ClusterQueue {reservation.cluster_queue}, "
                            "wait time since reservation was 0s")
            if reservation.replaced is not None:
                self._replace_slice(reservation.replaced, obj, reservation.cluster_queue)

        def dropped(error: BaseException | None) -> None:
            self._settled_reservation(reservation)
            self._forget(reservation, str(error or "the Workload changed"), requeue, now)

        self.writes.withdraw(namespace, name, WAITING)  # reserved: it is not told it waits
        self._reserving[reservation.workload] = reservation.admission
        self.writes.submit(namespace, name, Change(reserve, written, dropped))

    def _settled_reservation(self, reservation: Reservation) -> None:
        """The reservation was written or dropped: the copies known say what it is now."""
        if self._reserving.get(reservation.workload) is reservation.admission:
            del self._reserving[reservation.workload]

    def _replace_slice(self, key: tuple[str, str], new_slice: Obj, cluster_queue: str) -> None:
        """The new slice of an elastic job is reserved: finish the slice it replaces (Kueue's
        ``replaceWorkloadSlice``), whose quota the engine has released already."""
        meta = new_slice["metadata"]
        job_uid = (meta.get("labels") or {}).get(JOB_UID_LABEL, "")
        message = replaced_message(str(meta.get("uid", "")), job_uid)

        def finish(obj: Obj) -> bool:
            status = obj["status"]
            if ws.is_true(status, ws.FINISHED):
                return False
            return ws.finish(status, REPLACED_REASON, message, self.clock())

        def written(obj: Obj) -> None:
            self._event(obj, "Normal", REPLACED_REASON, message)
            self.observer.slice_replaced(cluster_queue)

        self._change(key, finish, on_written=written)

    def _forget(self, reservation: Reservation, why: str, requeue: list[Obj], now: float) -> None:
        """A reservation that was not written: the quota was never ours."""
        namespace, name = reservation.workload
        logger.info("reservation of %s/%s in %s not written (%s); forgetting it", namespace, name,
                    reservation.cluster_queue, why)
        self.engine.forget(namespace, name)
        self.wake()
        if requeue:  # the engine has requeued it already: the condition must still be written
            self._change(reservation.workload, _requeue_writer(requeue, now), urgent=False)

    def _preempt(self, preemption: Preemption, now: float) -> None:
        # What the engine decided on: the reservation it is writing, or the newest copy known. The
        # cache alone is a watch event behind a reservation just written, and the eviction would
        # decline as if the victim had been released (about half the preemptions of Kueue's
        # large-scale test, bench/README.md, stop 40).
        decided_on = self._reserving.get(preemption.victim)
        if decided_on is None:
            victim = self.writes.latest(*preemption.victim)
            decided_on = ((victim or {}).get("status") or {}).get("admission")

        def evict(obj: Obj) -> bool:
            status = obj["status"]
            if status.get("admission") is None or status.get("admission") != decided_on:
                return False  # released, or reserved anew, since the decision
            if ws.is_true(status, ws.EVICTED) or ws.is_true(status, ws.FINISHED):
                return False  # a finished workload holds no quota: nothing to take back
            ws.evict(status, "Preempted", preemption.message, now)
            ws.apply_conditions(status, preemption.conditions, now)
            return True

        def written(obj: Obj) -> None:
            preemptor = self.workloads.get(*preemption.preemptor)
            cq = str(((obj.get("status") or {}).get("admission") or {}).get("clusterQueue", ""))
            # Kueue's evict.Evict, then its preemptor's two events
            self._event(obj, "Normal", "EvictedDueToPreempted", preemption.message)
            priorities = _priorities(preemptor, obj)
            self._event(obj, "Normal", "Preempted", preemption.message + priorities)
            if preemptor is not None:
                meta = obj["metadata"]
                self._event(preemptor, "Normal", "PreemptedWorkload",
                            f"Preempted workload {meta.get('namespace')}/{meta.get('name')} "
                            f"(UID: {meta.get('uid')}) in ClusterQueue {cq}{priorities}")
            self.observer.evicted(obj, "Preempted", "")
            preemptor_cq = cq
            if preemptor is not None:
                preemptor_cq = str(
                    ((preemptor.get("status") or {}).get("admission") or {}).get("clusterQueue", cq)
                )
            self.observer.preempted(preemptor_cq, preemption.reason)

        def dropped(error: BaseException | None) -> None:
            self._resync(preemption.victim)  # not evicted after all: the next cycle decides again

        self.writes.submit(*preemption.victim, Change(evict, written, dropped))

    def _admit(self, key: tuple[str, str], conditions: list[Obj], now: float) -> None:
        def admit(obj: Obj) -> bool:
            status = obj["status"]
            if status.get("admission") is None or ws.is_true(status, ws.ADMITTED) \
                    or ws.is_true(status, ws.FINISHED) or ws.is_true(status, ws.EVICTED):
                return False
            return ws.apply_conditions(status, conditions, now)

        def written(obj: Obj) -> None:
            self.observer.admitted(obj, now)
            cq = ((obj.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
            reserved = ws.find_condition(obj, ws.QUOTA_RESERVED) or {}
            waited = max(now - (ws.parse_time(reserved.get("lastTransitionTime")) or now), 0.0)
            self._event(obj, "Normal", "Admitted",
                        f"Admitted by ClusterQueue {cq}, wait time since reservation was {waited:.0f}s")

        self._change(key, admit, on_written=written)

    def _evict_for_checks(self, eviction: Eviction, now: float) -> None:
        def evict(obj: Obj) -> bool:
            status = obj["status"]
            if status.get("admission") is None or ws.is_true(status, ws.EVICTED) \
                    or ws.is_true(status, ws.FINISHED):
                return False
            if eviction.requeue_at is not None:
                state = status.get("requeueState") or {}
                previous = ws.parse_time(state.get("requeueAt"))
                state["requeueAt"] = ws.format_time(max(eviction.requeue_at, previous or 0.0))
                status["requeueState"] = state
            return ws.evict(status, eviction.reason, eviction.message, now)

        def written(obj: Obj) -> None:
            self.observer.evicted(obj, eviction.reason, "")
            self._event(obj, "Normal", f"EvictedDueTo{eviction.reason}", eviction.message)

        self._change(eviction.workload, evict, on_written=written)
        if eviction.requeue_at is not None:
            self.wake_at(eviction.requeue_at)

    def _told_pending(self, pending: Pending, workload: Obj) -> None:
        """Kueue's ``requeueAndUpdate``: a Warning with the condition's reason and message."""
        self._event(workload, "Warning", pending.reason, pending.message)

    def _event(self, workload: Obj, kind: str, reason: str, message: str) -> None:
        if self.events is not None:
            self.events.emit(workload, kind, reason, message)


def _priorities(preemptor: Obj | None, victim: Obj) -> str:
    """The tail of Kueue's preemption events (kadmit has no priority boost: effective = base)."""

    def priority(wl: Obj | None) -> int:
        return int(((wl or {}).get("spec") or {}).get("priority") or 0)

    mine, theirs = priority(preemptor), priority(victim)
    return (f"; preemptor effective priority: {mine} (base: {mine}, boost: 0); "
            f"preemptee effective priority: {theirs} (base: {theirs}, boost: 0)")


def _pending_writer(pending: Pending, now: float) -> Callable[[Obj], bool]:
    """``QuotaReserved=False`` with the engine's reason, and ``status.resourceRequests`` (what
    the scheduler counts for it) as Kueue's scheduler writes them for a Workload it leaves
    pending, each only if it changed."""

    def write(obj: Obj) -> bool:
        status = obj["status"]
        if ws.is_true(status, ws.QUOTA_RESERVED) or ws.is_true(status, ws.FINISHED):
            return False  # the decision is stale: the workload got a reservation meanwhile
        changed = ws.apply_conditions(status, pending.conditions, now)
        requests = pending.resource_requests()
        read = pending.read
        if read is not None and read.generation not in (None, obj["metadata"].get("generation")):
            requests = None  # read from an older spec: the next decision on this one says
        if requests is not None and status.get("resourceRequests") != requests:
            status["resourceRequests"] = requests
            changed = True
        return changed

    return write


def _cleared_writer(conditions: list[Obj], now: float) -> Callable[[Obj], bool]:
    """A stopped queue took back a reservation that was not Admitted yet."""

    def write(obj: Obj) -> bool:
        status = obj["status"]
        if status.get("admission") is None or ws.is_true(status, ws.ADMITTED):
            return False
        del status["admission"]
        ws.apply_conditions(status, conditions, now)
        return True

    return write


def _conditions_writer(conditions: list[Obj], now: float) -> Callable[[Obj], bool]:
    return lambda obj: ws.apply_conditions(obj["status"], conditions, now)


def _requeue_writer(conditions: list[Obj], now: float) -> Callable[[Obj], bool]:
    def write(obj: Obj) -> bool:
        status = obj["status"]
        changed = ws.apply_conditions(status, conditions, now)
        state = status.get("requeueState")
        if state and state.get("requeueAt"):
            state.pop("requeueAt", None)
            changed = True
        return changed

    return write
