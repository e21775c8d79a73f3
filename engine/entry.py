"""One Workload as the engine tracks it between cycles, and the keys derived from it
(queue order, scheduling shape, the usage its status charges)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from kadmit.engine.flavors import (
    Assignment,
    FlavorMemory,
)
from kadmit.engine.model import (
    FlavorResource,
    Workload,
    WorkloadKey,
)
from kadmit.engine.quantity import MILLI
from kadmit.engine.queues import OrderKey, Queued

EMPTY: frozenset[Any] = frozenset()
"""Shared by entries with no flavors or victims: fewer objects for the collector to scan."""


@dataclass(slots=True)
class WalkMemory:
    """A pending workload's flavor-walk memory (Kueue's ``AssignmentClusterQueueState``)."""

    cycle: int
    """The cycle of the attempt."""
    cluster_queue: str
    generation: int
    """The ClusterQueue's quota generation at the attempt."""
    start: FlavorMemory | None
    """Where that cycle's walks started."""
    last: FlavorMemory
    """Where they stopped: the next cycle resumes from here."""


class Entry(Queued):
    """One Workload as the engine tracks it between cycles."""

    __slots__ = (
        "admitted",
        "assumed",
        "charged",
        "check_reported",
        "evicted",
        "evicted_at",
        "flavors",
        "holds_in",
        "key",
        "pending_in",
        "preempted",
        "priority",
        "queue",
        "reported",
        "reserved_at",
        "reserved_in",
        "targets",
        "uid",
        "view",
        "waits_in",
        "walk",
        "wl",
    )

    def __init__(self, wl: Workload) -> None:
        super().__init__(queue_order(wl, wl.created), scheduling_shape(wl))
        self.wl = wl
        self.priority = wl.priority
        """``wl``'s (read by every victim search and tournament key: a plain attribute)."""
        self.uid = wl.uid
        self.key: WorkloadKey = wl.key
        self.queue: str | None = None  # ClusterQueue whose heap holds it
        self.reserved_in: str | None = None
        self.charged: dict[FlavorResource, int] = {}
        self.flavors: frozenset[str] = EMPTY
        self.assumed = False
        self.evicted = False
        self.evicted_at: float | None = None
        self.admitted = False
        self.reserved_at = 0.0
        self.targets: frozenset[WorkloadKey] = EMPTY  # the victims it waits for
        self.preempted = False  # issued preemptions and has not been admitted since
        self.reported: tuple[str, str] | None = None
        self.check_reported: str = ""
        self.view: Assignment | None = None  # what was assumed, until the status confirms it
        self.walk: WalkMemory | None = None  # where the last flavor walk stopped
        self.waits_in: str | None = None  # the ClusterQueue that lists it as not Admitted yet
        self.pending_in: tuple[str, str] | None = None  # the LocalQueue that counts it pending
        self.holds_in: tuple[str, str] | None = None  # the LocalQueue that counts its reservation

    def rebind(self, wl: Workload) -> None:
        """Track ``wl``, a new version of the same Workload: the one way ``wl`` changes, so that
        the attributes copied from it stay true."""
        self.wl = wl
        self.priority = wl.priority
        self.uid = wl.uid

    # The Candidate protocol of engine.preemption: ``key``, ``priority`` and ``uid`` are plain
    # attributes (:meth:`rebind`).
    @property
    def timestamp(self) -> float:
        return self.order[1]


def queue_order(wl: Workload, timestamp: float) -> OrderKey:
    return OrderKey(-wl.priority, timestamp, wl.uid)


EVICTION = "Eviction"
CREATION = "Creation"
REQUEUING_TIMESTAMPS = (EVICTION, CREATION)
"""``waitForPodsReady.requeuingStrategy.timestamp``."""


def queue_timestamp(wl: Workload, requeuing_timestamp: str = EVICTION) -> float:
    """Kueue's queue-order timestamp (``Ordering.GetQueueOrderTimestamp``): the eviction time
    after an eviction by an admission check, or by ``waitForPodsReady``'s timeout when its
    ``requeuingStrategy.timestamp`` is Eviction (the default); else the creation time."""
    evicted = wl.conditions.get("Evicted")
    if evicted is None or evicted.status != "True":
        return wl.created
    if evicted.reason == "AdmissionCheck":
        return evicted.last_transition
    if evicted.reason == "PodsReadyTimeout" and requeuing_timestamp == EVICTION:
        return evicted.last_transition
    return wl.created


def scheduling_shape(wl: Workload) -> Hashable:
    shape = (
        wl.priority,
        tuple(
            (
                ps.name,
                count,
                ps.min_count,
                tuple(sorted(ps.requests.items())),
                tuple(sorted(ps.node_selector.items())),
                ps.affinity_terms,
                ps.tolerations,
                ps.group_name,
            )
            for ps, count in zip(wl.pod_sets, wl.wanted_counts(), strict=True)
        ),
    )
    # A slice replacing another needs only the delta: it never waits for its peers' reason.
    return shape if wl.replaces is None else (*shape, wl.replaces)


def charge_of(wl: Workload) -> tuple[str, dict[FlavorResource, int], frozenset[str]] | None:
    """Usage a Workload's ``status.admission`` charges, less its reclaimable pods (Kueue's
    ``totalRequestsFromAdmission``): a pod set charges for its admitted count, or for fewer pods
    when its ``spec`` count less its reclaimable pods is lower — an elastic workload scaled down
    in place gives the difference back."""
    admission = wl.admission
    if admission is None:
        return None
    usage: dict[FlavorResource, int] = {}
    flavors: set[str] = set()
    spec_counts = {ps.name: ps.count for ps in wl.pod_sets}
    for psa in admission.pod_set_assignments:
        count = psa.count
        wanted = spec_counts.get(psa.name, count)
        active = min(count, wanted - min(wl.reclaimable.get(psa.name, 0), wanted))
        for res, total in psa.resource_usage.items():
            flavor = psa.flavors.get(res)
            if flavor is None:
                continue
            flavors.add(flavor)
            value = total if count == 0 or active == count else total // count * max(active, 0)
            if res == "pods":
                value = max(active, 0) * MILLI
            fr = FlavorResource(flavor, res)
            usage[fr] = usage.get(fr, 0) + value
    return admission.cluster_queue, usage, frozenset(flavors)
