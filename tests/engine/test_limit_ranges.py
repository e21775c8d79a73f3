"""A namespace's LimitRanges, as Kueue applies them: defaults counted, violations Misconfigured.

Kueue's ``AdjustResources`` gives a container its LimitRange defaults before the quota it needs
is counted, and ``ValidateLimitRange`` keeps a Workload pending while a container or a pod
breaks a LimitRange's min or max (``pkg/workload/resources.go``, ``pkg/util/limitrange``).
"""

from __future__ import annotations

from typing import Any

import pytest

from kadmit.engine import Engine, InvalidObject

from .conftest import (
    T0,
    admitted_names,
    admitted_status,
    cluster_queue,
    flavor,
    load,
    local_queue,
    pending_by_name,
    quotas,
    workload,
)

SPEC = "spec.podSets[0].template.spec"
UNSATISFIED = "resources didn't satisfy LimitRange constraints"
ABOVE = "requests must not be above the limitRange max"


def limit_range(name: str, *limits: dict[str, Any], namespace: str = "sales") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"limits": list(limits)},
    }


def sales() -> Engine:
    return load(
        flavor("f"),
        cluster_queue("cq", quotas({"f": {"cpu": 10, "memory": "10Gi"}})),
        local_queue("lq", "cq", namespace="sales"),
        local_queue("lq", "cq", namespace="other"),
    )


def container(**resources: dict[str, str]) -> dict[str, Any]:
    return {"name": "c", "image": "busybox", "resources": resources}


def sales_workload(
    name: str, *containers: dict[str, Any], namespace: str = "sales", **kw: Any
) -> dict[str, Any]:
    ps = {"name": "main", "count": kw.pop("count", 1), "template": {"spec": {"containers": list(containers)}}}
    return workload(name, namespace=namespace, pod_sets=[ps], **kw)


def usage(decisions: Any, name: str) -> dict[str, str]:
    [reservation] = [r for r in decisions.reservations if r.workload[1] == name]
    return dict(reservation.admission["podSetAssignments"][0]["resourceUsage"])


def test_a_container_above_a_limit_range_max_waits_misconfigured_in_kueues_words() -> None:
    # Kueue's TestSchedule "container does not satisfy limitRange constraints", with the
    # container's limit written out (see the next test for what an API server's defaults do).
    engine = sales()
    engine.upsert(limit_range("alpha", {"type": "Container", "max": {"cpu": "300m"}}))
    engine.upsert_workload(sales_workload("new", container(requests={"cpu": "500m"}, limits={"cpu": "500m"})))
    assert pending_by_name(engine.schedule(T0)) == {
        "new": (
            "Misconfigured",
            f'{UNSATISFIED}: {SPEC}.containers[0]: Invalid value: ["cpu"]: '
            "requests must not be above the limitRange max",
        )
    }


def test_a_max_is_the_default_limit_as_the_api_server_stores_it() -> None:
    # SetDefaults_LimitRangeItem: a Container item's missing default is its max. The container's
    # limit is then 300m, and Kueue finds its 500m request above its limit first.
    engine = sales()
    engine.upsert(limit_range("alpha", {"type": "Container", "max": {"cpu": "300m"}}))
    engine.upsert_workload(sales_workload("new", container(requests={"cpu": "500m"})))
    engine.upsert_workload(sales_workload("bare", container(), created=1))
    decisions = engine.schedule(T0)
    assert pending_by_name(decisions) == {
        "new": (
            "Misconfigured",
            f'resources validation failed: {SPEC}.containers[0]: Invalid value: ["cpu"]: '
            "requests must not exceed its limits",
        )
    }
    assert usage(decisions, "bare") == {"cpu": "300m"}  # defaultRequest from default from max


def test_defaults_are_counted_in_the_quota_a_workload_needs() -> None:
    engine = sales()
    engine.upsert(
        limit_range(
            "defaults",
            {
                "type": "Container",
                "default": {"cpu": "1", "memory": "1Gi"},
                "defaultRequest": {"cpu": "500m"},
            },
        )
    )
    engine.upsert_workload(sales_workload("bare", container(), count=3))
    engine.upsert_workload(
        sales_workload("own", container(requests={"cpu": "2"}, limits={"cpu": "4"}), created=1)
    )
    decisions = engine.schedule(T0)
    # bare: requests 500m cpu (defaultRequest), 1Gi memory (the default limit stands in)
    assert usage(decisions, "bare") == {"cpu": "1500m", "memory": "3Gi"}
    # own: its own cpu kept, memory from the default limit
    assert usage(decisions, "own") == {"cpu": "2", "memory": "1Gi"}


def test_below_a_min_and_a_pod_above_its_max_are_named_init_containers_first() -> None:
    engine = sales()
    engine.upsert(
        limit_range(
            "alpha",
            {"type": "Container", "min": {"memory": "1Gi"}},
            {"type": "Pod", "max": {"cpu": "2"}},
        )
    )
    init = container(requests={"cpu": "1500m", "memory": "512Mi"})
    spec = {
        "initContainers": [init],
        "containers": [
            container(requests={"cpu": "1500m", "memory": "1Gi"}),
            container(requests={"cpu": "1", "memory": "2Gi"}),
        ],
    }
    engine.upsert_workload(
        workload(
            "big", namespace="sales", pod_sets=[{"name": "main", "count": 1, "template": {"spec": spec}}]
        )
    )
    below = "requests must not be below the limitRange min"
    above = "requests must not be above the limitRange max"
    assert pending_by_name(engine.schedule(T0)) == {
        "big": (
            "Misconfigured",
            f'{UNSATISFIED}: [{SPEC}.initContainers[0]: Invalid value: ["memory"]: {below}, '
            f'{SPEC}: Invalid value: ["cpu"]: {above}]',
        )
    }


def test_several_limit_ranges_keep_the_least_max_and_the_first_default_by_name() -> None:
    engine = sales()
    engine.upsert(
        limit_range("b", {"type": "Container", "max": {"cpu": "1"}, "defaultRequest": {"cpu": "900m"}})
    )
    engine.upsert(
        limit_range(
            "a",
            {
                "type": "Container",
                "max": {"cpu": "2"},
                "default": {"cpu": "1"},
                "defaultRequest": {"cpu": "100m"},
            },
        )
    )
    engine.upsert_workload(sales_workload("bare", container(), count=2))
    engine.upsert_workload(
        sales_workload("wide", container(requests={"cpu": "1500m"}, limits={"cpu": "1500m"}))
    )
    decisions = engine.schedule(T0)
    # "a" comes first: its defaults (limit 1, request 100m); the least max, b's 1, bounds both
    assert usage(decisions, "bare") == {"cpu": "200m"}
    assert pending_by_name(decisions)["wide"] == (
        "Misconfigured",
        f'{UNSATISFIED}: {SPEC}.containers[0]: Invalid value: ["cpu"]: {ABOVE}',
    )


def test_a_limit_range_bears_on_its_own_namespace_only() -> None:
    engine = sales()
    engine.upsert(limit_range("alpha", {"type": "Container", "max": {"cpu": "300m"}}))
    engine.upsert_workload(
        sales_workload("elsewhere", container(requests={"cpu": "1"}, limits={"cpu": "1"}), namespace="other")
    )
    assert admitted_names(engine.schedule(T0)) == ["elsewhere"]


def test_a_pending_workload_fed_again_is_read_under_the_new_limit_ranges() -> None:
    engine = sales()
    big = sales_workload("big", container(requests={"cpu": "1"}, limits={"cpu": "1"}))
    big["metadata"]["generation"] = 1  # same spec: the engine would keep its reading, if nothing else changed
    engine.upsert(limit_range("alpha", {"type": "Container", "max": {"cpu": "500m"}}))
    engine.upsert_workload(big)
    assert pending_by_name(engine.schedule(T0))["big"][0] == "Misconfigured"
    engine.upsert(limit_range("alpha", {"type": "Container", "max": {"cpu": "2"}}))
    engine.upsert_workload(big)
    assert admitted_names(engine.schedule(T0 + 1)) == ["big"]


def test_a_deleted_limit_range_no_longer_bears() -> None:
    engine = sales()
    engine.upsert(limit_range("alpha", {"type": "Container", "defaultRequest": {"cpu": "2"}}))
    engine.delete_limit_range("sales", "alpha")
    engine.upsert_workload(sales_workload("bare", container(requests={"memory": "1Gi"})))
    assert usage(engine.schedule(T0), "bare") == {"memory": "1Gi"}


def test_an_admitted_workload_keeps_what_it_was_charged() -> None:
    # Its quota is what status.admission says, whatever LimitRange comes later.
    engine = sales()
    status = admitted_status("cq", {"cpu": "f"}, {"cpu": "9"})
    engine.upsert_workload(workload("running", namespace="sales", status=status, cpu="9"))
    engine.upsert(limit_range("alpha", {"type": "Container", "max": {"cpu": "1"}}))
    engine.upsert_workload(workload("running", namespace="sales", status=status, cpu="9"))
    engine.upsert_workload(sales_workload("next", container(requests={"cpu": "2"}, limits={"cpu": "2"})))
    decisions = engine.schedule(T0)
    assert admitted_names(decisions) == []
    assert pending_by_name(decisions)["next"][0] == "Misconfigured"
    assert engine.cluster_queue_status("cq")["flavorsReservation"][0]["resources"][0]["total"] == "9"


@pytest.mark.parametrize(
    ("item", "path"),
    [
        ({"type": "Node", "max": {"cpu": "1"}}, "spec.limits[0].type"),
        ({"max": {"cpu": "1"}}, "spec.limits[0].type"),
        ({"type": "Container", "max": {"cpu": "lots"}}, "spec.limits[0].max.cpu"),
        ({"type": "Container", "min": {"memory": "-1"}}, "spec.limits[0].min.memory"),
    ],
)
def test_an_invalid_limit_range_is_refused_naming_the_field(item: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidObject, match=path.replace("[", r"\[").replace("]", r"\]")):
        sales().upsert(limit_range("bad", item))


def test_a_pending_decision_gives_the_requests_as_counted() -> None:
    # Kueue's status.resourceRequests for a Workload it leaves pending: per pod set, what all its
    # pods ask for, LimitRange defaults in, reclaimable pods out.
    engine = sales()
    engine.upsert(limit_range("defaults", {"type": "Container", "defaultRequest": {"memory": "1Gi"}}))
    big = sales_workload("big", container(requests={"cpu": "4"}), count=4)
    big["status"] = {"reclaimablePods": [{"name": "main", "count": 1}]}
    engine.upsert_workload(big)
    [pending] = engine.schedule(T0).pending
    assert pending.reason == "ExceedsMaxQuota"  # 3 x 4 cpu > 10
    assert pending.resource_requests() == [{"name": "main", "resources": {"cpu": "12", "memory": "3Gi"}}]
