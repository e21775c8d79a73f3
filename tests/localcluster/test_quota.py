"""ResourceQuota admission and status: limits, messages, scopes, object counts, quantities."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kadmit.localcluster.interfaces import AdmissionError, AdmissionRequest
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.quantity import BINARY_SI, DECIMAL_EXPONENT, DECIMAL_SI, Quantity, format_quantity
from kadmit.localcluster.quota import ResourceQuotaAdmission, pod_limits, pod_requests
from kadmit.localcluster.store import Store
from tests.localcluster.conftest_admission import *  # noqa: F403
from tests.localcluster.conftest_admission import FakeStore, review_request

NS = "team-a"


def pod(
    name: str,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    phase: str = "Pending",
    **spec: Any,
) -> Obj:
    resources: Obj = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": resources}], **spec},
        "status": {"phase": phase},
    }


def quota(name: str, hard: dict[str, str], **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"hard": hard, **spec},
    }


def create(obj: Obj, group: str = "", resource: str = "pods", kind: str = "Pod") -> AdmissionRequest:
    return review_request(resource, obj, group=group, version="v1", kind=kind, namespace=NS)


def admit(
    plugin: ResourceQuotaAdmission, store: FakeStore, obj: Obj, resource: str = "pods", group: str = ""
) -> None:
    """Admit and persist, as the core does: check, store, recompute."""
    plugin.check(create(obj, group=group, resource=resource))
    store.put(group, resource, obj)
    plugin.recompute(NS)


def denial(plugin: ResourceQuotaAdmission, obj: Obj, resource: str = "pods", group: str = "") -> Obj:
    with pytest.raises(AdmissionError) as denied:
        plugin.check(create(obj, group=group, resource=resource))
    return denied.value.status


@pytest.fixture
def plugin(store: FakeStore) -> ResourceQuotaAdmission:
    return ResourceQuotaAdmission(store)


def test_exceeding_requests_is_forbidden_with_the_kubernetes_message(
    plugin: ResourceQuotaAdmission, store: FakeStore
) -> None:
    store.put("", "resourcequotas", quota("compute", {"requests.cpu": "1", "requests.memory": "1Gi"}))
    admit(plugin, store, pod("p1", {"cpu": "600m", "memory": "512Mi"}))

    status = denial(plugin, pod("p2", {"cpu": "500m", "memory": "256Mi"}))

    assert status["code"] == 403
    assert status["reason"] == "Forbidden"
    assert status["details"] == {"name": "p2", "kind": "pods"}
    assert status["message"] == (
        'pods "p2" is forbidden: exceeded quota: compute, requested: requests.cpu=500m, '
        "used: requests.cpu=600m, limited: requests.cpu=1"
    )
    admit(plugin, store, pod("p3", {"cpu": "400m", "memory": "512Mi"}))


def test_every_exceeded_resource_is_listed_in_order(plugin: ResourceQuotaAdmission, store: FakeStore) -> None:
    store.put(
        "", "resourcequotas", quota("compute", {"requests.cpu": "1", "limits.memory": "1Gi", "pods": "5"})
    )

    status = denial(plugin, pod("big", {"cpu": "2"}, {"memory": "2Gi"}))

    assert status["message"] == (
        'pods "big" is forbidden: exceeded quota: compute, requested: limits.memory=2Gi,requests.cpu=2, '
        "used: limits.memory=0,requests.cpu=0, limited: limits.memory=1Gi,requests.cpu=1"
    )


def test_pod_count_ignores_terminal_pods(plugin: ResourceQuotaAdmission, store: FakeStore) -> None:
    store.put("", "resourcequotas", quota("pods", {"pods": "2", "count/pods": "10"}))
    admit(plugin, store, pod("a", phase="Running"))
    admit(plugin, store, pod("b", phase="Pending"))

    assert denial(plugin, pod("c"))["message"] == (
        'pods "c" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2'
    )

    store.objects[("", "pods", NS, "a")]["status"]["phase"] = "Succeeded"
    plugin.recompute(NS)
    admit(plugin, store, pod("c"))
    status = store.get("", "resourcequotas", NS, "pods")
    assert status is not None
    assert status["status"] == {
        "hard": {"count/pods": "10", "pods": "2"},
        "used": {"count/pods": "3", "pods": "2"},
    }


def test_extended_resources_count_through_requests_prefix(
    plugin: ResourceQuotaAdmission, store: FakeStore
) -> None:
    store.put("", "resourcequotas", quota("gpus", {"requests.nvidia.com/gpu": "2"}))
    # Requests default to limits, as the API server's defaulting does.
    admit(plugin, store, pod("g1", limits={"nvidia.com/gpu": "1"}))
    admit(plugin, store, pod("g2", {"nvidia.com/gpu": "1"}))

    assert denial(plugin, pod("g3", {"nvidia.com/gpu": "1"}))["message"] == (
        'pods "g3" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, '
        "used: requests.nvidia.com/gpu=2, limited: requests.nvidia.com/gpu=2"
    )


def test_cpu_and_memory_quotas_require_every_container_to_specify_them(
    plugin: ResourceQuotaAdmission, store: FakeStore
) -> None:
    store.put("", "resourcequotas", quota("qtest", {"cpu": "10", "memory": "10Gi", "pods": "3"}))
    unspecified = pod("nginx-1")
    unspecified["spec"]["containers"].append(
        {"name": "log", "image": "x", "resources": {"requests": {"cpu": "1"}}}
    )

    assert denial(plugin, unspecified)["message"] == (
        'pods "nginx-1" is forbidden: failed quota: qtest: must specify cpu for: main; memory for: log,main'
    )


def test_pod_requests_follow_init_sidecar_and_overhead_rules() -> None:
    spec_pod = pod("p", {"cpu": "100m", "memory": "64Mi"}, {"cpu": "200m"})
    spec_pod["spec"]["containers"].append({"name": "second", "resources": {"requests": {"cpu": "200m"}}})
    spec_pod["spec"]["initContainers"] = [
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}},
        {"name": "setup", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
    ]
    spec_pod["spec"]["overhead"] = {"cpu": "10m"}

    requests = pod_requests(spec_pod)

    # containers 300m + sidecar 50m = 350m; during setup 500m + 50m = 550m; max 550m; + 10m overhead.
    assert str(requests["cpu"]) == "560m"
    assert str(requests["memory"]) == "1Gi"
    assert str(pod_limits(spec_pod)["cpu"]) == "210m"


def priority_class_scope(operator: str, *values: str) -> Obj:
    """A quota's ``scopeSelector`` on the pod's PriorityClass."""
    expression: Obj = {"scopeName": "PriorityClass", "operator": operator}
    if values:
        expression["values"] = list(values)
    return {"scopeSelector": {"matchExpressions": [expression]}}


@pytest.mark.parametrize(
    ("scopes", "pod_spec", "counted"),
    [
        ({"scopes": ["BestEffort"]}, {}, True),
        ({"scopes": ["BestEffort"]}, {"requests": {"cpu": "1"}}, False),
        ({"scopes": ["NotBestEffort"]}, {"requests": {"cpu": "1"}}, True),
        ({"scopes": ["Terminating"]}, {"activeDeadlineSeconds": 60}, True),
        ({"scopes": ["Terminating"]}, {}, False),
        ({"scopes": ["NotTerminating"]}, {}, True),
        ({"scopes": ["NotTerminating", "BestEffort"]}, {"activeDeadlineSeconds": 5}, False),
        ({"scopes": ["NotTerminating"]}, {"activeDeadlineSeconds": -1}, True),
        ({"scopes": ["CrossNamespacePodAffinity"]}, {}, False),
        (
            {"scopes": ["CrossNamespacePodAffinity"]},
            {
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"topologyKey": "zone", "labelSelector": {}, "namespaces": ["other"]}
                        ]
                    }
                }
            },
            True,
        ),
        (
            {"scopes": ["CrossNamespacePodAffinity"]},
            {
                "affinity": {
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 1, "podAffinityTerm": {"topologyKey": "zone", "namespaceSelector": {}}}
                        ]
                    }
                }
            },
            True,
        ),
        (
            {"scopes": ["CrossNamespacePodAffinity"]},
            {
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"topologyKey": "zone", "labelSelector": {}}
                        ]
                    }
                }
            },
            False,
        ),
        (priority_class_scope("In", "high"), {"priorityClassName": "high"}, True),
        (priority_class_scope("In", "high"), {"priorityClassName": "low"}, False),
        (priority_class_scope("NotIn", "high"), {}, True),
        (priority_class_scope("Exists"), {}, False),
        (priority_class_scope("DoesNotExist"), {}, True),
    ],
)
def test_scopes_decide_which_pods_a_quota_counts(
    plugin: ResourceQuotaAdmission, store: FakeStore, scopes: Obj, pod_spec: Obj, counted: bool
) -> None:
    store.put("", "resourcequotas", quota("scoped", {"pods": "0"}, **scopes))
    requests = pod_spec.pop("requests", None)
    candidate = pod("p", requests, **pod_spec)

    if counted:
        assert "exceeded quota: scoped" in denial(plugin, candidate)["message"]
    else:
        plugin.check(create(candidate))


def test_object_counts_for_core_and_grouped_kinds(plugin: ResourceQuotaAdmission, store: FakeStore) -> None:
    store.put(
        "", "resourcequotas", quota("objects", {"count/jobs.batch": "1", "configmaps": "1", "services": "0"})
    )
    job = {"metadata": {"name": "j1", "namespace": NS}}
    admit(plugin, store, job, resource="jobs", group="batch")

    status = denial(plugin, {"metadata": {"name": "j2", "namespace": NS}}, resource="jobs", group="batch")
    assert status["message"] == (
        'jobs.batch "j2" is forbidden: exceeded quota: objects, requested: count/jobs.batch=1, '
        "used: count/jobs.batch=1, limited: count/jobs.batch=1"
    )
    assert status["details"] == {"name": "j2", "kind": "jobs", "group": "batch"}
    admit(plugin, store, {"metadata": {"name": "cm", "namespace": NS}}, resource="configmaps")
    assert (
        "requested: configmaps=1, used: configmaps=1"
        in denial(plugin, {"metadata": {"name": "cm2", "namespace": NS}}, resource="configmaps")["message"]
    )
    assert (
        "limited: services=0"
        in denial(plugin, {"metadata": {"name": "s", "namespace": NS}}, resource="services")["message"]
    )
    # Pods are not limited by a quota that tracks only object counts of other kinds.
    plugin.check(create(pod("free")))


def test_status_is_written_only_when_it_changes(plugin: ResourceQuotaAdmission, store: FakeStore) -> None:
    store.put(
        "",
        "resourcequotas",
        quota("compute", {"requests.cpu": "2000m", "limits.memory": "1024Mi", "pods": "4"}),
    )
    plugin.recompute(NS)
    assert store.status_writes[-1][4] == {
        "hard": {"limits.memory": "1Gi", "pods": "4", "requests.cpu": "2"},
        "used": {"limits.memory": "0", "pods": "0", "requests.cpu": "0"},
    }
    admit(plugin, store, pod("p1", {"cpu": "250m"}, {"memory": "512Mi"}))
    admit(plugin, store, pod("p2", {"cpu": "250m"}, {"memory": "512Mi"}))
    assert store.status_writes[-1][4]["used"] == {"limits.memory": "1Gi", "pods": "2", "requests.cpu": "500m"}
    writes = len(store.status_writes)

    plugin.recompute(NS)

    assert len(store.status_writes) == writes


def test_validate_finishes_without_yielding_to_the_event_loop(
    plugin: ResourceQuotaAdmission, store: FakeStore
) -> None:
    store.put("", "resourcequotas", quota("compute", {"pods": "0"}))
    coroutine = plugin.validate(create(pod("p")))
    # A coroutine that never awaits runs to completion on its first step.
    with pytest.raises(AdmissionError):
        coroutine.send(None)


def test_updates_deletes_and_subresources_are_not_charged(
    plugin: ResourceQuotaAdmission, store: FakeStore
) -> None:
    store.put("", "resourcequotas", quota("compute", {"pods": "0"}))
    for changed in (
        replace(create(pod("p")), operation="UPDATE", old_object=pod("p")),
        replace(create(pod("p")), operation="DELETE", object=None, old_object=pod("p")),
        replace(create(pod("p")), subresource="status"),
    ):
        plugin.check(changed)


def test_an_invalid_quantity_is_rejected_as_invalid(plugin: ResourceQuotaAdmission, store: FakeStore) -> None:
    store.put("", "resourcequotas", quota("compute", {"requests.cpu": "1"}))

    status = denial(plugin, pod("p", {"cpu": "lots"}))

    assert status["code"] == 422
    assert "spec.containers[0].resources.requests[cpu]: Invalid value: 'lots'" in status["message"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1", "1"),
        ("500m", "500m"),
        ("0.5", "500m"),
        ("1.5", "1500m"),
        ("2000", "2k"),
        ("1500", "1500"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1536Mi", "1536Mi"),
        ("0.5Gi", "512Mi"),
        ("512", "512"),
        ("1e3", "1e3"),
        ("100u", "100u"),
        ("0.0000000001", "1n"),
        ("0", "0"),
    ],
)
def test_quantities_print_canonically(text: str, expected: str) -> None:
    assert str(Quantity.parse(text)) == expected


def test_sums_keep_the_first_non_zero_format() -> None:
    total = Quantity(Fraction(0)) + Quantity.parse("1Gi") + Quantity.parse("1Gi")
    assert total.format == BINARY_SI
    assert str(total) == "2Gi"
    assert format_quantity(Fraction(3, 2), DECIMAL_SI) == "1500m"
    assert format_quantity(Fraction(2000), DECIMAL_EXPONENT) == "2e3"


@given(
    nanos=st.integers(min_value=-(10**24), max_value=10**24),
    fmt=st.sampled_from([BINARY_SI, DECIMAL_SI, DECIMAL_EXPONENT]),
)
def test_printing_then_parsing_gives_back_the_same_amount(nanos: int, fmt: str) -> None:
    amount = Fraction(nanos, 10**9)
    printed = format_quantity(amount, fmt)
    assert Quantity.parse(printed).value == amount, printed


async def test_status_follows_the_real_store_by_itself() -> None:
    store = Store()
    plugin = ResourceQuotaAdmission(store)
    store.create("", "namespaces", {"metadata": {"name": NS}})
    store.create("", "resourcequotas", quota("compute", {"requests.cpu": "1", "count/configmaps": "5"}))
    await asyncio.sleep(0)
    stored = store.get("", "resourcequotas", NS, "compute")
    assert stored is not None
    assert stored["status"]["used"] == {"count/configmaps": "0", "requests.cpu": "0"}

    store.create("", "pods", pod("p1", {"cpu": "300m"}))
    store.create("", "pods", pod("p2", {"cpu": "300m"}))
    store.create("", "configmaps", {"metadata": {"name": "cm", "namespace": NS}})
    await asyncio.sleep(0)
    stored = store.get("", "resourcequotas", NS, "compute")
    assert stored is not None
    assert stored["status"]["used"] == {"count/configmaps": "1", "requests.cpu": "600m"}

    store.remove("", "pods", NS, "p1")
    await asyncio.sleep(0)
    stored = store.get("", "resourcequotas", NS, "compute")
    assert stored is not None
    assert stored["status"]["used"]["requests.cpu"] == "300m"
    assert plugin.usage(stored)["requests.cpu"] == Quantity.parse("300m")


async def test_a_pod_that_finishes_stops_counting() -> None:
    store = Store()
    plugin = ResourceQuotaAdmission(store)
    store.create("", "resourcequotas", quota("compute", {"requests.cpu": "1", "count/pods": "9"}))
    running = store.create("", "pods", pod("p1", {"cpu": "700m"}, phase="Running"))
    await asyncio.sleep(0)
    assert "exceeded quota: compute" in denial(plugin, pod("p2", {"cpu": "500m"}))["message"]

    store.replace(
        "", "pods", {**running, "metadata": dict(running["metadata"]), "status": {"phase": "Succeeded"}}
    )
    await asyncio.sleep(0)

    plugin.check(create(pod("p2", {"cpu": "500m"})))
    stored = store.get("", "resourcequotas", NS, "compute")
    assert stored is not None
    assert stored["status"]["used"] == {"count/pods": "1", "requests.cpu": "0"}


def service(name: str, kind: str = "ClusterIP", ports: int = 1, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "namespace": NS},
        "spec": {"type": kind, "ports": [{"port": 80 + i} for i in range(ports)], **spec},
    }


def claim(name: str, storage: str, storage_class: str | None = None) -> Obj:
    spec: Obj = {"resources": {"requests": {"storage": storage}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    return {"metadata": {"name": name, "namespace": NS}, "spec": spec}


def update(old: Obj, new: Obj, resource: str) -> AdmissionRequest:
    return replace(create(new, resource=resource), operation="UPDATE", old_object=old)


def test_services_count_load_balancers_and_node_ports(
    plugin: ResourceQuotaAdmission, store: FakeStore
) -> None:
    store.put("", "resourcequotas", quota("svc", {"services.loadbalancers": "1", "services.nodeports": "3"}))
    admit(plugin, store, service("lb", "LoadBalancer", ports=2), resource="services")
    admit(plugin, store, service("internal", ports=5), resource="services")
    admit(plugin, store, service("lb-no-ports", "ClusterIP"), resource="services")

    assert denial(plugin, service("np", "NodePort", ports=2), resource="services")["message"] == (
        'services "np" is forbidden: exceeded quota: svc, requested: services.nodeports=2, '
        "used: services.nodeports=2, limited: services.nodeports=3"
    )
    # An update is charged by what it adds.
    with pytest.raises(AdmissionError) as denied:
        plugin.check(
            update(
                service("lb-no-ports"),
                service("lb-no-ports", "LoadBalancer", allocateLoadBalancerNodePorts=False),
                "services",
            )
        )
    assert (
        "requested: services.loadbalancers=1, used: services.loadbalancers=1"
        in denied.value.status["message"]
    )
    plugin.check(
        update(service("lb", "LoadBalancer", ports=2), service("lb", "LoadBalancer", ports=1), "services")
    )
    status = store.get("", "resourcequotas", NS, "svc")
    assert status is not None
    assert status["status"]["used"] == {"services.loadbalancers": "1", "services.nodeports": "2"}


def test_claims_count_storage_overall_and_per_storage_class(
    plugin: ResourceQuotaAdmission, store: FakeStore
) -> None:
    gold = "gold.storageclass.storage.k8s.io"
    store.put(
        "",
        "resourcequotas",
        quota(
            "storage",
            {"requests.storage": "10Gi", f"{gold}/requests.storage": "5Gi", "persistentvolumeclaims": "5"},
        ),
    )
    admit(plugin, store, claim("fast", "4Gi", "gold"), resource="persistentvolumeclaims")

    assert denial(plugin, claim("fast-2", "2Gi", "gold"), resource="persistentvolumeclaims")["message"] == (
        'persistentvolumeclaims "fast-2" is forbidden: exceeded quota: storage, '
        f"requested: {gold}/requests.storage=2Gi, used: {gold}/requests.storage=4Gi, "
        f"limited: {gold}/requests.storage=5Gi"
    )
    with pytest.raises(AdmissionError) as grown:
        plugin.check(
            update(claim("fast", "4Gi", "gold"), claim("fast", "6Gi", "gold"), "persistentvolumeclaims")
        )
    assert f"requested: {gold}/requests.storage=2Gi" in grown.value.status["message"]
    admit(plugin, store, claim("slow", "6Gi"), resource="persistentvolumeclaims")
    assert (
        "requested: requests.storage=1Gi, used: requests.storage=10Gi"
        in denial(plugin, claim("more", "1Gi"), resource="persistentvolumeclaims")["message"]
    )
    status = store.get("", "resourcequotas", NS, "storage")
    assert status is not None
    assert status["status"]["used"] == {
        f"{gold}/requests.storage": "4Gi",
        "persistentvolumeclaims": "2",
        "requests.storage": "10Gi",
    }
