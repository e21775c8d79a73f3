"""Kueue objects as users write them, in v1beta1 and v1beta2, with Kueue's defaults and errors."""

from __future__ import annotations

from typing import Any

import pytest

from kadmit.engine import InvalidObject, parse
from kadmit.engine.model import BEST_EFFORT_FIFO, MAY_STOP_SEARCH, NEVER, TRY_NEXT_FLAVOR
from tests.engine.conftest import cluster_queue, quotas, workload


def test_cluster_queue_defaults() -> None:
    cq = parse.cluster_queue(cluster_queue("cq", quotas({"f": {"cpu": 9, "memory": "36Gi"}})))
    assert cq.queueing_strategy == BEST_EFFORT_FIFO
    assert cq.flavor_fungibility.when_can_borrow == MAY_STOP_SEARCH
    assert cq.flavor_fungibility.when_can_preempt == TRY_NEXT_FLAVOR
    assert cq.preemption.reclaim_within_cohort == NEVER
    assert cq.preemption.within_cluster_queue == NEVER
    assert cq.preemption.borrow_within_cohort == NEVER
    assert cq.stop_policy == "None"
    assert cq.resource_groups[0].flavors[0].resources[1].nominal == 36 * 2**30 * 1000


def test_nil_namespace_selector_is_kept_apart_from_empty() -> None:
    obj = cluster_queue("cq", quotas({"f": {"cpu": 1}}))
    del obj["spec"]["namespaceSelector"]
    assert parse.cluster_queue(obj).namespace_selector is None
    obj["spec"]["namespaceSelector"] = {}
    selector = parse.cluster_queue(obj).namespace_selector
    assert selector is not None and selector.matches({"anything": "x"})


def test_v1beta1_cluster_queue_converts_like_kueue() -> None:
    obj: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "cohort": "team",
            "resourceGroups": quotas({"f": {"cpu": 1}}),
            "admissionChecks": ["a", "b"],
            "admissionChecksStrategy": {"admissionChecks": [{"name": "ignored"}]},
            "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
        },
    }
    cq = parse.cluster_queue(obj)
    assert cq.cohort == "team"
    assert [rule.name for rule in cq.admission_checks] == ["a", "b"]
    assert cq.flavor_fungibility.when_can_borrow == MAY_STOP_SEARCH
    assert cq.flavor_fungibility.when_can_preempt == MAY_STOP_SEARCH


def test_v1beta1_workload_priority_class_source() -> None:
    obj = workload("w")
    obj["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    obj["spec"]["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
    obj["spec"]["priorityClassName"] = "high"
    wl = parse.workload(obj, {"high": 1000})
    assert (wl.priority, wl.priority_class) == (1000, "high")


def test_v1beta2_workload_priority_class_ref_and_explicit_priority() -> None:
    obj = workload("w", priority=7)
    obj["spec"]["priorityClassRef"] = {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "high",
    }
    wl = parse.workload(obj, {"high": 1000})
    assert (wl.priority, wl.priority_class) == (7, "high")  # spec.priority wins, as Kueue stores it
    assert parse.workload(workload("w")).priority == 0  # nil priority counts as 0


def test_pod_requests_count_init_containers_overhead_and_limits() -> None:
    obj = workload("w")
    obj["spec"]["podSets"][0]["template"]["spec"] = {
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1"}}},
            {"name": "b", "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}},
        ],
        "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
        "overhead": {"cpu": "100m"},
    }
    requests = parse.workload(obj).pod_sets[0].requests
    assert requests == {"cpu": 2100, "memory": 2**30 * 1000}


def test_pod_requests_count_sidecars_once_as_kubernetes_pod_requests_does() -> None:
    """max(app containers + sidecars, each init container + the sidecars started before it)."""
    obj = workload("w")
    obj["spec"]["podSets"][0]["template"]["spec"] = {
        "containers": [{"name": "app", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        "initContainers": [
            {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
            {"name": "migrate", "resources": {"requests": {"cpu": "5", "memory": "512Mi"}}},
        ],
    }
    requests = parse.workload(obj).pod_sets[0].requests
    assert requests == {"cpu": 6000, "memory": 2**30 * 1000}  # was 7 cpu: the sidecar counted twice


def _cq_with(**spec: Any) -> dict[str, Any]:
    return cluster_queue("cq", quotas({"f": {"cpu": 1}}), **spec)


def _mutated(obj: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    target = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return obj


@pytest.mark.parametrize(
    ("obj", "path", "needle"),
    [
        (_mutated(_cq_with(), ["apiVersion"], "kueue.x-k8s.io/v1"), "apiVersion", "v1beta2"),
        (_mutated(_cq_with(), ["spec", "queueingStrategy"], "LIFO"), "spec.queueingStrategy", "Unsupported"),
        (
            _mutated(
                _cq_with(),
                ["spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota"],
                "lots",
            ),
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            "not a quantity",
        ),
        (
            _mutated(
                _cq_with(), ["spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota"], "-1"
            ),
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            "greater than or equal to 0",
        ),
        (
            _mutated(
                _cq_with(), ["spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "borrowingLimit"], 1
            ),
            "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit",
            "must be nil when cohort is empty",
        ),
        (
            _mutated(
                _cq_with(), ["spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "name"], "memory"
            ),
            "spec.resourceGroups[0].flavors[0].resources[0].name",
            "same order",
        ),
        (
            cluster_queue("cq", quotas({"f": {"cpu": 1}}) + quotas({"f": {"memory": 1}})),
            "spec.resourceGroups[1].flavors[0].name",
            "Duplicate",
        ),
        (
            cluster_queue("cq", quotas({"f": {"cpu": 1}}) + quotas({"g": {"cpu": 1}})),
            "spec.resourceGroups[1].coveredResources[0]",
            "Duplicate",
        ),
        (
            _cq_with(cohortName="c", resourceGroups=quotas({"f": {"cpu": (1, None, 2)}})),
            "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit",
            "less than or equal to nominalQuota",
        ),
        (
            _cq_with(
                preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}}
            ),
            "spec.preemption",
            "reclaimWithinCohort=Never",
        ),
        (
            _cq_with(flavorFungibility={"preference": "PreemptionOverBorrowing"}),
            "spec.flavorFungibility.preference",
            "TryNextFlavor",
        ),
        (
            _cq_with(admissionChecksStrategy={"admissionChecks": [{"name": "a", "onFlavors": ["nope"]}]}),
            "spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]",
            "not a flavor",
        ),
        (_mutated(_cq_with(), ["spec", "cohort"], "old-field"), "spec.cohort", "cohortName"),
        (_mutated(_cq_with(), ["metadata", "name"], "Bad_Name"), "metadata.name", "DNS-1123"),
    ],
)
def test_invalid_cluster_queues_name_the_field(obj: dict[str, Any], path: str, needle: str) -> None:
    with pytest.raises(InvalidObject) as exc:
        parse.cluster_queue(obj)
    assert exc.value.path == path
    assert needle in str(exc.value)
    assert str(exc.value).startswith("ClusterQueue")


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (lambda o: o["spec"].update(podSets=[]), "spec.podSets"),
        (lambda o: o["spec"]["podSets"][0].update(count=-1), "spec.podSets[0].count"),
        (lambda o: o["spec"]["podSets"][0].update(minCount=5), "spec.podSets[0].minCount"),
        (
            lambda o: o["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"][
                "requests"
            ].update(pods="1"),
            "spec.podSets[0].template.spec.containers[0].resources.requests.pods",
        ),
        (lambda o: o["spec"].update(priority="high"), "spec.priority"),
        (
            lambda o: o["spec"].update(
                priorityClassRef={"group": "scheduling.k8s.io", "kind": "WorkloadPriorityClass", "name": "x"}
            ),
            "spec.priorityClassRef",
        ),
        (lambda o: o["spec"]["podSets"].append(dict(o["spec"]["podSets"][0])), "spec.podSets"),
    ],
)
def test_invalid_workloads_name_the_field(mutate: Any, path: str) -> None:
    obj = workload("w")
    mutate(obj)
    with pytest.raises(InvalidObject) as exc:
        parse.workload(obj)
    assert exc.value.path == path


def test_cohort_limits_need_a_parent() -> None:
    obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "c"},
        "spec": {"resourceGroups": quotas({"f": {"cpu": (1, 2)}})},
    }
    with pytest.raises(InvalidObject, match="must be nil when parent is empty"):
        parse.cohort(obj)
    obj["spec"]["parentName"] = "root"
    assert parse.cohort(obj).parent == "root"


def test_admission_check_active_condition() -> None:
    obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": "a"},
        "spec": {"controllerName": "x"},
    }
    assert not parse.admission_check(obj).active
    obj["status"] = {"conditions": [{"type": "Active", "status": "True"}]}
    assert parse.admission_check(obj).active


def test_flavor_taint_effects_are_validated() -> None:
    obj = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "spot"},
        "spec": {"nodeTaints": [{"key": "spot", "value": "true", "effect": "Sometimes"}]},
    }
    with pytest.raises(InvalidObject) as exc:
        parse.resource_flavor(obj)
    assert exc.value.path == "spec.nodeTaints[0].effect"
