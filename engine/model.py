"""Typed, immutable forms of the Kueue objects the engine schedules with.

They are what :mod:`kadmit.engine.parse` makes of the API dicts: names resolved, defaults applied,
quantities in integer milli-units (:mod:`kadmit.engine.quantity`). Keys of quota maps are
``(flavor, resource)`` pairs, written ``FlavorResource``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, NamedTuple

from kadmit.engine.adjustments import ResourceAdjustments
from kadmit.engine.limit_ranges import LIMIT_RANGE_UNSATISFIED
from kadmit.engine.reasons import INVALID_RESOURCES

Obj = dict[str, Any]
"""An API object, or a part of one, as JSON has it: what the engine writes back (conditions,
``status.admission``, queue status). What it reads is typed ``Mapping[str, Any]``, read-only."""


class FlavorResource(NamedTuple):
    """A key of the quota maps. A named tuple, not a bare one, for the compiled engine: mypyc
    unpacks a bare ``tuple[str, str]`` into its fields wherever it is typed so, and builds a new
    tuple (and hashes it anew) at each lookup with it; a named tuple stays the object it is. Equal
    to, and hashed as, the bare ``(flavor, resource)``."""

    flavor: str
    resource: str


class WorkloadKey(NamedTuple):
    """``(namespace, name)`` of a Workload; a named tuple for the reason :class:`FlavorResource`
    is one. Equal to, and hashed as, the bare pair."""

    namespace: str
    name: str

# Enumerations, spelled as Kueue spells them.
STRICT_FIFO = "StrictFIFO"
BEST_EFFORT_FIFO = "BestEffortFIFO"
STOP_NONE = "None"
HOLD = "Hold"
HOLD_AND_DRAIN = "HoldAndDrain"
NEVER = "Never"
LOWER_PRIORITY = "LowerPriority"
LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
ANY = "Any"
MAY_STOP_SEARCH = "MayStopSearch"
TRY_NEXT_FLAVOR = "TryNextFlavor"
BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str

    def tolerates(self, taint: Taint) -> bool:
        """Kubernetes' ``Toleration.ToleratesTaint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(frozen=True, slots=True)
class Requirement:
    """One ``matchExpressions`` entry (label selector or node selector term)."""

    key: str
    operator: str
    values: tuple[str, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        op = self.operator
        if op == "In":
            return present and labels[self.key] in self.values
        if op == "NotIn":
            return not present or labels[self.key] not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt"):
            if not present:
                return False
            try:
                have, want = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return have > want if op == "Gt" else have < want
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector``, as :func:`kadmit.engine.parse.label_selector` reads it: the one
    label matcher in kadmit (ClusterQueues' and the Configuration's namespace selectors)."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        return all(req.matches(labels) for req in self.match_expressions)


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    name: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: str
    resources: tuple[ResourceQuota, ...]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    when_can_borrow: str = MAY_STOP_SEARCH
    when_can_preempt: str = TRY_NEXT_FLAVOR
    preference: str | None = None


@dataclass(frozen=True, slots=True)
class PreemptionPolicy:
    reclaim_within_cohort: str = NEVER
    within_cluster_queue: str = NEVER
    borrow_within_cohort: str = NEVER
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class AdmissionCheckRule:
    name: str
    on_flavors: frozenset[str] = frozenset()

    def applies_to(self, flavors: set[str] | frozenset[str]) -> bool:
        return not self.on_flavors or not self.on_flavors.isdisjoint(flavors)


@dataclass(frozen=True, slots=True)
class ConcurrentAdmissionPolicy:
    """``spec.concurrentAdmissionPolicy.migration`` (see :mod:`kadmit.engine.concurrent_admission`)."""

    mode: str = "TryPreferredFlavors"
    last_acceptable_flavor: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: str
    cohort: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    namespace_selector: LabelSelector | None = None
    queueing_strategy: str = BEST_EFFORT_FIFO
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    preemption: PreemptionPolicy = PreemptionPolicy()
    admission_checks: tuple[AdmissionCheckRule, ...] = ()
    stop_policy: str = STOP_NONE
    fair_sharing_weight: Fraction = Fraction(1)
    terminating: bool = False
    admission_fair_sharing: bool = False
    """``spec.admissionScope.admissionMode`` is UsageBasedAdmissionFairSharing."""
    concurrent_admission: ConcurrentAdmissionPolicy | None = None
    """``spec.concurrentAdmissionPolicy`` (honoured with the ConcurrentAdmission feature gate)."""


@dataclass(frozen=True, slots=True)
class Cohort:
    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_sharing_weight: Fraction = Fraction(1)


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: str = STOP_NONE
    fair_sharing_weight: Fraction = Fraction(1)
    """``spec.fairSharing.weight``: Admission Fair Sharing divides its usage by it."""


@dataclass(frozen=True, slots=True)
class WorkloadPriorityClass:
    name: str
    value: int


@dataclass(frozen=True, slots=True)
class AdmissionCheck:
    name: str
    controller_name: str
    active: bool


@dataclass(frozen=True, slots=True)
class PodSet:
    """A pod set as the scheduler sees it: per-pod requests and placement constraints."""

    name: str
    count: int
    min_count: int | None
    requests: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity_terms: tuple[tuple[Requirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    invalid_resources: tuple[str, ...] = ()
    """Kueue's ``ValidateResources`` errors: each container that requests more than its limit."""
    unsatisfied_limits: tuple[str, ...] = ()
    """Kueue's ``ValidateLimitRange`` errors: each container, or the pod, above a LimitRange's
    max or below its min."""
    group_name: str | None = None
    """``topologyRequest.podSetGroupName``: pod sets of one group get their flavors together."""


@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    """One entry of ``status.admission.podSetAssignments``."""

    name: str
    flavors: Mapping[str, str]
    resource_usage: Mapping[str, int]
    count: int


@dataclass(frozen=True, slots=True)
class Admission:
    cluster_queue: str
    pod_set_assignments: tuple[PodSetAssignment, ...]


@dataclass(frozen=True, slots=True)
class CheckState:
    name: str
    state: str
    message: str = ""
    last_transition: float = 0.0
    requeue_after_seconds: int | None = None


@dataclass(frozen=True, slots=True)
class Condition:
    status: str
    reason: str
    message: str
    last_transition: float


def _aggregate(what: str, errors: list[str]) -> str:
    """Kueue's ``fmt.Errorf("%s: %w", what, errs.ToAggregate())``, or "" without errors."""
    if not errors:
        return ""
    unique = list(dict.fromkeys(errors))
    return f"{what}: {unique[0] if len(unique) == 1 else '[' + ', '.join(unique) + ']'}"


@dataclass(frozen=True, slots=True)
class Workload:
    namespace: str
    name: str
    uid: str
    queue_name: str
    priority: int
    priority_class: str | None
    active: bool
    created: float
    pod_sets: tuple[PodSet, ...]
    conditions: Mapping[str, Condition] = field(default_factory=dict)
    admission: Admission | None = None
    check_states: tuple[CheckState, ...] = ()
    requeue_at: float | None = None
    reclaimable: Mapping[str, int] = field(default_factory=dict)
    parent_uid: str = ""
    """ConcurrentAdmission: the uid of the parent Workload that owns this variant ("": none)."""
    allowed_flavors: tuple[str, ...] | None = None
    """ConcurrentAdmission: the flavors a variant may be assigned (None: any)."""
    parent_label: bool = False
    """ConcurrentAdmission: labelled as a parent of variants."""
    preemption_gated: bool = False
    """A preemption gate of ``spec.preemptionGates`` is not Open in ``status.preemptionGates``
    (Kueue's ``HasClosedPreemptionGate``): it may not preempt."""
    job_uid: str = ""
    generation: int | None = None
    """``metadata.generation``: the spec (its pod sets) is unchanged while it is."""
    replaces: WorkloadKey | None = None
    """The Workload slice this one replaces (Kueue's ``kueue.x-k8s.io/workload-slice-replacement-for``
    annotation, ``namespace/name``): an elastic job scaled up."""
    adjustments: ResourceAdjustments | None = field(default=None, repr=False, compare=False)
    """What its pod sets' requests were read under: LimitRange defaults, RuntimeClass
    overheads, the Configuration's ``resources`` rules."""

    key: WorkloadKey = field(init=False, repr=False, compare=False)
    """``(namespace, name)``, made once: the engine looks Workloads up by it all the time."""
    invalid_resources: str = field(init=False, repr=False, compare=False)
    """Why it may not be admitted as it is, as Kueue's ``ValidateAdmissibility`` words it, or "";
    made once: a container requests more than its limit (``ValidateResources``), or else a
    container or a pod breaks a LimitRange of the namespace (``ValidateLimitRange``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", WorkloadKey(self.namespace, self.name))
        invalid = ""
        if any(ps.invalid_resources or ps.unsatisfied_limits for ps in self.pod_sets):
            sets = self.pod_sets
            invalid = _aggregate(INVALID_RESOURCES, [e for ps in sets for e in ps.invalid_resources])
            if not invalid:
                unsatisfied = [e for ps in sets for e in ps.unsatisfied_limits]
                invalid = _aggregate(LIMIT_RANGE_UNSATISFIED, unsatisfied)
        object.__setattr__(self, "invalid_resources", invalid)

    def wanted_counts(self) -> list[int]:
        """Each pod set's count less its reclaimable pods (``status.reclaimablePods``): what the
        Workload asks quota for when it is assigned flavors (Kueue's ``totalRequestsFromPodSets``),
        so a requeued job whose pods partly finished asks only for the rest."""
        reclaimable = self.reclaimable
        if not reclaimable:
            return [ps.count for ps in self.pod_sets]
        return [ps.count - min(reclaimable.get(ps.name, 0), ps.count) for ps in self.pod_sets]

    def condition_true(self, kind: str) -> bool:
        cond = self.conditions.get(kind)
        return cond is not None and cond.status == "True"

    @property
    def finished(self) -> bool:
        return self.condition_true("Finished")

    @property
    def on_hold(self) -> bool:
        """Kueue's ``IsOnHold``: QuotaReserved=False with reason OnHold; kept, never queued."""
        cond = self.conditions.get("QuotaReserved")
        return cond is not None and cond.status == "False" and cond.reason == "OnHold"

    @property
    def holds_quota(self) -> bool:
        """Kueue's ``HasActiveQuotaReservation``: charged against its ClusterQueue."""
        return (
            self.admission is not None
            and self.condition_true("QuotaReserved")
            and not self.finished
            and self.active
        )
