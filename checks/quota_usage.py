"""What one pod costs under one ResourceQuota, as the API server's quota admission counts it.

Pure functions over pod specs and ResourceQuota dicts: which quotas match a pod (``scopes`` and
``scopeSelector``), what the pod charges for every key of ``hard`` (``cpu``/``requests.*``,
``limits.*``, extended resources, ``pods``, ``count/pods``), and which keys a pod must declare
for the quota to accept it at all. Amounts are integers in nano-units (a Kubernetes quantity has
no finer precision), so sums and comparisons are exact and cheap.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence

from kadmit.engine import InvalidObject
from kadmit.engine import parse as engine_parse
from kadmit.engine.limit_ranges import LimitRangeItem, summarize
from kadmit.engine.quantity import MILLI, format_milli, parse_exact
from kadmit.kube import Obj

Usage = dict[str, int]
NANO = 10**9

COMPUTE = ("cpu", "memory", "ephemeral-storage")
TERMINAL_PHASES = ("Succeeded", "Failed")


def to_nano(value: object) -> int:
    """A quantity in nano-units, rounded up as Kubernetes rounds sub-nano precision."""
    exact = parse_exact(value) * NANO
    return -((-exact.numerator) // exact.denominator)


def limit_range_defaults(limit_ranges: Sequence[Obj]) -> tuple[dict[str, object], dict[str, object]]:
    """The container ``(limits, requests)`` defaults of a namespace's LimitRanges, as LimitRanger
    applies them: the engine's summary (:mod:`kadmit.engine.limit_ranges`), which fills them in
    as the API server defaults a LimitRange and lets the first LimitRange by name win."""
    ranges: dict[str, tuple[LimitRangeItem, ...]] = {}
    for limit_range in limit_ranges:
        try:
            _, name, items = engine_parse.limit_range(limit_range)
        except InvalidObject:
            continue  # the API server refuses it: it defaults nothing
        ranges[name] = items
    summary = summarize(ranges)
    if summary is None or summary.container is None:
        return {}, {}
    return dict(summary.container.default), dict(summary.container.default_request)


def with_limit_range_defaults(spec: Obj, limit_ranges: Sequence[Obj]) -> Obj:
    """The pod spec as the API server makes it: a container's declared limit stands in for its
    missing request (Pod defaulting), then LimitRanger fills in the limits and requests still
    missing."""
    limits, requests = limit_range_defaults(limit_ranges)
    if not limits and not requests:
        return spec
    spec = copy.deepcopy(spec)
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = container.setdefault("resources", {})
        declared = dict(resources.get("limits") or {})
        for name, value in limits.items():
            resources.setdefault("limits", {}).setdefault(name, value)
        for name, value in requests.items():
            resources.setdefault("requests", {}).setdefault(name, declared.get(name, value))
    return spec


def _resources(containers: Iterable[Obj], field: str) -> list[dict[str, int]]:
    out = []
    for container in containers:
        resources = container.get("resources") or {}
        values = {str(k): to_nano(v) for k, v in (resources.get(field) or {}).items()}
        if field == "requests":
            # The API server defaults a missing request to the limit.
            for name, value in (resources.get("limits") or {}).items():
                values.setdefault(str(name), to_nano(value))
        out.append(values)
    return out


def pod_totals(spec: Obj, field: str) -> dict[str, int]:
    """The pod's effective requests or limits: max(sum of app containers + sidecars, each init) + overhead."""
    totals: dict[str, int] = {}
    for values in _resources(spec.get("containers") or [], field):
        for name, value in values.items():
            totals[name] = totals.get(name, 0) + value
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    inits = spec.get("initContainers") or []
    for init, values in zip(inits, _resources(inits, field), strict=True):
        if init.get("restartPolicy") == "Always":  # a sidecar keeps running beside the app containers
            for name, value in values.items():
                sidecars[name] = sidecars.get(name, 0) + value
            continue
        for name, value in values.items():
            # A plain init container runs alone, beside the sidecars started before it.
            init_peak[name] = max(init_peak.get(name, 0), value + sidecars.get(name, 0))
    for name, value in sidecars.items():
        totals[name] = totals.get(name, 0) + value
    for name, value in init_peak.items():
        totals[name] = max(totals.get(name, 0), value)
    for name, value in (spec.get("overhead") or {}).items():
        totals[str(name)] = totals.get(str(name), 0) + to_nano(value)
    return totals


def is_best_effort(spec: Obj) -> bool:
    """QoS BestEffort: no container (init included) requests or limits cpu or memory."""
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = container.get("resources") or {}
        for field in ("requests", "limits"):
            if any(k in ("cpu", "memory") for k in resources.get(field) or {}):
                return False
    return True


def _selector_matches(expression: Obj, spec: Obj) -> bool:
    scope = expression.get("scopeName")
    operator = expression.get("operator")
    values = [str(v) for v in expression.get("values") or []]
    if scope == "PriorityClass":
        name = spec.get("priorityClassName") or ""
        if operator == "In":
            return name in values
        if operator == "NotIn":
            return name not in values
        if operator == "Exists":
            return bool(name)
        if operator == "DoesNotExist":
            return not name
        raise ValueError(f"unsupported scopeSelector operator {operator!r}")
    if operator not in ("Exists", None):
        raise ValueError(f"scope {scope} only allows the Exists operator")
    return _scope_matches(str(scope), spec)


def _scope_matches(scope: str, spec: Obj) -> bool:
    if scope == "Terminating":
        return spec.get("activeDeadlineSeconds") is not None
    if scope == "NotTerminating":
        return spec.get("activeDeadlineSeconds") is None
    if scope == "BestEffort":
        return is_best_effort(spec)
    if scope == "NotBestEffort":
        return not is_best_effort(spec)
    if scope == "PriorityClass":
        return bool(spec.get("priorityClassName"))
    if scope == "CrossNamespacePodAffinity":
        affinity = spec.get("affinity") or {}
        terms: list[Obj] = []
        for kind in ("podAffinity", "podAntiAffinity"):
            block = affinity.get(kind) or {}
            terms.extend(block.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
            terms.extend((t.get("podAffinityTerm") or {}) for t in
                         block.get("preferredDuringSchedulingIgnoredDuringExecution") or [])
        return any(t.get("namespaces") or t.get("namespaceSelector") is not None for t in terms)
    raise ValueError(f"unknown ResourceQuota scope {scope!r}")


def quota_matches(quota: Obj, spec: Obj) -> bool:
    """Whether ``quota`` charges a pod with this spec: all its scopes and selector expressions match."""
    quota_spec = quota.get("spec") or {}
    if not all(_scope_matches(str(scope), spec) for scope in quota_spec.get("scopes") or []):
        return False
    expressions = (quota_spec.get("scopeSelector") or {}).get("matchExpressions") or []
    return all(_selector_matches(e, spec) for e in expressions)


def hard_limits(quota: Obj) -> dict[str, int]:
    """The enforced limits: ``status.hard`` once the quota controller has set it, else ``spec.hard``."""
    hard = (quota.get("status") or {}).get("hard") or (quota.get("spec") or {}).get("hard") or {}
    return {str(k): to_nano(v) for k, v in hard.items()}


def used(quota: Obj) -> dict[str, int]:
    return {str(k): to_nano(v) for k, v in ((quota.get("status") or {}).get("used") or {}).items()}


def pod_usage(spec: Obj, keys: Iterable[str]) -> Usage:
    """What one pod charges for each quota key in ``keys`` (zero for keys pods do not use)."""
    requests = pod_totals(spec, "requests")
    limits = pod_totals(spec, "limits")
    usage: Usage = {}
    for key in keys:
        if key in ("pods", "count/pods"):
            usage[key] = NANO
        elif key.startswith("requests."):
            usage[key] = requests.get(key.removeprefix("requests."), 0)
        elif key.startswith("limits."):
            usage[key] = limits.get(key.removeprefix("limits."), 0)
        elif key in COMPUTE or key.startswith("hugepages-"):
            usage[key] = requests.get(key, 0)
        else:  # other object counts and storage: charged when those objects are made, not by pods
            usage[key] = 0
    return usage


def missing_declarations(spec: Obj, keys: Iterable[str]) -> list[str]:
    """Quota keys the pod must declare for every container but does not (quota admission rejects it)."""
    missing: list[str] = []
    containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    for key in sorted(set(keys)):
        fields: tuple[str, ...]
        if key in ("cpu", "memory") or key in ("requests.cpu", "requests.memory"):
            resource, fields = key.removeprefix("requests."), ("requests", "limits")
        elif key in ("limits.cpu", "limits.memory"):
            resource, fields = key.removeprefix("limits."), ("limits",)
        else:
            continue
        for container in containers:
            resources = container.get("resources") or {}
            if not any(resource in (resources.get(f) or {}) for f in fields):
                missing.append(key)
                break
    return missing


def scale(usage: Mapping[str, int], factor: int) -> Usage:
    return {k: v * factor for k, v in usage.items()}


def add(into: Usage, usage: Mapping[str, int]) -> None:
    for key, value in usage.items():
        into[key] = into.get(key, 0) + value


def counts_toward_quota(pod: Obj) -> bool:
    """A pod the quota charges: it exists and has not reached a terminal phase."""
    return (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES


def describe(key: str, amount: int) -> str:
    """A quota amount (nano-units) as Kubernetes would print it (``500m``, ``2Gi``, ``3``)."""
    resource = key.removeprefix("requests.").removeprefix("limits.")
    if amount < 0:
        return "-" + describe(key, -amount)
    milli = -((-amount) // (NANO // MILLI))  # rounded up to the milli
    if resource != "cpu" and milli % MILLI:
        return f"{milli}m"
    return format_milli(resource, milli)
