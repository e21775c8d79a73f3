"""Read-only views of the engine's state: workload status, queue status and activeness."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from kadmit.engine.cycle import Cycle
from kadmit.engine.entry import Entry
from kadmit.engine.fair_sharing import (
    dominant_resource_share,
    weighted_share,
)
from kadmit.engine.model import (
    STOP_NONE,
    FlavorResource,
    Obj,
    ResourceGroup,
    WorkloadKey,
)
from kadmit.engine.quantity import format_milli, format_nano
from kadmit.engine.queues import ClusterQueueQueue
from kadmit.engine.quota import QuotaNode
from kadmit.engine.reasons import PENDING_EVALUATION, SUSPENDED
from kadmit.engine.timestamps import format_time


def _holders_status(
    holders: Iterable[Entry],
    groups: Iterable[ResourceGroup],
    nominal: Mapping[FlavorResource, int] | None,
) -> Obj:
    """The part of a LocalQueue's status that the workloads holding quota make: how many reserve,
    how many are admitted, and the usage of each (the admitted ones' alone in ``flavorsUsage``)."""
    reserved: dict[FlavorResource, int] = {}
    admitted: dict[FlavorResource, int] = {}
    reserving = admitted_count = 0
    for entry in holders:
        reserving += 1
        admitted_count += entry.admitted
        for fr, value in entry.charged.items():
            reserved[fr] = reserved.get(fr, 0) + value
            if entry.admitted:
                admitted[fr] = admitted.get(fr, 0) + value
    return {
        "reservingWorkloads": reserving,
        "admittedWorkloads": admitted_count,
        "flavorsReservation": _flavor_usage(groups, reserved, nominal),
        "flavorsUsage": _flavor_usage(groups, admitted, nominal),
    }


def _flavor_usage(
    groups: Iterable[ResourceGroup],
    usage: Mapping[FlavorResource, int],
    nominal: Mapping[FlavorResource, int] | None,
) -> list[Obj]:
    """``[{name, resources: [{name, total[, borrowed]}]}]`` in the queue's flavor order."""
    out = []
    for group in groups:
        for flavor in group.flavors:
            resources = []
            for quota in flavor.resources:
                fr = FlavorResource(flavor.name, quota.name)
                total = usage.get(fr, 0)
                item = {"name": quota.name, "total": format_milli(quota.name, total)}
                if nominal is not None:
                    item["borrowed"] = format_milli(quota.name, max(0, total - nominal.get(fr, 0)))
                resources.append(item)
            out.append({"name": flavor.name, "resources": resources})
    return out


@dataclass(frozen=True, slots=True)
class PendingWorkload:
    """One pending workload as the Visibility API shows it (the caller adds its metadata)."""

    namespace: str
    name: str
    priority: int
    local_queue: str
    position_in_cluster_queue: int
    position_in_local_queue: int


@dataclass(slots=True)
class _Status:
    """How :meth:`Engine.status` describes a workload (used by ``kadmit simulate``)."""

    state: str
    cluster_queue: str | None
    reason: str
    message: str
    flavors: dict[str, dict[str, str]]
    counts: dict[str, int]
    borrowing: bool = False
    """Admitted by borrowing from the cohort (known for reservations this engine made)."""


class StatusViews(Cycle):
    """Queries: how a workload, a queue or a quota node stands. (Above the cycle in one line of
    classes, not beside it: a class compiled by mypyc has one base.)"""

    def cluster_queue_active(self, name: str) -> tuple[bool, str, str]:
        """The ClusterQueue's ``Active`` condition: (status, reason, message)."""
        if self._dirty:
            self._rebuild()
        if name not in self.cluster_queues:
            return False, "NotFound", f"ClusterQueue {name} doesn't exist"
        if name in self._inactive:
            reason, message = self._inactive[name]
            return False, reason, message
        return True, "Ready", "Can admit new workloads"

    def usage(self, name: str) -> dict[FlavorResource, int]:
        """Usage (milli-units) at a ClusterQueue or Cohort node of the tree."""
        if self._dirty:
            self._rebuild()
        found = self._nodes.get(name) or self._cohort_nodes.get(name)
        return dict(found.usage) if found is not None else {}

    def nodes(self) -> Iterator[QuotaNode]:
        if self._dirty:
            self._rebuild()
        yield from self._nodes.values()
        yield from self._cohort_nodes.values()

    def weighted_share(self, name: str) -> int:
        """``status.fairSharing.weightedShare`` of a ClusterQueue or Cohort (fair sharing on)."""
        self.sync()
        node = self._nodes.get(name) or self._cohort_nodes.get(name)
        if node is None:
            return 0
        return weighted_share(dominant_resource_share(node, self._weight_of(node)))

    def status(self, namespace: str, name: str) -> _Status:
        """Where a workload stands: admitted, reserved (waiting for checks), or why it waits."""
        entry = self._entries.get(WorkloadKey(namespace, name))
        if entry is None:
            return _Status("Unknown", None, "", "not known to the engine", {}, {})
        if entry.reserved_in is not None:
            state = "Evicted" if entry.evicted else "Admitted" if entry.admitted else "QuotaReserved"
            flavors, counts = self._assignment_view(entry)
            borrowing = entry.view is not None and entry.view.borrowing > 0
            return _Status(state, entry.reserved_in, "", "", flavors, counts, borrowing)
        if entry.key in self._unrouted:
            reason, message = self._unrouted[entry.key]
            return _Status("Pending", None, reason, message, {}, {})
        parked = ClusterQueueQueue.parked_reason(entry)
        if parked is not None:
            return _Status("Pending", entry.queue, parked[0], parked[1], {}, {})
        if entry.reported is not None:
            return _Status("Pending", entry.queue, entry.reported[0], entry.reported[1], {}, {})
        if entry.queue is not None and entry.queue in self._inactive:
            return _Status(
                "Pending", entry.queue, SUSPENDED, f"ClusterQueue {entry.queue} is inactive", {}, {}
            )
        return _Status("Pending", entry.queue, PENDING_EVALUATION, "waiting in the queue", {}, {})

    def _assignment_view(self, entry: Entry) -> tuple[dict[str, dict[str, str]], dict[str, int]]:
        if entry.assumed and entry.view is not None:
            return (
                {ps.name: dict(ps.flavors) for ps in entry.view.pod_sets},
                {ps.name: ps.count for ps in entry.view.pod_sets},
            )
        wl = entry.wl
        if wl.admission is not None:
            return (
                {p.name: dict(p.flavors) for p in wl.admission.pod_set_assignments},
                {p.name: p.count for p in wl.admission.pod_set_assignments},
            )
        return {}, {}

    def cluster_queue_status(self, name: str) -> Obj:
        """The counters and usage of ``ClusterQueue.status`` (conditions: :meth:`cluster_queue_active`),
        from what is kept as workloads change (its quota node's usage, the count of its holders,
        the few not Admitted yet): the cost does not grow with its workloads.

        ``flavorsReservation`` counts every workload holding quota, ``flavorsUsage`` only the
        Admitted ones; ``borrowed`` is what exceeds the nominal quota.
        """
        self.sync()
        cq = self.cluster_queues.get(name)
        queue = self._queues.get(name)
        node = self._nodes.get(name)
        holders = self._holders.get(name, {})
        if node is None:  # a ClusterQueue that is gone: count what still holds quota there
            return {"pendingWorkloads": 0, **_holders_status(holders.values(), (), {})}
        # The queue's node holds exactly its workloads' usage (outside a call of schedule); the
        # ones still waiting for their checks are taken off for flavorsUsage.
        reserved = node.usage
        admitted = dict(reserved)
        waiting = self._unadmitted.get(name, {})
        for entry in waiting.values():
            for fr, value in entry.charged.items():
                admitted[fr] = admitted.get(fr, 0) - value
        groups = cq.resource_groups if cq is not None else ()
        return {
            # queued, plus those held in a stopped LocalQueue or their backoff (Kueue counts both)
            "pendingWorkloads": (len(queue) if queue is not None else 0) + len(self._held.get(name, ())),
            "reservingWorkloads": len(holders),
            "admittedWorkloads": len(holders) - len(waiting),
            "flavorsReservation": _flavor_usage(groups, reserved, node.nominal),
            "flavorsUsage": _flavor_usage(groups, admitted, node.nominal),
        }

    def pending_shapes(self, name: str) -> tuple[int, int]:
        """Distinct scheduling shapes among a ClusterQueue's pending workloads, (active, parked):
        what Kueue reports as ``pending_scheduling_hashes``."""
        self.sync()
        queue = self._queues.get(name)
        return queue.shapes() if queue is not None else (0, 0)

    def local_queue_status(self, namespace: str, name: str) -> Obj:
        """The counters and usage of ``LocalQueue.status`` (conditions: :meth:`local_queue_active`),
        from the indexes of its pending workloads and quota holders: the cost grows with those."""
        self.sync()
        lq = self.local_queues.get((namespace, name))
        cq = self.cluster_queues.get(lq.cluster_queue) if lq is not None else None
        groups = cq.resource_groups if cq is not None else ()
        # Finished and deactivated workloads stay known (their LocalQueue still names them) but
        # wait for nothing: Kueue's queues hold neither (the index leaves them out).
        pending = len(self._lq_pending.get((namespace, name), ()))
        holders = self._lq_holders.get((namespace, name), {}).values()
        status = {"pendingWorkloads": pending, **_holders_status(holders, groups, None)}
        if lq is not None and self.uses_admission_fair_sharing(lq.cluster_queue):
            ledger = self._ledgers.get((namespace, name))
            if ledger is not None and ledger.last_update is not None:
                consumed = {res: format_nano(value) for res, value in sorted(ledger.consumed.items())}
                status["fairSharing"] = {
                    "weightedShare": 0,
                    "admissionFairSharingStatus": {
                        "consumedResources": consumed,
                        "lastUpdate": format_time(ledger.last_update),
                    },
                }
        return status

    def local_queue_active(self, namespace: str, name: str) -> tuple[bool, str, str]:
        """The LocalQueue's ``Active`` condition: (status, reason, message)."""
        self.sync()
        lq = self.local_queues.get((namespace, name))
        if lq is None:
            return False, "NotFound", f"LocalQueue {name} doesn't exist"
        if lq.stop_policy != STOP_NONE:
            return False, "Stopped", "LocalQueue is stopped"
        if lq.cluster_queue not in self.cluster_queues:
            return False, "ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue"
        if lq.cluster_queue in self._inactive:
            return False, "ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue"
        return True, "Ready", "Can submit new workloads to localQueue"

    def requested_counts(self, namespace: str, name: str) -> dict[str, int]:
        """The pod counts the workload asks for (to tell partial admission apart)."""
        entry = self._entries.get(WorkloadKey(namespace, name))
        return {ps.name: ps.count for ps in entry.wl.pod_sets} if entry is not None else {}

    def pending_workloads(
        self,
        cluster_queue: str,
        *,
        local_queue: tuple[str, str] | None = None,
        offset: int = 0,
        limit: int | None = None,
    ) -> list[PendingWorkload] | None:
        """The workloads waiting in ``cluster_queue``, in the order its queue offers them to the
        scheduler (Kueue's ``PendingWorkloadsInfo``: a preemptor waiting for its victims first,
        then by priority, queue-order timestamp and uid), parked ones included, with their
        positions in the ClusterQueue and in their LocalQueue, from 0; None: no such ClusterQueue.

        ``offset`` / ``limit`` page through them (through those of ``local_queue``, a
        (namespace, name), when given), as the Visibility API's parameters do. The order is kept
        until a workload joins or leaves the queue; a page then costs what precedes its end."""
        self.sync()
        queue = self._queues.get(cluster_queue)
        if queue is None:
            return None
        ordered: list[Entry] = queue.ordered()
        sticky = queue.sticky
        walk: Iterable[Entry] = ordered
        if isinstance(sticky, Entry) and sticky.bucket is not None:
            walk = itertools.chain((sticky,), (e for e in ordered if e is not sticky))
        end = None if limit is None else offset + max(limit, 0)
        in_local: dict[tuple[str, str], int] = {}
        out: list[PendingWorkload] = []
        skipped = 0
        for position, entry in enumerate(walk):
            if local_queue is None and end is not None and position >= end:
                break
            if local_queue is not None and end is not None and len(out) + skipped >= end:
                break
            wl = entry.wl
            key = (wl.namespace, wl.queue_name)
            local_position = in_local.get(key, 0)
            in_local[key] = local_position + 1
            if local_queue is not None:
                if key != local_queue:
                    continue
                if skipped < offset:
                    skipped += 1
                    continue
            elif position < offset:
                continue
            out.append(
                PendingWorkload(wl.namespace, wl.name, wl.priority, wl.queue_name, position, local_position)
            )
        return out

    def workload_keys(self) -> list[WorkloadKey]:
        return sorted(self._entries)

    def reservation_count(self) -> int:
        return sum(len(h) for h in self._holders.values())
