"""Built-in ResourceQuota admission and status, as kube-apiserver and the quota controller do it.

On CREATE of a Pod (and of any counted kind; on UPDATE of Services and claims), every
ResourceQuota of the namespace whose scopes match is checked: ``used + requested <= hard`` for
each tracked resource, else 403 with the real message (``exceeded quota: q, requested: ...,
used: ..., limited: ...``). Usage is computed from the store, not read from ``status.used``,
so there is no window in which two pods slip past one quota: the core persists the pod right
after :meth:`ResourceQuotaAdmission.validate` with no await in between. ``status.hard`` and
``status.used`` are recomputed after every change in the namespace, which keeps them what the
quota controller would make them.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, Protocol

from kadmit.localcluster.admission import forbidden
from kadmit.localcluster.errors import status
from kadmit.localcluster.interfaces import AdmissionError, AdmissionRequest, AdmissionResult, StoreView
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.quantity import DECIMAL_SI, ONE, ZERO, Quantity, QuantityError
from kadmit.localcluster.selectors import SelectorError, requirement_matches
from kadmit.localcluster.timestamps import parse_time

logger = logging.getLogger(__name__)

_NANOS_PER_UNIT = 10**9
_ONE_NANOS = _NANOS_PER_UNIT

# Resources of the pod evaluator (besides requests.<extended> and hugepages-*): Kubernetes'
# compute resources, plain, as requests. and as limits. (also standard quota resources).
COMPUTE_QUOTA_RESOURCES = frozenset({
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
})
_POD_RESOURCES = COMPUTE_QUOTA_RESOURCES | {"pods", "count/pods"}
# Each container must name these when a matching quota limits them (Kubernetes' historic rule).
_MUST_SPECIFY = {"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
# Object counts that predate count/<resource>.<group>.
_LEGACY_COUNTS = {
    "services": ("", "services"),
    "secrets": ("", "secrets"),
    "configmaps": ("", "configmaps"),
    "persistentvolumeclaims": ("", "persistentvolumeclaims"),
    "replicationcontrollers": ("", "replicationcontrollers"),
    "resourcequotas": ("", "resourcequotas"),
}
_SERVICE_RESOURCES = {"services", "count/services", "services.loadbalancers", "services.nodeports"}
_PVC_RESOURCES = {"persistentvolumeclaims", "count/persistentvolumeclaims", "requests.storage"}
_STORAGE_CLASS_SUFFIX = ".storageclass.storage.k8s.io"
_POD_SCOPES = {"Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass"}


class _StoreEvent(Protocol):
    """What the store's listeners receive (``kadmit.localcluster.store.Event``)."""

    @property
    def key(self) -> tuple[str, str]: ...  # (group, plural)

    @property
    def object(self) -> Obj: ...


ResourceList = dict[str, Quantity]


def _to_nanos(value: Fraction) -> int:
    """Round up to whole nano-units, as Kubernetes does for finer quantities."""
    return -(-value.numerator * _NANOS_PER_UNIT // value.denominator)


def _add_into(total: ResourceList, more: Mapping[str, Quantity]) -> None:
    for name, amount in more.items():
        total[name] = total.get(name, ZERO) + amount


def _max_into(total: ResourceList, other: Mapping[str, Quantity]) -> None:
    for name, amount in other.items():
        if name not in total or amount.value > total[name].value:
            total[name] = amount


def _resource_list(values: Mapping[str, Any] | None, where: str) -> ResourceList:
    result: ResourceList = {}
    for name, raw in (values or {}).items():
        try:
            result[name] = Quantity.parse(raw)
        except QuantityError as exc:
            raise _invalid(f"{where}[{name}]: Invalid value: {raw!r}: {exc.reason}") from None
    return result


def _invalid(message: str) -> AdmissionError:
    return AdmissionError(status(422, "Invalid", message))


# -- what a pod uses ------------------------------------------------------------------------


def _container_resources(container: Obj, where: str) -> tuple[ResourceList, ResourceList]:
    """Requests (defaulted from limits, as the API server's defaulting does) and limits."""
    resources = container.get("resources") or {}
    limits = _resource_list(resources.get("limits"), f"{where}.resources.limits")
    requests = _resource_list(resources.get("requests"), f"{where}.resources.requests")
    for name, limit in limits.items():
        requests.setdefault(name, limit)
    return requests, limits


def _pod_aggregate(pod: Obj, pick: int) -> ResourceList:
    """``PodRequests``/``PodLimits``: containers and sidecars summed, max with init containers, overhead."""
    spec = pod.get("spec") or {}
    total: ResourceList = {}
    for i, container in enumerate(spec.get("containers") or []):
        _add_into(total, _container_resources(container, f"spec.containers[{i}]")[pick])
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for i, container in enumerate(spec.get("initContainers") or []):
        amounts = _container_resources(container, f"spec.initContainers[{i}]")[pick]
        if container.get("restartPolicy") == "Always":
            _add_into(total, amounts)
            _add_into(sidecars, amounts)
            during = dict(sidecars)
        else:
            during = dict(amounts)
            _add_into(during, sidecars)
        _max_into(init_peak, during)
    _max_into(total, init_peak)
    pod_level = _resource_list(
        (spec.get("resources") or {}).get("limits" if pick else "requests"), "spec.resources"
    )
    for name in ("cpu", "memory"):
        if name in pod_level:
            total[name] = pod_level[name]
    _add_into(total, _resource_list(spec.get("overhead"), "spec.overhead"))
    return total


def pod_requests(pod: Obj) -> ResourceList:
    return _pod_aggregate(pod, 0)


def pod_limits(pod: Obj) -> ResourceList:
    return _pod_aggregate(pod, 1)


def _is_extended(name: str) -> bool:
    return "/" in name and not name.startswith(("kubernetes.io/", "requests."))


def is_terminal(pod: Obj, now: datetime.datetime | None = None) -> bool:
    """Succeeded/Failed pods, and pods past their deletion grace period, stop counting."""
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return True
    deletion = (pod.get("metadata") or {}).get("deletionTimestamp")
    if not deletion:
        return False
    try:
        when = parse_time(str(deletion))
    except ValueError:
        return False
    return when <= (now or datetime.datetime.now(datetime.UTC))


def pod_usage(pod: Obj, now: datetime.datetime | None = None) -> ResourceList:
    """What one pod counts against a quota (``PodUsageFunc``)."""
    if is_terminal(pod, now):
        return {"count/pods": ONE}
    return _live_usage(pod)


def _live_usage(pod: Obj) -> ResourceList:
    """What a pod that has not terminated counts."""
    usage: ResourceList = {"count/pods": ONE, "pods": ONE}
    requests, limits = pod_requests(pod), pod_limits(pod)
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            usage[name] = requests[name]
            usage[f"requests.{name}"] = requests[name]
        if name in limits:
            usage[f"limits.{name}"] = limits[name]
    for name, amount in requests.items():
        if name.startswith("hugepages-"):
            usage[name] = amount
            usage[f"requests.{name}"] = amount
        elif _is_extended(name):
            usage[f"requests.{name}"] = amount
    return usage


def _tracks(resource: str, name: str) -> bool:
    """Whether quota resource ``name`` is one the evaluator for ``resource`` knows."""
    if resource == "pods":
        return (
            name in _POD_RESOURCES
            or name.startswith(("hugepages-", "requests.hugepages-"))
            or (name.startswith("requests.") and _is_extended(name[len("requests.") :]))
        )
    if resource == "services":
        return name in _SERVICE_RESOURCES
    if resource == "persistentvolumeclaims":
        return name in _PVC_RESOURCES or name.endswith(
            (f"{_STORAGE_CLASS_SUFFIX}/requests.storage", f"{_STORAGE_CLASS_SUFFIX}/persistentvolumeclaims")
        )
    return False


def service_usage(service: Obj) -> ResourceList:
    """``ServiceUsageFunc``: the service, its load balancer, and the node ports it takes."""
    spec = service.get("spec") or {}
    usage: ResourceList = {"services": ONE, "count/services": ONE}
    ports = Quantity(Fraction(len(spec.get("ports") or [])))
    kind = spec.get("type", "ClusterIP")
    if kind == "NodePort":
        usage["services.nodeports"] = ports
    elif kind == "LoadBalancer":
        usage["services.loadbalancers"] = ONE
        if spec.get("allocateLoadBalancerNodePorts", True) is not False:
            usage["services.nodeports"] = ports
    return usage


def pvc_usage(claim: Obj) -> ResourceList:
    """``PersistentVolumeClaim`` usage: the claim and its requested storage, also per StorageClass."""
    spec = claim.get("spec") or {}
    usage: ResourceList = {"persistentvolumeclaims": ONE, "count/persistentvolumeclaims": ONE}
    requests = _resource_list((spec.get("resources") or {}).get("requests"), "spec.resources.requests")
    storage_class = spec.get("storageClassName") or (
        ((claim.get("metadata") or {}).get("annotations") or {}).get(
            "volume.beta.kubernetes.io/storage-class"
        )
    )
    if "storage" in requests:
        usage["requests.storage"] = requests["storage"]
    if storage_class:
        prefix = f"{storage_class}{_STORAGE_CLASS_SUFFIX}"
        usage[f"{prefix}/persistentvolumeclaims"] = ONE
        if "storage" in requests:
            usage[f"{prefix}/requests.storage"] = requests["storage"]
    return usage


# Kinds whose usage is more than a count, and which are charged on UPDATE too (by the increase).
_EVALUATORS = {("", "services"): service_usage, ("", "persistentvolumeclaims"): pvc_usage}
# What a ResourceQuota always counts, whatever its spec.hard names (checked on every store event).
_DIRECT = frozenset({("", "pods"), ("", "resourcequotas"), *_EVALUATORS})


def count_resource_name(group: str, resource: str) -> str:
    return f"count/{resource}.{group}" if group else f"count/{resource}"


def _count_target(name: str) -> tuple[str, str] | None:
    """The (group, resource) an object-count quota name counts, or None."""
    if name in _LEGACY_COUNTS:
        return _LEGACY_COUNTS[name]
    if name.startswith("count/"):
        resource, _, group = name[len("count/") :].partition(".")
        return (group, resource)
    return None


# -- which quotas apply ----------------------------------------------------------------------


def _is_best_effort(pod: Obj) -> bool:
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for section in ("requests", "limits"):
            for name, raw in (resources.get(section) or {}).items():
                if name in ("cpu", "memory") and Quantity.parse(raw).value != 0:
                    return False
    pod_level = spec.get("resources") or {}
    return not any(
        name in ("cpu", "memory") and Quantity.parse(raw).value != 0
        for section in ("requests", "limits")
        for name, raw in (pod_level.get(section) or {}).items()
    )


def _scope_matches(selector: Obj, pod: Obj, best_effort: bool | None = None) -> bool:
    """Whether ``pod`` is in the scope; ``best_effort`` may be passed when already known."""
    scope = selector.get("scopeName")
    operator = selector.get("operator")
    spec = pod.get("spec") or {}
    if scope in ("Terminating", "NotTerminating"):
        deadline = spec.get("activeDeadlineSeconds")
        terminating = deadline is not None and int(deadline) >= 0
        return bool(terminating == (scope == "Terminating"))
    if scope == "CrossNamespacePodAffinity":
        return _uses_cross_namespace_pod_affinity(spec)
    if scope in ("BestEffort", "NotBestEffort"):
        is_best_effort = _is_best_effort(pod) if best_effort is None else best_effort
        return bool(is_best_effort == (scope == "BestEffort"))
    if scope == "PriorityClass":
        name = spec.get("priorityClassName") or ""
        try:
            return requirement_matches({**selector, "key": scope}, {scope: name} if name else {})
        except SelectorError:
            raise _invalid(f'scopeSelector operator "{operator}" is not supported') from None
    # VolumeAttributesClass concerns PersistentVolumeClaims, never pods.
    return False


def _uses_cross_namespace_pod_affinity(spec: Obj) -> bool:
    """A pod (anti-)affinity term that names other namespaces or selects them."""
    affinity = spec.get("affinity") or {}
    for kind in ("podAffinity", "podAntiAffinity"):
        terms = affinity.get(kind) or {}
        required = terms.get("requiredDuringSchedulingIgnoredDuringExecution") or []
        preferred = [
            weighted.get("podAffinityTerm") or {}
            for weighted in terms.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        ]
        if any(
            term.get("namespaces") or term.get("namespaceSelector") is not None
            for term in [*required, *preferred]
        ):
            return True
    return False


def _scope_selectors(quota: Obj) -> list[Obj]:
    spec = quota.get("spec") or {}
    selectors = [{"scopeName": scope, "operator": "Exists"} for scope in spec.get("scopes") or []]
    selectors.extend((spec.get("scopeSelector") or {}).get("matchExpressions") or [])
    return selectors


def _quota_applies(quota: Obj, group: str, resource: str, obj: Obj) -> bool:
    """``generic.Matches``: the quota tracks something of this kind and all its scopes match."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    is_pod = group == "" and resource == "pods"
    if is_pod:
        if not any(_tracks("pods", name) for name in hard):
            return False
        return all(_scope_matches(selector, obj) for selector in _scope_selectors(quota))
    if (group, resource) in _EVALUATORS:
        if not any(_tracks(resource, name) for name in hard):
            return False
        return not _scope_selectors(quota)
    counted = count_resource_name(group, resource)
    legacy = next((name for name, target in _LEGACY_COUNTS.items() if target == (group, resource)), None)
    if counted not in hard and (legacy is None or legacy not in hard):
        return False
    # Scopes only ever match pods.
    return not _scope_selectors(quota)


def _object_usage(group: str, resource: str, obj: Obj, now: datetime.datetime | None) -> ResourceList:
    if group == "" and resource == "pods":
        return pod_usage(obj, now)
    evaluator = _EVALUATORS.get((group, resource))
    if evaluator is not None:
        return evaluator(obj)
    usage: ResourceList = {count_resource_name(group, resource): ONE}
    legacy = next((name for name, target in _LEGACY_COUNTS.items() if target == (group, resource)), None)
    if legacy is not None:
        usage[legacy] = ONE
    return usage


def _pretty(resources: Mapping[str, Quantity], names: Iterable[str]) -> str:
    return ",".join(f"{name}={resources[name]}" for name in sorted(names) if name in resources)


@dataclass(frozen=True)
class _PodFacts:
    live_usage: ResourceList
    live_nanos: dict[str, int]
    best_effort: bool


def _facts_of(pod: Obj, known: Mapping[tuple[str, str], _PodFacts]) -> _PodFacts:
    metadata = pod["metadata"]
    facts = known.get((metadata["name"], str(metadata.get("resourceVersion", ""))))
    if facts is None:
        usage = _live_usage(pod)
        nanos = {name: _to_nanos(amount.value) for name, amount in usage.items()}
        facts = _PodFacts(usage, nanos, _is_best_effort(pod))
    return facts


class ResourceQuotaAdmission:
    """The ResourceQuota admission plugin (an ``AdmissionPlugin``) and the quota status keeper.

    ``validate`` does all its work synchronously, so the core can persist the object before any
    other request is admitted. Status follows the store's events when the store offers
    ``add_listener`` (``kadmit.localcluster.store.Store`` does); with any other StoreView, call
    ``recompute(namespace)`` after every write or delete in that namespace.
    """

    def __init__(self, store: StoreView) -> None:
        self._store = store
        self._pending: set[str] = set()
        # Parsed requests of stored pods by namespace and (name, resourceVersion): stored
        # objects never change in place, so a pod is parsed once per version.
        self._pod_facts: dict[str, dict[tuple[str, str], _PodFacts]] = {}
        add_listener = getattr(store, "add_listener", None)
        if callable(add_listener):
            # Like the quota controller's watch: every committed change re-levels status.
            add_listener(self._on_event)

    def _on_event(self, event: _StoreEvent) -> None:
        namespace = (event.object.get("metadata") or {}).get("namespace")
        if not namespace or namespace in self._pending:
            return
        group, resource = event.key
        if (group, resource) not in _DIRECT and not any(
            _count_target(name) == (group, resource)
            for quota in self._store.list("", "resourcequotas", namespace)
            for name in (quota.get("spec") or {}).get("hard") or {}
        ):
            return
        self._pending.add(namespace)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._recompute_pending(namespace)
            return
        # After the write that is being committed, never inside it.
        loop.call_soon(self._recompute_pending, namespace)

    def _recompute_pending(self, namespace: str) -> None:
        self._pending.discard(namespace)
        try:
            self.recompute(namespace)
        except Exception:
            logger.exception("recomputing the ResourceQuota status of namespace %s failed", namespace)

    async def mutate(self, request: AdmissionRequest) -> AdmissionResult:
        return AdmissionResult(request.object)

    async def validate(self, request: AdmissionRequest) -> list[str]:
        self.check(request)
        return []

    def check(self, request: AdmissionRequest) -> None:
        """Raise :class:`AdmissionError` when the write would take a namespace past a quota.

        CREATE is charged for every kind; UPDATE only for Services and PersistentVolumeClaims,
        by what it adds (a NodePort service turned LoadBalancer, a claim grown).
        """
        kind = (request.group, request.resource)
        if request.subresource or not request.namespace or request.object is None:
            return
        if request.operation == "UPDATE":
            if kind not in _EVALUATORS or request.old_object is None:
                return
        elif request.operation != "CREATE" or kind == ("", "resourcequotas"):
            return
        quotas = [
            quota
            for quota in self._quotas(request.namespace)
            if _quota_applies(quota, request.group, request.resource, request.object)
        ]
        if not quotas:
            return
        delta = _object_usage(request.group, request.resource, request.object, None)
        if request.operation == "UPDATE":
            assert request.old_object is not None
            before = _object_usage(request.group, request.resource, request.old_object, None)
            delta = {
                name: Quantity(amount.value - before.get(name, ZERO).value, amount.format)
                for name, amount in delta.items()
                if amount.value > before.get(name, ZERO).value
            }
        if (request.group, request.resource) == ("", "pods"):
            for quota in quotas:
                missing = _missing_specifications(request.object, quota)
                if missing:
                    name = quota["metadata"]["name"]
                    raise forbidden(_named(request), f"failed quota: {name}: must specify {missing}")
        for quota in quotas:
            hard = self._hard(quota)
            requested = {name: amount for name, amount in delta.items() if name in hard}
            if not requested:
                continue
            used = self.usage(quota)
            exceeded = [
                name
                for name, amount in requested.items()
                if (used.get(name, ZERO) + amount).value > hard[name].value
            ]
            if exceeded:
                message = (
                    f"exceeded quota: {quota['metadata']['name']}, "
                    f"requested: {_pretty(requested, exceeded)}, "
                    f"used: {_pretty(used, exceeded)}, "
                    f"limited: {_pretty(hard, exceeded)}"
                )
                raise forbidden(_named(request), message)

    def usage(self, quota: Obj) -> ResourceList:
        """What the namespace uses of each resource the quota limits (zero when nothing uses it)."""
        namespace = quota["metadata"]["namespace"]
        hard = self._hard(quota)
        used: ResourceList = dict.fromkeys(hard, ZERO)
        now = datetime.datetime.now(datetime.UTC)
        pod_names = [name for name in hard if _tracks("pods", name)]
        if pod_names:
            selectors = _scope_selectors(quota)
            known = self._pod_facts.get(namespace, {})
            seen: dict[tuple[str, str], _PodFacts] = {}
            # Summed in integer nano-units (Kubernetes' finest precision), formats kept aside:
            # Fraction arithmetic per pod would dominate the cost of a check.
            totals = dict.fromkeys(pod_names, 0)
            formats: dict[str, str] = {}
            for pod in self._store.list("", "pods", namespace):
                facts = _facts_of(pod, known)
                seen[(pod["metadata"]["name"], str(pod["metadata"].get("resourceVersion", "")))] = facts
                if selectors and not all(
                    _scope_matches(selector, pod, facts.best_effort) for selector in selectors
                ):
                    continue
                if is_terminal(pod, now):
                    totals["count/pods"] = totals.get("count/pods", 0) + _ONE_NANOS
                    continue
                for name in pod_names:
                    nanos = facts.live_nanos.get(name)
                    if nanos:
                        totals[name] += nanos
                        formats.setdefault(name, facts.live_usage[name].format)
            self._pod_facts[namespace] = seen
            for name in pod_names:
                used[name] = Quantity(Fraction(totals[name], _NANOS_PER_UNIT), formats.get(name, DECIMAL_SI))
        if not _scope_selectors(quota):
            summed: set[str] = set()
            for (group, resource), evaluator in _EVALUATORS.items():
                names = [name for name in hard if _tracks(resource, name)]
                if not names:
                    continue
                for obj in self._store.list(group, resource, namespace):
                    usage = evaluator(obj)
                    _add_into(used, {name: usage[name] for name in names if name in usage})
                summed.update(names)
            for name in hard:
                target = _count_target(name)
                if target is None or target == ("", "pods") or name in summed:
                    continue
                count = len(self._store.list(target[0], target[1], namespace))
                used[name] = Quantity(Fraction(count))
        return used

    def recompute(self, namespace: str) -> None:
        """Bring ``status.hard`` and ``status.used`` of the namespace's quotas up to date.

        Called by itself after every store event when the store has ``add_listener``; a store
        without it must call this after each write or delete in the namespace.
        """
        for quota in self._quotas(namespace):
            try:
                hard = self._hard(quota)
                used = self.usage(quota)
            except AdmissionError:
                continue  # a quota with an unparsable hard limit tracks nothing
            status = {
                "hard": {name: str(amount) for name, amount in sorted(hard.items())},
                "used": {name: str(amount) for name, amount in sorted(used.items())},
            }
            if quota.get("status") != status:
                self._store.write_status("", "resourcequotas", namespace, quota["metadata"]["name"], status)

    def _quotas(self, namespace: str) -> list[Obj]:
        return sorted(
            self._store.list("", "resourcequotas", namespace),
            key=lambda quota: str(quota["metadata"]["name"]),
        )

    @staticmethod
    def _hard(quota: Obj) -> ResourceList:
        return _resource_list((quota.get("spec") or {}).get("hard"), "spec.hard")


def _missing_specifications(pod: Obj, quota: Obj) -> str:
    """``podEvaluator.Constraints``: "cpu for: a,b; memory for: a", or "" when nothing is missing."""
    required = {name for name in (quota.get("spec") or {}).get("hard") or {} if name in _MUST_SPECIFY}
    if not required:
        return ""
    missing: dict[str, set[str]] = {}
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        requests, limits = _container_resources(container, "container")
        present = set()
        for name in ("cpu", "memory"):
            if name in requests:
                present |= {name, f"requests.{name}"}
            if name in limits:
                present.add(f"limits.{name}")
        for name in required - present:
            missing.setdefault(name, set()).add(str(container.get("name", "")))
    return "; ".join(
        f"{name} for: {','.join(sorted(containers))}" for name, containers in sorted(missing.items())
    )


def _named(request: AdmissionRequest) -> AdmissionRequest:
    """The request, named after its object when the request itself carries no name yet."""
    if request.name or request.object is None:
        return request
    metadata = request.object.get("metadata") or {}
    name = metadata.get("name") or metadata.get("generateName") or ""
    return replace(request, name=str(name))
