"""What one scheduling cycle decides, as plain data a controller writes to the API.

Every decision carries the Workload key and ready-to-write dicts (``status.admission`` in the
exact shape Kueue writes, and the conditions Kueue would set), so the controller never has to
re-derive scheduling semantics.

The decisions made for every head (:class:`Reservation`, :class:`Pending`) write their
``__init__`` out: in the compiled engine (docs/engine.md) the one ``dataclass`` generates stays
interpreted Python, about 15 times as slow as a compiled one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kadmit.engine.model import Obj, Workload, WorkloadKey
from kadmit.engine.quantity import format_milli
from kadmit.engine.timestamps import format_time


def condition(kind: str, status: str, reason: str, message: str, now: float) -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": format_time(now),
    }


@dataclass(frozen=True, slots=True, init=False)
class Reservation:
    """Quota reserved (and assumed in the engine): write ``status.admission`` and conditions.

    ``admission_checks`` are the checks that apply to the assigned flavors; the controller adds
    them as ``Pending``. ``admitted`` is True when none apply (Admitted=True at once).
    """

    workload: WorkloadKey
    cluster_queue: str
    admission: Obj
    conditions: list[Obj]
    admission_checks: list[str]
    admitted: bool
    borrowing: bool
    replaced: WorkloadKey | None
    """The Workload slice this reservation replaces (an elastic job scaled up): once the
    reservation is written, finish it with reason ``WorkloadSliceReplaced``; the engine has
    released its quota already (and gives it back on ``forget``)."""

    def __init__(
        self,
        workload: WorkloadKey,
        cluster_queue: str,
        admission: Obj,
        conditions: list[Obj],
        admission_checks: list[str],
        admitted: bool,
        borrowing: bool,
        replaced: WorkloadKey | None = None,
    ) -> None:
        _set = object.__setattr__
        _set(self, "workload", workload)
        _set(self, "cluster_queue", cluster_queue)
        _set(self, "admission", admission)
        _set(self, "conditions", conditions)
        _set(self, "admission_checks", admission_checks)
        _set(self, "admitted", admitted)
        _set(self, "borrowing", borrowing)
        _set(self, "replaced", replaced)


@dataclass(frozen=True, slots=True)
class Preemption:
    """Evict ``victim`` (Evicted=True/Preempted, Preempted=True/``reason``) for ``preemptor``."""

    victim: WorkloadKey
    preemptor: WorkloadKey
    reason: str
    message: str
    conditions: list[Obj]


@dataclass(frozen=True, slots=True, init=False)
class Pending:
    """A head left pending: ``QuotaReserved=False`` with ``reason`` / ``message``; ``read`` is
    the Workload as the engine read it, for :meth:`resource_requests`."""

    workload: WorkloadKey
    cluster_queue: str | None
    reason: str
    message: str
    conditions: list[Obj]
    read: Workload | None

    def __init__(
        self,
        workload: WorkloadKey,
        cluster_queue: str | None,
        reason: str,
        message: str,
        conditions: list[Obj],
        read: Workload | None = None,
    ) -> None:
        _set = object.__setattr__
        _set(self, "workload", workload)
        _set(self, "cluster_queue", cluster_queue)
        _set(self, "reason", reason)
        _set(self, "message", message)
        _set(self, "conditions", conditions)
        _set(self, "read", read)

    def resource_requests(self) -> list[Obj] | None:
        """``status.resourceRequests`` as Kueue writes it for a Workload it left pending: per pod
        set, what all its pods ask for as the scheduler counts it (LimitRange defaults,
        RuntimeClass overhead, the Configuration's transformations; reclaimable pods left out).
        Made only when asked (the writer asks), not for every decision."""
        wl = self.read
        if wl is None:
            return None
        return [
            {
                "name": ps.name,
                "resources": {name: format_milli(name, value * count) for name, value in ps.requests.items()},
            }
            for ps, count in zip(wl.pod_sets, wl.wanted_counts(), strict=True)
        ]


@dataclass(frozen=True, slots=True)
class ReservationCleared:
    """A stopped queue takes back a reservation that was not Admitted yet: set
    ``status.admission`` to null and ``QuotaReserved=False`` (the engine freed the quota)."""

    workload: WorkloadKey
    reason: str
    message: str
    conditions: list[Obj]


@dataclass(frozen=True, slots=True)
class Admitted:
    """Every admission check is Ready: set ``Admitted=True``."""

    workload: WorkloadKey
    conditions: list[Obj]


@dataclass(frozen=True, slots=True)
class Eviction:
    """Evict (a Retry check, or a draining stop policy); requeue not before ``requeue_at``."""

    workload: WorkloadKey
    reason: str
    message: str
    requeue_at: float | None
    conditions: list[Obj]


@dataclass(frozen=True, slots=True)
class Deactivation:
    """A Rejected check: set ``DeactivationTarget=True`` and then ``spec.active=false``."""

    workload: WorkloadKey
    message: str
    conditions: list[Obj]


@dataclass(frozen=True, slots=True)
class Requeue:
    """The backoff of an evicted workload is over: set ``Requeued=True``."""

    workload: WorkloadKey
    reason: str
    conditions: list[Obj]


@dataclass(slots=True)
class Decisions:
    """The outcome of :meth:`engine.Engine.schedule`."""

    reservations: list[Reservation] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    admitted: list[Admitted] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    deactivations: list[Deactivation] = field(default_factory=list)
    requeues: list[Requeue] = field(default_factory=list)
    cleared: list[ReservationCleared] = field(default_factory=list)
    attempts_success: int = 0
    """Heads that got quota (Kueue's ``kueue_admission_attempts_total{result="success"}``)."""
    attempts_inadmissible: int = 0
    """Heads evaluated and left pending or preempting (``result="inadmissible"``)."""
    more: bool = False
    """The cycle stopped at its budget (``Engine(heads_per_call=...)``) with more to decide: call
    ``schedule`` again at once (after letting the event loop run); the calls together decide
    what one unbounded call would have."""

    def __bool__(self) -> bool:
        return bool(self.reservations or self.preemptions or self.pending or self.admitted
                    or self.evictions or self.deactivations or self.requeues or self.cleared)
