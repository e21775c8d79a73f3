"""Decisions outside the admission loop: pending reasons, stop policies, backoff, checks."""

from __future__ import annotations

import heapq

from kadmit.engine.backoff import check_retry_requeue_at
from kadmit.engine.decisions import (
    Admitted,
    Deactivation,
    Decisions,
    Eviction,
    Pending,
    Requeue,
    ReservationCleared,
    condition,
)
from kadmit.engine.entry import Entry
from kadmit.engine.model import (
    HOLD_AND_DRAIN,
    STOP_NONE,
)
from kadmit.engine.queues import ClusterQueueQueue
from kadmit.engine.reasons import (
    PENDING_EVALUATION,
    SUSPENDED,
)
from kadmit.engine.store import Store, queue_blocker_told, quota_reserved_false

PENDING_EVALUATION_MESSAGE = "Workload is pending evaluation in the scheduling queue"


class Reporting(Store):
    """Reports what changed for workloads the admission loop does not reach."""

    def _pending(
        self, entry: Entry, name: str | None, reason: str, message: str, now: float, decisions: Decisions
    ) -> None:
        if entry.reported == (reason, message):
            return
        entry.reported = (reason, message)
        conditions = [condition("QuotaReserved", "False", reason, message, now)]
        decisions.pending.append(Pending(entry.key, name, reason, message, conditions, entry.wl))

    def _park(
        self,
        queue: ClusterQueueQueue,
        entry: Entry,
        name: str,
        reason: str,
        message: str,
        now: float,
        decisions: Decisions,
    ) -> int:
        """Park ``entry``'s bucket: its peers of the same shape wait for the same reason, and are
        told so (each once per reason and message, without evaluating them one by one); how many."""
        peers = queue.park(entry, reason, message)
        if not peers:
            return 0
        # One condition for them all: a bucket of thousands is told at once, and the decisions'
        # conditions are only read.
        told = (reason, message)
        conditions = [condition("QuotaReserved", "False", reason, message, now)]
        pending = decisions.pending
        for peer in peers:
            if peer.reported != told:
                peer.reported = told
                pending.append(Pending(peer.key, name, reason, message, conditions, peer.wl))
        return len(peers)

    def _report_parked_arrivals(self, now: float, decisions: Decisions) -> None:
        """Workloads queued into a parked bucket since the last cycle wait for its reason."""
        arrivals, self._parked_arrivals = self._parked_arrivals, set()
        for key in sorted(arrivals):
            entry = self._entries.get(key)
            if entry is None or entry.queue is None:
                continue
            parked = ClusterQueueQueue.parked_reason(entry)
            if parked is not None:
                self._pending(entry, entry.queue, parked[0], parked[1], now, decisions)

    def _report_unblocked(self, now: float, decisions: Decisions) -> None:
        """After a cycle: the workloads queued again after a queue blocker (a LocalQueue or
        ClusterQueue stopped, inactive or missing) that the cycle did not tell anything newer
        (a StrictFIFO queue tries its head only) are told they wait in the queue now, as
        Kueue's ``resolveGranularUnadmittedQuotaReservedCondition`` says it: PendingEvaluation."""
        keys, self._unblocked = self._unblocked, set()
        for key in sorted(keys):
            entry = self._entries.get(key)
            if entry is None or entry.queue is None or entry.queue in self._inactive:
                continue
            if queue_blocker_told(entry.reported or quota_reserved_false(entry.wl)):
                message = PENDING_EVALUATION_MESSAGE
                self._pending(entry, entry.queue, PENDING_EVALUATION, message, now, decisions)

    def _report_unrouted(self, now: float, decisions: Decisions) -> None:
        changed, self._unrouted_changed = self._unrouted_changed, set()
        unrouted = self._unrouted
        # Most were routed since (every workload loaded before the first cycle): only the ones
        # still unrouted with a reason to tell are sorted.
        for key in sorted(k for k in changed if unrouted.get(k, ("", ""))[1]):
            entry = self._entries.get(key)
            reason, message = unrouted[key]
            if entry is not None:
                self._pending(entry, None, reason, message, now, decisions)
        for key, reason in sorted(self._restarted.items()):
            message = (
                "The ClusterQueue was restarted"
                if reason.startswith("Cluster")
                else "The LocalQueue was restarted"
            )
            conditions = [condition("Requeued", "True", reason, message, now)]
            decisions.requeues.append(Requeue(key, reason, conditions))
        self._restarted.clear()
        arrivals, self._inactive_arrivals = self._inactive_arrivals, set()
        if not self._report_inactive:
            for key in sorted(arrivals):
                entry = self._entries.get(key)
                if entry is not None and entry.queue in self._inactive:
                    self._pending(
                        entry, entry.queue, SUSPENDED, self._suspended_message(entry.queue), now, decisions
                    )
            return
        self._report_inactive = False
        self._apply_stop_policies(now, decisions)
        for name in sorted(self._inactive):
            queue = self._queues.get(name)
            if queue is None:
                continue
            message = self._suspended_message(name)
            for entry in queue.entries():
                self._pending(entry, name, SUSPENDED, message, now, decisions)

    def _suspended_message(self, name: str) -> str:
        """What a waiting workload of an inactive (or stopped) ClusterQueue is told: Kueue's
        scheduler and ``getQueueBlocker`` both say "inactive"; "is stopped" is what a reservation
        taken back is told (:meth:`_apply_stop_policies`)."""
        return f"ClusterQueue {name} is inactive"

    def _apply_stop_policies(self, now: float, decisions: Decisions) -> None:
        """Hold: reservations not yet Admitted are given back. HoldAndDrain: Admitted workloads
        are evicted too (``ClusterQueueStopped`` / ``LocalQueueStopped``)."""
        for cq_name in sorted(self._holders):
            cq = self.cluster_queues.get(cq_name)
            for entry in sorted(self._holders[cq_name].values(), key=lambda e: e.key):
                if entry.evicted:
                    continue
                wl = entry.wl
                lq = self.local_queues.get((wl.namespace, wl.queue_name))
                if cq is not None and cq.stop_policy != STOP_NONE:
                    policy, kind, reason = cq.stop_policy, "ClusterQueue", "ClusterQueueStopped"
                    who = f"ClusterQueue {cq_name}"
                elif lq is not None and lq.stop_policy != STOP_NONE:
                    policy, kind, reason = lq.stop_policy, "LocalQueue", "LocalQueueStopped"
                    who = f"LocalQueue {lq.name}"
                else:
                    continue
                if not entry.admitted:
                    message = f"{who} is stopped"
                    self._release(entry)
                    self._index(entry)
                    entry.assumed = False
                    conditions = [condition("QuotaReserved", "False", SUSPENDED, message, now)]
                    decisions.cleared.append(ReservationCleared(entry.key, SUSPENDED, message, conditions))
                    self._route(entry, now=None)
                elif policy == HOLD_AND_DRAIN:
                    entry.evicted = True
                    message = f"The {kind} is stopped"
                    conditions = [condition("Evicted", "True", reason, message, now)]
                    decisions.evictions.append(Eviction(entry.key, reason, message, None, conditions))

    def _release_backoff(self, now: float, decisions: Decisions) -> None:
        while self._backoff and self._backoff[0][0] <= now:
            due, _, key = heapq.heappop(self._backoff)
            entry = self._entries.get(key)
            if entry is None or entry.reserved_in is not None or entry.queue is not None:
                continue
            if self._unrouted.get(key, ("", ""))[1] != "waiting for the requeue backoff to finish":
                continue
            self._clear_unrouted(key)
            conditions = [
                condition("Requeued", "True", "BackoffFinished", "The workload backoff was finished", now)
            ]
            decisions.requeues.append(Requeue(key, "BackoffFinished", conditions))
            self._route(entry, now=now, requeue_at=due)

    def _evaluate_checks(self, now: float, decisions: Decisions) -> None:
        dirty, self._check_dirty = self._check_dirty, set()
        for key in sorted(dirty):
            entry = self._entries.get(key)
            if entry is None or entry.reserved_in is None or entry.evicted:
                continue
            cq = self.cluster_queues.get(entry.reserved_in)
            if cq is None:
                continue
            applicable = {rule.name for rule in cq.admission_checks if rule.applies_to(entry.flavors)}
            states = {c.name: c for c in entry.wl.check_states if c.name in applicable}
            rejected = sorted(n for n, c in states.items() if c.state == "Rejected")
            retry = sorted(n for n, c in states.items() if c.state == "Retry")
            if rejected:
                if entry.check_reported == "Rejected":
                    continue
                entry.check_reported = "Rejected"
                plural = "AdmissionChecks" if len(rejected) > 1 else "AdmissionCheck"
                detail = "; ".join(f'"{n}" ({states[n].message})' for n in rejected)
                message = f"{plural} in Rejected state: {detail}"
                conditions = [condition("DeactivationTarget", "True", "AdmissionCheck", message, now)]
                decisions.deactivations.append(Deactivation(key, message, conditions))
            elif retry:
                if entry.check_reported == "Retry":
                    continue
                entry.check_reported = "Retry"
                entry.evicted = True
                plural = "AdmissionChecks" if len(retry) > 1 else "AdmissionCheck"
                detail = "; ".join(f'"{n}" ({states[n].message})' for n in retry)
                message = f"Evicted due to {plural} in Retry state: {detail}"
                requeue_at = check_retry_requeue_at(
                    entry.wl.requeue_at,
                    [(states[n].last_transition, states[n].requeue_after_seconds) for n in retry],
                )
                conditions = [condition("Evicted", "True", "AdmissionCheck", message, now)]
                decisions.evictions.append(Eviction(key, "AdmissionCheck", message, requeue_at, conditions))
            elif not entry.admitted and all(
                states.get(n) is not None and states[n].state == "Ready" for n in applicable
            ):
                entry.admitted = True
                self._index(entry)
                entry.check_reported = ""
                self._track_readiness(entry)
                conditions = [condition("Admitted", "True", "Admitted", "The workload is admitted", now)]
                decisions.admitted.append(Admitted(key, conditions))
