"""Pod-level resources (a pod template's ``spec.resources``, KEP-2837), as Kubernetes'
``PodRequests`` and Kueue count them: pod-level requests of cpu, memory and hugepages replace
the containers' sum, a pod-level limit stands in for a missing request, overhead comes on top,
and a pod-level request above its limit is Kueue's ``ValidateResources`` error."""

from __future__ import annotations

from typing import Any

from .conftest import T0, cluster_queue, flavor, load, local_queue, pending_by_name, quotas, workload


def pod_set(resources: dict[str, Any], count: int = 2, **spec: Any) -> dict[str, Any]:
    containers = [
        {"name": "a", "image": "busybox", "resources": {"requests": {"cpu": "1", "example.com/nic": "1"}}},
        {"name": "b", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
    ]
    return {
        "name": "main",
        "count": count,
        "template": {"spec": {"containers": containers, "resources": resources, **spec}},
    }


def usage(resources: dict[str, Any], **spec: Any) -> dict[str, str]:
    engine = load(
        flavor("f"),
        cluster_queue("cq", quotas({"f": {"cpu": 20, "memory": "20Gi", "example.com/nic": 10}})),
        local_queue("lq", "cq"),
    )
    engine.upsert_workload(workload("w", pod_sets=[pod_set(resources, **spec)]))
    [reservation] = engine.schedule(T0).reservations
    return dict(reservation.admission["podSetAssignments"][0]["resourceUsage"])


def test_pod_level_requests_replace_the_containers_sum_for_cpu_and_memory() -> None:
    assert usage({}) == {"cpu": "4", "memory": "2Gi", "example.com/nic": "2"}
    # 3 cpu for the pod instead of 2; the nic is not a pod-level resource: the containers' sum
    assert usage({"requests": {"cpu": "3", "example.com/nic": "5"}}) == {
        "cpu": "6",
        "memory": "2Gi",
        "example.com/nic": "2",
    }
    # a pod-level limit stands in for the missing request; the overhead comes on top
    assert usage({"limits": {"memory": "4Gi"}}, overhead={"memory": "1Gi"}) == {
        "cpu": "4",
        "memory": "10Gi",
        "example.com/nic": "2",
    }


def test_a_pod_level_request_above_its_limit_waits_misconfigured() -> None:
    engine = load(flavor("f"), cluster_queue("cq", quotas({"f": {"cpu": 20}})), local_queue("lq", "cq"))
    over = {"requests": {"cpu": "3"}, "limits": {"cpu": "2"}}
    engine.upsert_workload(workload("w", pod_sets=[pod_set(over)]))
    assert pending_by_name(engine.schedule(T0)) == {
        "w": (
            "Misconfigured",
            'resources validation failed: spec.podSets[0].template.spec.resources: Invalid value: ["cpu"]: '
            "requests must not exceed its limits",
        )
    }
