"""The binder's filters, each against the rule kube-scheduler applies."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kadmit.localcluster.objects import Obj
from kadmit.localcluster.sim.placement import (
    NODE_AFFINITY_MISMATCH,
    matches_node_selection,
    pod_requests,
    rejections,
    toleration_matches,
    unschedulable_message,
    untolerated_taint,
)


def node(name: str = "n1", labels: dict[str, str] | None = None, taints: list[Obj] | None = None,
         allocatable: dict[str, str] | None = None) -> Obj:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": allocatable or {"cpu": "4", "memory": "8Gi", "pods": "10"}},
    }


def affinity(*terms: list[Obj]) -> Obj:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]
                }
            }
        }
    }


def expr(key: str, operator: str, *values: str) -> Obj:
    out: Obj = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def test_node_selector_requires_every_label() -> None:
    n = node(labels={"pool": "cpu", "zone": "a"})
    assert matches_node_selection({"nodeSelector": {"pool": "cpu"}}, n)
    assert not matches_node_selection({"nodeSelector": {"pool": "cpu", "zone": "b"}}, n)
    assert not matches_node_selection({"nodeSelector": {"missing": ""}}, n)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (expr("zone", "In", "a", "b"), True),
        (expr("zone", "In", "c"), False),
        (expr("zone", "NotIn", "c"), True),
        (expr("zone", "NotIn", "a"), False),
        (expr("absent", "NotIn", "a"), True),
        (expr("zone", "Exists"), True),
        (expr("absent", "Exists"), False),
        (expr("absent", "DoesNotExist"), True),
        (expr("zone", "DoesNotExist"), False),
        (expr("gpus", "Gt", "3"), True),
        (expr("gpus", "Gt", "4"), False),
        (expr("gpus", "Lt", "5"), True),
        (expr("gpus", "Lt", "4"), False),
        (expr("zone", "Gt", "1"), False),  # not an integer label
        (expr("absent", "Lt", "9"), False),
    ],
)
def test_required_affinity_operators(expression: Obj, expected: bool) -> None:
    n = node(labels={"zone": "a", "gpus": "4"})
    assert matches_node_selection(affinity([expression]), n) is expected


def test_affinity_terms_are_ored_and_expressions_anded() -> None:
    n = node(labels={"zone": "a", "tier": "gold"})
    both = [expr("zone", "In", "a"), expr("tier", "In", "silver")]
    assert not matches_node_selection(affinity(both), n)
    assert matches_node_selection(affinity(both, [expr("tier", "In", "gold")]), n)
    assert not matches_node_selection(affinity([]), n)  # an empty term matches nothing


def test_match_fields_select_by_node_name() -> None:
    spec = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [expr("metadata.name", "In", "n2")]}]}}}}
    assert matches_node_selection(spec, node("n2"))
    assert not matches_node_selection(spec, node("n1"))


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}, True),
        ({"key": "nvidia.com/gpu", "value": "present"}, True),  # Equal by default, any effect
        ({"key": "nvidia.com/gpu", "value": "absent"}, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"operator": "Exists"}, True),  # empty key + Exists tolerates everything
        ({"operator": "Exists", "effect": "NoSchedule"}, True),
        ({"operator": "Equal", "value": "present"}, False),  # empty key needs Exists
        ({"key": "other", "operator": "Exists"}, False),
    ],
)
def test_toleration_rules(toleration: Obj, expected: bool) -> None:
    assert toleration_matches(toleration, GPU_TAINT) is expected


def test_prefer_no_schedule_taints_do_not_block() -> None:
    soft = node(taints=[{"key": "spot", "effect": "PreferNoSchedule"}])
    assert untolerated_taint({}, soft) is None
    assert untolerated_taint({}, node(taints=[GPU_TAINT])) == GPU_TAINT


def test_requests_take_limits_init_containers_and_overhead() -> None:
    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "500m"}, "limits": {"memory": "1Gi"}}},
            {"resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
        ],
        "initContainers": [{"resources": {"requests": {"cpu": "2"}}}],
        "overhead": {"cpu": "100m"},
    }
    requests = pod_requests(spec)
    assert requests["cpu"] == Fraction(21, 10)  # max(0.75, 2) + 0.1
    assert requests["memory"] == 2 * 2**30


def test_rejections_name_each_missing_resource_and_pod_slots() -> None:
    n = node(allocatable={"cpu": "2", "memory": "1Gi", "pods": "1"})
    spec: Obj = {}
    requests = {"cpu": Fraction(3), "memory": Fraction(2**29), "nvidia.com/gpu": Fraction(1)}
    assert rejections(spec, requests, n, {}, 0) == ["Insufficient cpu", "Insufficient nvidia.com/gpu"]
    assert rejections(spec, {"cpu": Fraction(1)}, n, {"cpu": Fraction(1)}, 0) == []
    assert rejections(spec, {"cpu": Fraction(1)}, n, {"cpu": Fraction(3, 2)}, 1) == [
        "Too many pods", "Insufficient cpu"]
    assert rejections({"nodeSelector": {"a": "b"}}, {}, n, {}, 0) == [NODE_AFFINITY_MISMATCH]


def test_unschedulable_message_matches_kube_scheduler() -> None:
    message = unschedulable_message(
        3, ["Insufficient cpu", NODE_AFFINITY_MISMATCH, NODE_AFFINITY_MISMATCH]
    )
    assert message == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match Pod's node affinity/selector."
    )
