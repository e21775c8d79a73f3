"""API dicts (``kueue.x-k8s.io/v1beta1`` or ``v1beta2``, as users write them) → model types.

Defaults are Kueue's; invalid objects raise :class:`kadmit.engine.errors.InvalidObject` naming the field
path. The webhook-level rules that change scheduling (flavor/resource order and uniqueness,
limits only with a cohort, ``lendingLimit ≤ nominalQuota``, ``preference`` only with two
``TryNextFlavor`` policies, ``reclaimWithinCohort: Never`` with ``borrowWithinCohort``) are
enforced here so that the engine never works on a queue Kueue would have refused.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from datetime import datetime
from fractions import Fraction
from typing import Any, TypeVar

from kadmit.engine.adjustments import ResourceAdjustments
from kadmit.engine.admission_fair_sharing import ADMISSION_MODES, NO_ADMISSION_FAIR_SHARING, USAGE_BASED
from kadmit.engine.concurrent_admission import (
    MIGRATION_MODES,
    TRY_PREFERRED_FLAVORS,
    has_closed_preemption_gate,
    read_variant,
)
from kadmit.engine.errors import InvalidObject
from kadmit.engine.limit_ranges import LIMIT_TYPES, LimitRangeItem, violations
from kadmit.engine.model import (
    ANY,
    BEST_EFFORT_FIFO,
    BORROWING_OVER_PREEMPTION,
    HOLD,
    HOLD_AND_DRAIN,
    LOWER_OR_NEWER_EQUAL_PRIORITY,
    LOWER_PRIORITY,
    MAY_STOP_SEARCH,
    NEVER,
    PREEMPTION_OVER_BORROWING,
    STOP_NONE,
    STRICT_FIFO,
    TRY_NEXT_FLAVOR,
    Admission,
    AdmissionCheck,
    AdmissionCheckRule,
    CheckState,
    ClusterQueue,
    Cohort,
    ConcurrentAdmissionPolicy,
    Condition,
    FlavorFungibility,
    FlavorQuotas,
    LabelSelector,
    LocalQueue,
    PodSet,
    PodSetAssignment,
    PreemptionPolicy,
    Requirement,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Taint,
    Toleration,
    Workload,
    WorkloadKey,
    WorkloadPriorityClass,
)
from kadmit.engine.quantity import QuantityError, effective_pod_amounts, parse_exact, to_milli, to_nano
from kadmit.engine.reasons import REQUESTS_EXCEED_LIMITS
from kadmit.engine.timestamps import parse_time

GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta1", "v1beta2")
T = TypeVar("T")
H = TypeVar("H", bound=Hashable)
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class _Reader:
    """Reads fields of one object, remembering the kind and name for error messages."""

    def __init__(self, obj: object, kind: str) -> None:
        if not isinstance(obj, Mapping):
            raise InvalidObject(kind, "", "", "the object is not a mapping")
        self.kind = kind
        meta = obj.get("metadata") or {}
        self.name = str(meta.get("name", "")) if isinstance(meta, Mapping) else ""

    def fail(self, path: str, message: str) -> InvalidObject:
        return InvalidObject(self.kind, self.name, path, message)

    def mapping(self, value: object, path: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(path, "must be an object")
        return value

    def sequence(self, value: object, path: str) -> Sequence[Any]:
        if value is None:
            return []
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise self.fail(path, "must be a list")
        return value

    def string(self, value: object, path: str, default: str | None = None) -> str:
        if value is None:
            if default is None:
                raise self.fail(path, "Required value")
            return default
        if not isinstance(value, str):
            raise self.fail(path, f"must be a string, not {value!r}")
        return value

    def name_ref(self, value: object, path: str) -> str:
        text = self.string(value, path)
        if len(text) > 253 or not _DNS_SUBDOMAIN.match(text):
            raise self.fail(path, f"{text!r} is not a valid name (a lowercase DNS-1123 subdomain)")
        return text

    def integer(self, value: object, path: str, minimum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"must be an integer, not {value!r}")
        if minimum is not None and value < minimum:
            raise self.fail(path, f"must be greater than or equal to {minimum}")
        return value

    def enum(self, value: object, path: str, allowed: Sequence[str], default: str) -> str:
        if value is None:
            return default
        if value not in allowed:
            raise self.fail(path, f"Unsupported value: {value!r}: supported values: {', '.join(allowed)}")
        return str(value)

    def time(self, value: object, path: str) -> float | None:
        """POSIX seconds of an optional time field."""
        if value is None:
            return None
        try:
            return timestamp(value)
        except ValueError as exc:
            raise self.fail(path, str(exc)) from None

    def quantity(self, resource: str, value: object, path: str) -> int:
        try:
            milli = to_milli(resource, value)
        except QuantityError as exc:
            raise self.fail(path, str(exc)) from None
        if milli < 0:
            raise self.fail(path, "must be greater than or equal to 0")
        return milli

    def unique(self, value: H, seen: set[H], path: str, shown: str | None = None) -> None:
        """Refuse ``value`` if it was met before in this object (Kubernetes' "Duplicate value")."""
        if value in seen:
            raise self.fail(path, f"Duplicate value: {shown or repr(value)}")
        seen.add(value)

    def each(self, items: Sequence[Any], path: str, read: Callable[[Any, str], T]) -> tuple[T, ...]:
        return tuple(read(item, f"{path}[{index}]") for index, item in enumerate(items))


def api_version(obj: Mapping[str, Any], kind: str) -> str:
    """The version of a Kueue object; other groups or versions are refused."""
    text = str(obj.get("apiVersion", ""))
    group, _, version = text.partition("/")
    if group != GROUP or version not in VERSIONS:
        name = str((obj.get("metadata") or {}).get("name", ""))
        raise InvalidObject(kind, name, "apiVersion", f"{text!r} is not {GROUP}/v1beta1 or {GROUP}/v1beta2")
    return version


def timestamp(value: object) -> float:
    """POSIX seconds of a time field: RFC 3339 text as the API writes it (``2026-01-02T03:04:05Z``),
    or, from tests and in-process callers, POSIX seconds already or a ``datetime``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, datetime):
        return value.timestamp()
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a time")
    return parse_time(value)


class _ObjectReader(_Reader):
    """Reads one API object, with what every kind starts from at hand: ``meta``, the checked
    ``object_name``, ``spec`` and, for a Kueue kind, its ``version`` (others are refused)."""

    def __init__(self, obj: object, kind: str, kueue: bool = True) -> None:
        super().__init__(obj, kind)
        assert isinstance(obj, Mapping)  # or _Reader refused it
        self.version = api_version(obj, kind) if kueue else ""
        self.meta = self.mapping(obj.get("metadata"), "metadata")
        self.object_name = self.name_ref(self.meta.get("name"), "metadata.name")
        self.spec = self.mapping(obj.get("spec"), "spec")


# -- ResourceFlavor -----------------------------------------------------------------------------


def _taint(r: _Reader, raw: Any, path: str) -> Taint:
    m = r.mapping(raw, path)
    effect = r.enum(m.get("effect"), f"{path}.effect", ("NoSchedule", "PreferNoSchedule", "NoExecute"), "")
    if not effect:
        raise r.fail(f"{path}.effect", "Required value")
    return Taint(r.string(m.get("key"), f"{path}.key"), r.string(m.get("value"), f"{path}.value", ""), effect)


def _toleration(r: _Reader, raw: Any, path: str) -> Toleration:
    m = r.mapping(raw, path)
    key = r.string(m.get("key"), f"{path}.key", "")
    operator = r.enum(m.get("operator"), f"{path}.operator", ("Equal", "Exists"), "Equal")
    value = r.string(m.get("value"), f"{path}.value", "")
    effect = r.enum(
        m.get("effect"), f"{path}.effect", ("NoSchedule", "PreferNoSchedule", "NoExecute", ""), ""
    )
    if not key and operator != "Exists":
        raise r.fail(f"{path}.operator", "must be Exists when key is empty")
    if operator == "Exists" and value:
        raise r.fail(f"{path}.value", "must be empty when operator is Exists")
    return Toleration(key, operator, value, effect)


def _string_map(r: _Reader, raw: object, path: str) -> dict[str, str]:
    return {str(k): r.string(v, f"{path}.{k}") for k, v in r.mapping(raw, path).items()}


def resource_flavor(obj: Mapping[str, Any]) -> ResourceFlavor:
    r = _ObjectReader(obj, "ResourceFlavor")
    name, spec = r.object_name, r.spec
    labels = _string_map(r, spec.get("nodeLabels"), "spec.nodeLabels")
    if len(labels) > 8:
        raise r.fail("spec.nodeLabels", "must have at most 8 items")
    taints = r.each(
        r.sequence(spec.get("nodeTaints"), "spec.nodeTaints"), "spec.nodeTaints", lambda t, p: _taint(r, t, p)
    )
    seen: set[tuple[str, str]] = set()
    for index, taint in enumerate(taints):
        r.unique(
            (taint.key, taint.effect),
            seen,
            f"spec.nodeTaints[{index}]",
            f"key {taint.key!r} effect {taint.effect}",
        )
    tolerations = r.each(
        r.sequence(spec.get("tolerations"), "spec.tolerations"),
        "spec.tolerations",
        lambda t, p: _toleration(r, t, p),
    )
    topology = spec.get("topologyName")
    if topology is not None and not labels:
        raise r.fail("spec.nodeLabels", "at least one nodeLabel is required when topologyName is set")
    return ResourceFlavor(
        name,
        labels,
        taints,
        tolerations,
        r.string(topology, "spec.topologyName") if topology is not None else None,
    )


# -- resource groups (ClusterQueue and Cohort) ----------------------------------------------------


def _resource_groups(r: _Reader, raw: object, has_parent: bool, is_cohort: bool) -> tuple[ResourceGroup, ...]:
    groups = r.sequence(raw, "spec.resourceGroups")
    if len(groups) > 16:
        raise r.fail("spec.resourceGroups", "must have at most 16 items")
    missing_parent = None if has_parent else "parent" if is_cohort else "cohort"
    seen_resources: set[str] = set()  # a resource and a flavor belong to one group of the queue
    seen_flavors: set[str] = set()

    def group(raw: object, path: str) -> ResourceGroup:
        g = r.mapping(raw, path)
        covered = r.each(
            r.sequence(g.get("coveredResources"), f"{path}.coveredResources"),
            f"{path}.coveredResources",
            r.string,
        )
        if not covered:
            raise r.fail(f"{path}.coveredResources", "Required value: at least one resource")
        for index, resource in enumerate(covered):
            r.unique(resource, seen_resources, f"{path}.coveredResources[{index}]")
        flavors = r.sequence(g.get("flavors"), f"{path}.flavors")
        if not flavors:
            raise r.fail(f"{path}.flavors", "Required value: at least one flavor")
        return ResourceGroup(covered, r.each(flavors, f"{path}.flavors", lambda f, p: flavor(f, p, covered)))

    def flavor(raw: object, path: str, covered: tuple[str, ...]) -> FlavorQuotas:
        f = r.mapping(raw, path)
        name = r.name_ref(f.get("name"), f"{path}.name")
        r.unique(name, seen_flavors, f"{path}.name")
        resources = r.sequence(f.get("resources"), f"{path}.resources")
        if len(resources) != len(covered):
            raise r.fail(f"{path}.resources", "flavor must list the same resources as coveredResources")
        quotas = tuple(
            quota(q, f"{path}.resources[{index}]", resource)
            for index, (q, resource) in enumerate(zip(resources, covered, strict=True))
        )
        return FlavorQuotas(name, quotas)

    def quota(raw: object, path: str, resource: str) -> ResourceQuota:
        q = r.mapping(raw, path)
        name = r.string(q.get("name"), f"{path}.name")
        if name != resource:
            raise r.fail(f"{path}.name", f"must be {resource!r} (same order as coveredResources)")
        nominal = r.quantity(name, q.get("nominalQuota", 0), f"{path}.nominalQuota")
        borrowing = _limit(r, q, name, path, "borrowingLimit", missing_parent)
        lending = _limit(r, q, name, path, "lendingLimit", missing_parent)
        if lending is not None and not is_cohort and lending > nominal:
            raise r.fail(f"{path}.lendingLimit", "must be less than or equal to nominalQuota")
        return ResourceQuota(name, nominal, borrowing, lending)

    return r.each(groups, "spec.resourceGroups", group)


def _limit(
    r: _Reader, quota: Mapping[str, Any], resource: str, path: str, field: str, missing_parent: str | None
) -> int | None:
    """``borrowingLimit`` or ``lendingLimit``: there is nothing to borrow from or lend to without a
    parent (``missing_parent`` names it: a ClusterQueue's cohort, a Cohort's parent)."""
    if quota.get(field) is None:
        return None
    if missing_parent is not None:
        raise r.fail(f"{path}.{field}", f"must be nil when {missing_parent} is empty")
    return r.quantity(resource, quota[field], f"{path}.{field}")


def _weight(r: _Reader, spec: Mapping[str, Any]) -> Fraction:
    fs = r.mapping(spec.get("fairSharing"), "spec.fairSharing")
    if fs.get("weight") is None:
        return Fraction(1)
    try:
        weight = parse_exact(fs["weight"])
    except QuantityError as exc:
        raise r.fail("spec.fairSharing.weight", str(exc)) from None
    if weight < 0 or (0 < weight <= Fraction(1, 10**9)):
        raise r.fail("spec.fairSharing.weight", "must be 0 or greater than 1e-9")
    return weight


LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_SELECTOR_OPERATORS = (*LABEL_SELECTOR_OPERATORS, "Gt", "Lt")


def _requirement(r: _Reader, raw: object, path: str, operators: Sequence[str]) -> Requirement:
    """One ``matchExpressions`` entry, of a label selector or a node selector term."""
    m = r.mapping(raw, path)
    key = r.string(m.get("key"), f"{path}.key")
    operator = m.get("operator")
    if operator not in operators:
        raise r.fail(f"{path}.operator", f"selector key {key}: unknown operator {operator!r}")
    values = tuple(
        r.string(v, f"{path}.values[{j}]")
        for j, v in enumerate(r.sequence(m.get("values"), f"{path}.values"))
    )
    return Requirement(key, str(operator), values)


def _label_selector(r: _Reader, raw: object, path: str) -> LabelSelector:
    prefix = f"{path}." if path else ""
    m = r.mapping(raw, path)
    labels = _string_map(r, m.get("matchLabels"), f"{prefix}matchLabels")
    requirements = []
    for i, e in enumerate(r.sequence(m.get("matchExpressions"), f"{prefix}matchExpressions")):
        req = _requirement(r, e, f"{prefix}matchExpressions[{i}]", LABEL_SELECTOR_OPERATORS)
        if req.operator in ("In", "NotIn") and not req.values:
            raise r.fail(
                f"{prefix}matchExpressions[{i}].values",
                f"selector key {req.key}: operator {req.operator} needs values",
            )
        if req.operator in ("Exists", "DoesNotExist") and req.values:
            raise r.fail(
                f"{prefix}matchExpressions[{i}].values",
                f"selector key {req.key}: operator {req.operator} takes no values",
            )
        requirements.append(req)
    return LabelSelector(labels, tuple(requirements))


def label_selector(raw: Mapping[str, Any], kind: str = "LabelSelector", path: str = "") -> LabelSelector:
    """A ``metav1.LabelSelector`` as the API writes it (``{}`` selects everything), for matching
    with :meth:`LabelSelector.matches`: the one reading of selectors in kadmit. One that cannot be
    evaluated raises :class:`InvalidObject`; ``kind`` and ``path`` say where it sits."""
    return _label_selector(_Reader({}, kind), raw, path)


# -- ClusterQueue -------------------------------------------------------------------------------


def cluster_queue(obj: Mapping[str, Any]) -> ClusterQueue:
    r = _ObjectReader(obj, "ClusterQueue")
    version, name, spec = r.version, r.object_name, r.spec
    cohort_field = "cohortName" if version == "v1beta2" else "cohort"
    other = "cohort" if version == "v1beta2" else "cohortName"
    if spec.get(other) is not None:
        raise r.fail(f"spec.{other}", f"unknown field in {version}; use spec.{cohort_field}")
    cohort = spec.get(cohort_field)
    cohort_name = r.name_ref(cohort, f"spec.{cohort_field}") if cohort else None
    groups = _resource_groups(r, spec.get("resourceGroups"), cohort_name is not None, False)
    selector = (
        None
        if spec.get("namespaceSelector") is None
        else _label_selector(r, spec["namespaceSelector"], "spec.namespaceSelector")
    )
    strategy = r.enum(
        spec.get("queueingStrategy"),
        "spec.queueingStrategy",
        (STRICT_FIFO, BEST_EFFORT_FIFO),
        BEST_EFFORT_FIFO,
    )
    fraw = r.mapping(spec.get("flavorFungibility"), "spec.flavorFungibility")
    borrow_values = (MAY_STOP_SEARCH, TRY_NEXT_FLAVOR) + (("Borrow",) if version == "v1beta1" else ())
    preempt_values = (MAY_STOP_SEARCH, TRY_NEXT_FLAVOR) + (("Preempt",) if version == "v1beta1" else ())
    when_borrow = r.enum(
        fraw.get("whenCanBorrow"), "spec.flavorFungibility.whenCanBorrow", borrow_values, MAY_STOP_SEARCH
    )
    when_preempt = r.enum(
        fraw.get("whenCanPreempt"), "spec.flavorFungibility.whenCanPreempt", preempt_values, TRY_NEXT_FLAVOR
    )
    when_borrow = MAY_STOP_SEARCH if when_borrow == "Borrow" else when_borrow
    when_preempt = MAY_STOP_SEARCH if when_preempt == "Preempt" else when_preempt
    preference = fraw.get("preference")
    if preference is not None:
        preference = r.enum(
            preference,
            "spec.flavorFungibility.preference",
            (BORROWING_OVER_PREEMPTION, PREEMPTION_OVER_BORROWING),
            BORROWING_OVER_PREEMPTION,
        )
        if when_borrow != TRY_NEXT_FLAVOR or when_preempt != TRY_NEXT_FLAVOR:
            raise r.fail(
                "spec.flavorFungibility.preference",
                "may only be set when whenCanBorrow and whenCanPreempt are both TryNextFlavor",
            )
    praw = r.mapping(spec.get("preemption"), "spec.preemption")
    reclaim = r.enum(
        praw.get("reclaimWithinCohort"),
        "spec.preemption.reclaimWithinCohort",
        (NEVER, LOWER_PRIORITY, ANY),
        NEVER,
    )
    within = r.enum(
        praw.get("withinClusterQueue"),
        "spec.preemption.withinClusterQueue",
        (NEVER, LOWER_PRIORITY, LOWER_OR_NEWER_EQUAL_PRIORITY),
        NEVER,
    )
    braw = r.mapping(praw.get("borrowWithinCohort"), "spec.preemption.borrowWithinCohort")
    borrow_policy = r.enum(
        braw.get("policy"), "spec.preemption.borrowWithinCohort.policy", (NEVER, LOWER_PRIORITY), NEVER
    )
    threshold = braw.get("maxPriorityThreshold")
    if threshold is not None:
        threshold = r.integer(threshold, "spec.preemption.borrowWithinCohort.maxPriorityThreshold")
    if reclaim == NEVER and borrow_policy != NEVER:
        raise r.fail("spec.preemption", "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
    checks = _cq_admission_checks(r, spec, version, {f.name for g in groups for f in g.flavors})
    stop = r.enum(spec.get("stopPolicy"), "spec.stopPolicy", (STOP_NONE, HOLD, HOLD_AND_DRAIN), STOP_NONE)
    return ClusterQueue(
        name=name,
        cohort=cohort_name,
        resource_groups=groups,
        namespace_selector=selector,
        queueing_strategy=strategy,
        flavor_fungibility=FlavorFungibility(when_borrow, when_preempt, preference),
        preemption=PreemptionPolicy(reclaim, within, borrow_policy, threshold),
        admission_checks=checks,
        stop_policy=stop,
        fair_sharing_weight=_weight(r, spec),
        terminating=r.meta.get("deletionTimestamp") is not None,
        admission_fair_sharing=_admission_mode(r, spec) == USAGE_BASED,
        concurrent_admission=_concurrent_admission(r, spec),
    )


def _concurrent_admission(r: _Reader, spec: Mapping[str, Any]) -> ConcurrentAdmissionPolicy | None:
    """``spec.concurrentAdmissionPolicy`` (v1beta2 only: v1beta1 has no such field)."""
    raw = spec.get("concurrentAdmissionPolicy")
    if raw is None:
        return None
    path = "spec.concurrentAdmissionPolicy.migration"
    migration = r.mapping(r.mapping(raw, "spec.concurrentAdmissionPolicy").get("migration"), path)
    mode = r.enum(migration.get("mode"), f"{path}.mode", MIGRATION_MODES, TRY_PREFERRED_FLAVORS)
    constraints = r.mapping(migration.get("constraints"), f"{path}.constraints")
    last = constraints.get("lastAcceptableFlavorName")
    if last is not None:
        last = r.name_ref(last, f"{path}.constraints.lastAcceptableFlavorName")
    return ConcurrentAdmissionPolicy(mode, last)


def _admission_mode(r: _Reader, spec: Mapping[str, Any]) -> str:
    scope = r.mapping(spec.get("admissionScope"), "spec.admissionScope")
    if not scope:
        return NO_ADMISSION_FAIR_SHARING
    if scope.get("admissionMode") is None:
        raise r.fail("spec.admissionScope.admissionMode", "Required value")
    return r.enum(scope["admissionMode"], "spec.admissionScope.admissionMode", ADMISSION_MODES, "")


def _cq_admission_checks(
    r: _Reader, spec: Mapping[str, Any], version: str, flavors: set[str]
) -> tuple[AdmissionCheckRule, ...]:
    if version == "v1beta1" and spec.get("admissionChecks"):
        names = r.sequence(spec["admissionChecks"], "spec.admissionChecks")
        return tuple(
            AdmissionCheckRule(r.string(n, f"spec.admissionChecks[{i}]")) for i, n in enumerate(names)
        )
    if version == "v1beta2" and spec.get("admissionChecks") is not None:
        raise r.fail("spec.admissionChecks", "removed in v1beta2; use spec.admissionChecksStrategy")
    strategy = r.mapping(spec.get("admissionChecksStrategy"), "spec.admissionChecksStrategy")
    rules = []
    seen: set[str] = set()
    path = "spec.admissionChecksStrategy.admissionChecks"
    for i, raw in enumerate(r.sequence(strategy.get("admissionChecks"), path)):
        m = r.mapping(raw, f"{path}[{i}]")
        name = r.string(m.get("name"), f"{path}[{i}].name")
        r.unique(name, seen, f"{path}[{i}].name")
        on = []
        for j, f in enumerate(r.sequence(m.get("onFlavors"), f"{path}[{i}].onFlavors")):
            flavor = r.string(f, f"{path}[{i}].onFlavors[{j}]")
            if flavor not in flavors:
                raise r.fail(
                    f"{path}[{i}].onFlavors[{j}]", f"{flavor!r} is not a flavor of this ClusterQueue"
                )
            on.append(flavor)
        rules.append(AdmissionCheckRule(name, frozenset(on)))
    return tuple(rules)


# -- Cohort, LocalQueue, WorkloadPriorityClass, AdmissionCheck ----------------------------------


def cohort(obj: Mapping[str, Any]) -> Cohort:
    r = _ObjectReader(obj, "Cohort")
    name, spec = r.object_name, r.spec
    parent = spec.get("parentName") or spec.get("parent")
    parent_name = r.name_ref(parent, "spec.parentName") if parent else None
    groups = _resource_groups(r, spec.get("resourceGroups"), parent_name is not None, True)
    return Cohort(name, parent_name, groups, _weight(r, spec))


def local_queue(obj: Mapping[str, Any]) -> LocalQueue:
    r = _ObjectReader(obj, "LocalQueue")
    name, spec = r.object_name, r.spec
    namespace = r.string(r.meta.get("namespace"), "metadata.namespace", "default")
    cq = r.name_ref(spec.get("clusterQueue"), "spec.clusterQueue")
    stop = r.enum(spec.get("stopPolicy"), "spec.stopPolicy", (STOP_NONE, HOLD, HOLD_AND_DRAIN), STOP_NONE)
    return LocalQueue(namespace, name, cq, stop, _weight(r, spec))


def local_queue_consumed(obj: Mapping[str, Any]) -> tuple[dict[str, int], float] | None:
    """``status.fairSharing.admissionFairSharingStatus`` of a LocalQueue: its consumed resources
    (nano-units) and their ``lastUpdate``; None when absent or unreadable (it is only a seed)."""
    status = obj.get("status")
    fair = status.get("fairSharing") if isinstance(status, Mapping) else None
    afs = fair.get("admissionFairSharingStatus") if isinstance(fair, Mapping) else None
    if not isinstance(afs, Mapping):
        return None
    consumed = afs.get("consumedResources") or {}
    last = afs.get("lastUpdate")
    if not isinstance(consumed, Mapping) or not isinstance(last, str):
        return None
    try:
        amounts = {str(k): to_nano(v) for k, v in consumed.items()}
        return amounts, parse_time(last)
    except (QuantityError, ValueError):
        return None


def workload_priority_class(obj: Mapping[str, Any]) -> WorkloadPriorityClass:
    r = _ObjectReader(obj, "WorkloadPriorityClass")
    name = r.object_name
    if obj.get("value") is None:
        raise r.fail("value", "Required value")
    value = r.integer(obj.get("value"), "value")
    if not -(2**31) <= value < 2**31:
        raise r.fail("value", "must fit in int32")
    return WorkloadPriorityClass(name, value)


def admission_check(obj: Mapping[str, Any]) -> AdmissionCheck:
    r = _ObjectReader(obj, "AdmissionCheck")
    name, spec = r.object_name, r.spec
    controller = r.string(spec.get("controllerName"), "spec.controllerName")
    if not 1 <= len(controller) <= 253:
        raise r.fail("spec.controllerName", "must be 1 to 253 characters")
    active = any(
        isinstance(c, Mapping) and c.get("type") == "Active" and c.get("status") == "True"
        for c in r.sequence(r.mapping(obj.get("status"), "status").get("conditions"), "status.conditions")
    )
    return AdmissionCheck(name, controller, active)


def namespace_labels(obj: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
    """Name and labels of a core/v1 Namespace (with the automatic ``kubernetes.io/metadata.name``)."""
    r = _ObjectReader(obj, "Namespace", kueue=False)
    name = r.object_name
    labels = _string_map(r, r.meta.get("labels"), "metadata.labels")
    labels.setdefault("kubernetes.io/metadata.name", name)
    return name, labels


def limit_range(obj: Mapping[str, Any]) -> tuple[str, str, tuple[LimitRangeItem, ...]]:
    """Namespace, name and items of a core/v1 LimitRange (its quantities checked)."""
    r = _ObjectReader(obj, "LimitRange", kueue=False)
    name = r.object_name
    namespace = r.string(r.meta.get("namespace"), "metadata.namespace", "default")
    items = []
    for i, raw in enumerate(r.sequence(r.spec.get("limits"), "spec.limits")):
        path = f"spec.limits[{i}]"
        m = r.mapping(raw, path)
        limit_type = r.enum(m.get("type"), f"{path}.type", LIMIT_TYPES, "")
        if not limit_type:
            raise r.fail(f"{path}.type", "Required value")
        fields = []
        for field_name in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio"):
            values = r.mapping(m.get(field_name), f"{path}.{field_name}")
            for rname, qty in values.items():
                r.quantity(str(rname), qty, f"{path}.{field_name}.{rname}")
            fields.append({str(k): v for k, v in values.items()})
        items.append(LimitRangeItem(limit_type, *fields))
    return namespace, name, tuple(items)


def runtime_class(obj: Mapping[str, Any]) -> tuple[str, dict[str, int]]:
    """Name and ``overhead.podFixed`` of a node.k8s.io/v1 RuntimeClass."""
    r = _ObjectReader(obj, "RuntimeClass", kueue=False)
    fixed = r.mapping(r.mapping(obj.get("overhead"), "overhead").get("podFixed"), "overhead.podFixed")
    return r.object_name, {
        str(name): r.quantity(str(name), qty, f"overhead.podFixed.{name}") for name, qty in fixed.items()
    }


# -- Workload -----------------------------------------------------------------------------------


def pod_requests(
    r: _Reader,
    spec: Mapping[str, Any],
    path: str,
    invalid: list[str],
    adjustments: ResourceAdjustments | None = None,
    unsatisfied: list[str] | None = None,
) -> dict[str, int]:
    """Effective per-pod requests, as Kubernetes' ``PodRequests`` counts them
    (:func:`effective_pod_amounts`). Under ``adjustments``, as Kueue's ``AdjustResources`` does,
    a pod naming a RuntimeClass and declaring no overhead has the RuntimeClass's, and a
    container's missing limits and requests are its namespace's LimitRange defaults; then limits
    stand in for missing requests, as the API server defaults them.

    What Kueue's ``ValidateResources`` finds (a container requesting more than its limit) is
    appended to ``invalid``, and what its ``ValidateLimitRange`` finds (a container or the pod
    above a LimitRange's max or below its min) to ``unsatisfied``, each as Kueue words it, init
    containers first: neither makes an invalid object, the Workload stays pending,
    ``Misconfigured`` (:attr:`kadmit.engine.model.Workload.invalid_resources`)."""
    limits = adjustments.limits if adjustments is not None else None
    container_limits = limits.container if limits is not None else None
    found: list[str] = []

    def container_requests(c: Any, cpath: str) -> dict[str, int]:
        cm = r.mapping(c, cpath)
        declared_limits, requests = _declared(r, cm.get("resources"), f"{cpath}.resources")
        if limits is not None:
            declared_limits = {**limits.default_limits, **declared_limits}
            requests = {**limits.default_requests, **requests}
        effective = _within_limits(declared_limits, requests, cpath, invalid)
        if container_limits is not None:
            # the lesser and the greater of each request and limit (a limit is a request too)
            low, high = dict(effective), dict(effective)
            for name, value in declared_limits.items():
                low[name], high[name] = min(value, effective[name]), max(value, effective[name])
            for names, why in violations(container_limits, low, high):
                found.append(invalid_value(cpath, names, why))
        return effective

    init_containers = [
        (
            container_requests(c, f"{path}.initContainers[{i}]"),
            isinstance(c, Mapping) and c.get("restartPolicy") == "Always",
        )
        for i, c in enumerate(r.sequence(spec.get("initContainers"), f"{path}.initContainers"))
    ]
    containers = [
        container_requests(c, f"{path}.containers[{i}]")
        for i, c in enumerate(r.sequence(spec.get("containers"), f"{path}.containers"))
    ]
    overhead = {
        rname: r.quantity(rname, qty, f"{path}.overhead.{rname}")
        for rname, qty in r.mapping(spec.get("overhead"), f"{path}.overhead").items()
    }
    runtime_class = spec.get("runtimeClassName")
    if not overhead and runtime_class and adjustments is not None:
        overhead = dict(adjustments.runtime_overheads.get(str(runtime_class), {}))
    pod_level = _pod_level_requests(r, spec, path, invalid)
    if pod_level:
        total = effective_pod_amounts(containers, init_containers, {})
        total.update(pod_level)
        for rname, value in overhead.items():
            total[rname] = total.get(rname, 0) + value
    else:
        total = effective_pod_amounts(containers, init_containers, overhead)
    if limits is not None and limits.pod is not None:
        for names, why in violations(limits.pod, total, total):
            found.append(invalid_value(path, names, why))
    if unsatisfied is not None:
        unsatisfied.extend(found)
    return total


def _pod_level_requests(r: _Reader, spec: Mapping[str, Any], path: str, invalid: list[str]) -> dict[str, int]:
    """Pod-level requests (``spec.resources``, KEP-2837), which Kubernetes' ``PodRequests`` puts
    in place of the containers' sum for the resources it supports (cpu, memory, hugepages-*);
    a pod-level limit stands in for a missing request, and a request above its limit is
    Kueue's ``ValidateResources`` error at ``spec.resources``."""
    if not spec.get("resources"):
        return {}
    limits, requests = _declared(r, spec.get("resources"), f"{path}.resources")
    effective = _within_limits(limits, requests, f"{path}.resources", invalid)
    return {
        name: value
        for name, value in effective.items()
        if name in ("cpu", "memory") or name.startswith("hugepages-")
    }


def _declared(r: _Reader, resources: object, path: str) -> tuple[dict[str, int], dict[str, int]]:
    """The ``(limits, requests)`` a container's (or a pod's) ``resources`` declare."""
    res = r.mapping(resources, path)
    limits, requests = (
        {
            rname: _container_quantity(r, rname, qty, f"{path}.{source}.{rname}")
            for rname, qty in r.mapping(res.get(source), f"{path}.{source}").items()
        }
        for source in ("limits", "requests")
    )
    return limits, requests


def _within_limits(
    limits: dict[str, int], requests: dict[str, int], path: str, invalid: list[str]
) -> dict[str, int]:
    """The requests, a limit standing in for a missing one; a request above its limit is
    appended to ``invalid`` in Kueue's ``ValidateResources`` words."""
    over = sorted(name for name, value in requests.items() if value > limits.get(name, value))
    if over:
        invalid.append(invalid_value(path, over, REQUESTS_EXCEED_LIMITS))
    return {**limits, **requests}


def invalid_value(path: str, resources: Sequence[str], message: str) -> str:
    """Kubernetes' ``field.Invalid(path, []ResourceName, message)`` as its ``Error()`` reads."""
    return f"{path}: Invalid value: {json.dumps(list(resources), separators=(',', ':'))}: {message}"


def _container_quantity(r: _Reader, resource: str, value: object, path: str) -> int:
    if resource == "pods":
        raise r.fail(path, "the key is reserved for internal kueue use")
    return r.quantity(resource, value, path)


def _node_affinity(r: _Reader, spec: Mapping[str, Any], path: str) -> tuple[tuple[Requirement, ...], ...]:
    affinity = r.mapping(spec.get("affinity"), f"{path}.affinity")
    node = r.mapping(affinity.get("nodeAffinity"), f"{path}.affinity.nodeAffinity")
    required = r.mapping(
        node.get("requiredDuringSchedulingIgnoredDuringExecution"),
        f"{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
    )
    tpath = f"{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    terms = []
    for i, term in enumerate(r.sequence(required.get("nodeSelectorTerms"), tpath)):
        tm = r.mapping(term, f"{tpath}[{i}]")
        expressions = r.sequence(tm.get("matchExpressions"), f"{tpath}[{i}].matchExpressions")
        terms.append(
            tuple(
                _requirement(r, e, f"{tpath}[{i}].matchExpressions[{j}]", NODE_SELECTOR_OPERATORS)
                for j, e in enumerate(expressions)
            )
        )
    return tuple(terms)


def pod_set(
    r: _Reader,
    raw: Any,
    path: str,
    adjustments: ResourceAdjustments | None = None,
) -> PodSet:
    m = r.mapping(raw, path)
    name = r.string(m.get("name"), f"{path}.name", "main")
    count = r.integer(m.get("count", 1), f"{path}.count", 0)
    min_count = m.get("minCount")
    if min_count is not None:
        min_count = r.integer(min_count, f"{path}.minCount", 1)
        if min_count > count:
            raise r.fail(f"{path}.minCount", "must be less than or equal to count")
    template = r.mapping(m.get("template"), f"{path}.template")
    spec = r.mapping(template.get("spec"), f"{path}.template.spec")
    tpath = f"{path}.template.spec"
    tolerations = r.each(
        r.sequence(spec.get("tolerations"), f"{tpath}.tolerations"),
        f"{tpath}.tolerations",
        lambda t, p: _toleration(r, t, p),
    )
    invalid: list[str] = []
    unsatisfied: list[str] = []
    requests = pod_requests(r, spec, tpath, invalid, adjustments, unsatisfied)
    if adjustments is not None and adjustments.transformations is not None:
        requests = adjustments.transformations.apply(requests)
    return PodSet(
        name=name,
        count=count,
        min_count=min_count,
        requests=requests,
        invalid_resources=tuple(invalid),
        unsatisfied_limits=tuple(unsatisfied),
        node_selector=_string_map(r, spec.get("nodeSelector"), f"{tpath}.nodeSelector"),
        affinity_terms=_node_affinity(r, spec, tpath),
        tolerations=tolerations,
        group_name=_pod_set_group_name(r, m, path),
    )


def _pod_set_group_name(r: _Reader, pod_set: Mapping[str, Any], path: str) -> str | None:
    """``topologyRequest.podSetGroupName``; Kueue's Workload webhook checks nothing about it."""
    request = r.mapping(pod_set.get("topologyRequest"), f"{path}.topologyRequest")
    name = request.get("podSetGroupName")
    return None if name is None else r.string(name, f"{path}.topologyRequest.podSetGroupName")


def _priority(
    r: _Reader, spec: Mapping[str, Any], version: str, priority_classes: Mapping[str, int]
) -> tuple[int, str | None]:
    cls: str | None = None
    if version == "v1beta2":
        ref = r.mapping(spec.get("priorityClassRef"), "spec.priorityClassRef")
        if ref:
            group = r.enum(
                ref.get("group"), "spec.priorityClassRef.group", ("kueue.x-k8s.io", "scheduling.k8s.io"), ""
            )
            kind = r.enum(
                ref.get("kind"), "spec.priorityClassRef.kind", ("WorkloadPriorityClass", "PriorityClass"), ""
            )
            if (group == "kueue.x-k8s.io") != (kind == "WorkloadPriorityClass") or not group:
                raise r.fail(
                    "spec.priorityClassRef",
                    "group and kind must agree "
                    "(kueue.x-k8s.io/WorkloadPriorityClass or scheduling.k8s.io/PriorityClass)",
                )
            name = r.string(ref.get("name"), "spec.priorityClassRef.name")
            cls = name if kind == "WorkloadPriorityClass" else None
    else:
        source = spec.get("priorityClassSource") or ""
        r.enum(
            source,
            "spec.priorityClassSource",
            ("kueue.x-k8s.io/workloadpriorityclass", "scheduling.k8s.io/priorityclass", ""),
            "",
        )
        if source == "kueue.x-k8s.io/workloadpriorityclass":
            cls = r.string(spec.get("priorityClassName"), "spec.priorityClassName")
    if spec.get("priority") is not None:
        value = r.integer(spec["priority"], "spec.priority")
        return value, cls
    if cls is not None and cls in priority_classes:
        return priority_classes[cls], cls
    return 0, cls


def _conditions(r: _Reader, status: Mapping[str, Any]) -> dict[str, Condition]:
    out = {}
    for i, raw in enumerate(r.sequence(status.get("conditions"), "status.conditions")):
        c = r.mapping(raw, f"status.conditions[{i}]")
        ctype = r.string(c.get("type"), f"status.conditions[{i}].type")
        when = r.time(c.get("lastTransitionTime"), f"status.conditions[{i}].lastTransitionTime") or 0.0
        out[ctype] = Condition(
            str(c.get("status", "Unknown")), str(c.get("reason", "")), str(c.get("message", "")), when
        )
    return out


def _admission(r: _Reader, raw: object) -> Admission | None:
    if raw is None:
        return None
    m = r.mapping(raw, "status.admission")
    cq = r.string(m.get("clusterQueue"), "status.admission.clusterQueue")
    assignments = []
    for i, a in enumerate(r.sequence(m.get("podSetAssignments"), "status.admission.podSetAssignments")):
        apath = f"status.admission.podSetAssignments[{i}]"
        am = r.mapping(a, apath)
        usage = {
            rn: r.quantity(rn, q, f"{apath}.resourceUsage.{rn}")
            for rn, q in r.mapping(am.get("resourceUsage"), f"{apath}.resourceUsage").items()
        }
        assignments.append(
            PodSetAssignment(
                name=r.string(am.get("name"), f"{apath}.name", "main"),
                flavors=_string_map(r, am.get("flavors"), f"{apath}.flavors"),
                resource_usage=usage,
                count=r.integer(am.get("count", 1), f"{apath}.count", 0),
            )
        )
    return Admission(cq, tuple(assignments))


def _check_states(r: _Reader, raw_states: object) -> tuple[CheckState, ...]:
    checks = []
    for i, raw in enumerate(r.sequence(raw_states, "status.admissionChecks")):
        cpath = f"status.admissionChecks[{i}]"
        c = r.mapping(raw, cpath)
        state = r.enum(c.get("state"), f"{cpath}.state", ("Pending", "Ready", "Retry", "Rejected"), "Pending")
        after = c.get("requeueAfterSeconds")
        when = r.time(c.get("lastTransitionTime"), f"{cpath}.lastTransitionTime") or 0.0
        checks.append(
            CheckState(
                r.string(c.get("name"), f"{cpath}.name"),
                state,
                str(c.get("message", "")),
                when,
                r.integer(after, f"{cpath}.requeueAfterSeconds", 0) if after is not None else None,
            )
        )
    return tuple(checks)


def admission_check_states(name: str, states: object) -> tuple[CheckState, ...]:
    """``status.admissionChecks`` of Workload ``name`` on their own (as a check controller writes them)."""
    return _check_states(_Reader({"metadata": {"name": name}}, "Workload"), states)


def workload(
    obj: Mapping[str, Any],
    priority_classes: Mapping[str, int] | None = None,
    previous: Workload | None = None,
    adjustments: ResourceAdjustments | None = None,
) -> Workload:
    """A Workload with the parts of its status that matter to scheduling.

    ``previous`` is the same Workload as read before: while its uid and ``metadata.generation``
    are the same, its spec is too, and its pod sets (the costly part: every container's
    quantities) are taken as they were read, so a status change costs only the status.
    ``adjustments`` are what the cluster and the Configuration add to its pods' requests
    (:mod:`kadmit.engine.adjustments`); pod sets read under other ones are read again."""
    r = _ObjectReader(obj, "Workload")
    version, meta, name, spec = r.version, r.meta, r.object_name, r.spec
    namespace = r.string(meta.get("namespace"), "metadata.namespace", "default")
    uid = str(meta.get("uid") or f"{namespace}/{name}")
    generation = meta.get("generation")
    if not isinstance(generation, int) or isinstance(generation, bool):
        generation = None
    if (
        previous is not None
        and generation is not None
        and previous.generation == generation
        and previous.uid == uid
        and meta.get("uid")
        and previous.adjustments is adjustments
    ):
        sets = previous.pod_sets
    else:
        sets = _pod_sets(r, spec, adjustments)
    priority, cls = _priority(r, spec, version, priority_classes or {})
    active = spec.get("active", True)
    if not isinstance(active, bool):
        raise r.fail("spec.active", "must be a boolean")
    created = r.time(meta.get("creationTimestamp"), "metadata.creationTimestamp") or 0.0
    status = r.mapping(obj.get("status"), "status")
    checks = _check_states(r, status.get("admissionChecks"))
    requeue_at = r.time(
        r.mapping(status.get("requeueState"), "status.requeueState").get("requeueAt"),
        "status.requeueState.requeueAt",
    )
    reclaimable = {
        r.string(
            r.mapping(p, f"status.reclaimablePods[{i}]").get("name"), f"status.reclaimablePods[{i}].name"
        ): r.integer(
            r.mapping(p, f"status.reclaimablePods[{i}]").get("count", 0),
            f"status.reclaimablePods[{i}].count",
            0,
        )
        for i, p in enumerate(r.sequence(status.get("reclaimablePods"), "status.reclaimablePods"))
    }
    labels = r.mapping(meta.get("labels"), "metadata.labels")
    if meta.get("ownerReferences") or meta.get("annotations") or labels:
        _, parent_uid, allowed_flavors, parent_label = read_variant(meta)
    else:  # the common case of a bare Workload, read without the calls
        parent_uid, allowed_flavors, parent_label = "", None, False
    return Workload(
        namespace=namespace,
        name=name,
        uid=uid,
        queue_name=r.string(spec.get("queueName"), "spec.queueName", ""),
        priority=priority,
        priority_class=cls,
        active=active,
        created=created,
        pod_sets=sets,
        conditions=_conditions(r, status),
        admission=_admission(r, status.get("admission")),
        check_states=checks,
        requeue_at=requeue_at,
        reclaimable=reclaimable,
        parent_uid=parent_uid,
        allowed_flavors=allowed_flavors,
        parent_label=parent_label,
        preemption_gated=bool(spec.get("preemptionGates")) and has_closed_preemption_gate(spec, status),
        job_uid=str(labels.get("kueue.x-k8s.io/job-uid", "")),
        generation=generation,
        replaces=_replaced_slice(r.mapping(meta.get("annotations"), "metadata.annotations")),
        adjustments=adjustments,
    )


SLICE_REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
"""Kueue's ``workloadslicing.WorkloadSliceReplacementFor``: set on a new Workload slice of an
elastic job, the key (``namespace/name``) of the slice it replaces."""


def _replaced_slice(annotations: Mapping[str, Any]) -> WorkloadKey | None:
    value = annotations.get(SLICE_REPLACEMENT_FOR)
    if not isinstance(value, str) or value.count("/") != 1:
        return None
    namespace, name = value.split("/")
    return WorkloadKey(namespace, name) if namespace and name else None


def _pod_sets(
    r: _Reader,
    spec: Mapping[str, Any],
    adjustments: ResourceAdjustments | None,
) -> tuple[PodSet, ...]:
    raw_sets = r.sequence(spec.get("podSets"), "spec.podSets")
    if not 1 <= len(raw_sets) <= 18:
        raise r.fail("spec.podSets", "must have 1 to 18 items")
    sets = r.each(raw_sets, "spec.podSets", lambda p, path: pod_set(r, p, path, adjustments))
    names = [p.name for p in sets]
    if len(set(names)) != len(names):
        raise r.fail("spec.podSets", "Duplicate value: pod set names must be unique")
    if sum(p.min_count is not None for p in sets) > 1:
        raise r.fail("spec.podSets", "at most one podSet can use minCount")
    return tuple(sets)
