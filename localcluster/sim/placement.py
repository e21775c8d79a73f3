"""Whether a Pod may run on a Node: the kube-scheduler filters the simulated binder applies.

Each filter returns the reason kube-scheduler would print for a node it rejects, so an
unschedulable Pod carries the same ``0/N nodes are available: ...`` message users know.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from fractions import Fraction

from ..objects import Obj
from ..quantity import Resources, add, parse_resources
from ..selectors import NODE_OPERATORS, SelectorError, requirement_matches

NODE_AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
NODE_UNSCHEDULABLE = "node(s) were unschedulable"
TOO_MANY_PODS = "Too many pods"
_ENFORCED_EFFECTS = ("NoSchedule", "NoExecute")


def container_requests(container: Obj) -> Resources:
    """Requests of one container, limits standing in for missing requests as API defaulting does."""
    resources = container.get("resources") or {}
    requests = parse_resources(resources.get("limits"))
    requests.update(parse_resources(resources.get("requests")))
    return requests


def pod_requests(spec: Obj) -> Resources:
    """What a Pod asks of a node: its containers' sum, at least its largest init container, plus overhead.

    Restartable (sidecar) init containers run alongside the main containers, so they add up.
    """
    total: Resources = {}
    for container in spec.get("containers") or []:
        add(total, container_requests(container))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for container in spec.get("initContainers") or []:
        requests = container_requests(container)
        if container.get("restartPolicy") == "Always":
            add(sidecars, requests)
            continue
        running: Resources = dict(sidecars)
        add(running, requests)
        for name, amount in running.items():
            init_peak[name] = max(init_peak.get(name, Fraction(0)), amount)
    add(total, sidecars)
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, Fraction(0)), amount)
    add(total, parse_resources(spec.get("overhead")))
    return total


def _expression_matches(expression: Obj, values_of: Mapping[str, str]) -> bool:
    """A NodeSelectorRequirement; one with an operator kube-scheduler does not know matches nothing."""
    try:
        return requirement_matches(expression, values_of, NODE_OPERATORS)
    except SelectorError:
        return False


def _term_matches(term: Obj, node: Obj) -> bool:
    """A NodeSelectorTerm: all its expressions and fields hold. An empty term matches nothing."""
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    metadata = node.get("metadata") or {}
    labels = metadata.get("labels") or {}
    node_fields = {"metadata.name": metadata.get("name", "")}
    return all(_expression_matches(e, labels) for e in expressions) and all(
        _expression_matches(f, node_fields) for f in fields
    )


def matches_node_selection(spec: Obj, node: Obj) -> bool:
    """``nodeSelector`` and required node affinity (terms ORed, expressions ANDed) both hold."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    )
    terms = required.get("nodeSelectorTerms")
    if terms is None:
        return True
    return any(_term_matches(term, node) for term in terms)


def toleration_matches(toleration: Obj, taint: Obj) -> bool:
    """Kubernetes' ``Toleration.ToleratesTaint``.

    An empty effect tolerates every effect; an empty key with ``Exists`` tolerates every key;
    ``Exists`` ignores the value, ``Equal`` (the default) compares it.
    """
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if key and key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    if operator == "Equal":
        return bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def untolerated_taint(spec: Obj, node: Obj) -> Obj | None:
    """The first NoSchedule/NoExecute taint of ``node`` the Pod does not tolerate."""
    tolerations = spec.get("tolerations") or []
    taints: list[Obj] = (node.get("spec") or {}).get("taints") or []
    for taint in taints:
        if taint.get("effect") not in _ENFORCED_EFFECTS:
            continue
        if not any(toleration_matches(t, taint) for t in tolerations):
            return taint
    return None


def taint_reason(taint: Obj) -> str:
    value = taint.get("value")
    shown = f"{taint.get('key')}: {value}" if value else str(taint.get("key"))
    return f"node(s) had untolerated taint {{{shown}}}"


def node_allocatable(node: Obj) -> Resources:
    status = node.get("status") or {}
    return parse_resources(status.get("allocatable") or status.get("capacity"))


def rejections(spec: Obj, requests: Mapping[str, Fraction], node: Obj, used: Mapping[str, Fraction],
               pods_on_node: int) -> list[str]:
    """Why ``node`` cannot take the Pod, in kube-scheduler's words; empty when it can.

    ``used`` sums the requests of the non-terminated Pods already on the node.
    """
    if (node.get("spec") or {}).get("unschedulable"):
        return [NODE_UNSCHEDULABLE]
    if not matches_node_selection(spec, node):
        return [NODE_AFFINITY_MISMATCH]
    taint = untolerated_taint(spec, node)
    if taint is not None:
        return [taint_reason(taint)]
    allocatable = node_allocatable(node)
    reasons: list[str] = []
    if "pods" in allocatable and pods_on_node + 1 > allocatable["pods"]:
        reasons.append(TOO_MANY_PODS)
    for name in sorted(requests):
        amount = requests[name]
        if amount <= 0:
            continue
        if used.get(name, Fraction(0)) + amount > allocatable.get(name, Fraction(0)):
            reasons.append(f"Insufficient {name}")
    return reasons


def unschedulable_message(node_count: int, reasons: Iterable[str]) -> str:
    """kube-scheduler's FitError message: ``0/3 nodes are available: 1 Insufficient cpu, ...``."""
    counts = Counter(reasons)
    if node_count == 0:
        return "no nodes available to schedule pods"
    if not counts:
        return f"0/{node_count} nodes are available."
    detail = ", ".join(f"{count} {reason}" for reason, count in sorted(counts.items()))
    return f"0/{node_count} nodes are available: {detail}."
