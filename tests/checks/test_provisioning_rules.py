"""The ProvisioningRequest check's rules (kueue-contract.md §6) on in-memory caches.

Creation and cleanup against a real API server, with the autoscaler stand-in, are in
test_provisioning_cluster.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kadmit.checks.plugin import CheckContext, ParametersError
from kadmit.checks.provisioning import (
    CONSUME_ANNOTATION,
    NOT_NEEDED,
    ProvisioningCheck,
    ProvisioningConfig,
    attempt_of,
    backoff_seconds,
    merge_groups,
    parse_config,
    qualifying_pod_sets,
    request_name,
    template_name,
)
from kadmit.checks.verdict import Pending, Ready, Rejected, Retry
from kadmit.kube.resources import PROVISIONING_REQUESTS, RESOURCE_FLAVORS
from tests.checks.memory import memory_cluster

Obj = dict[str, Any]


def prc(**spec: object) -> Obj:
    return {
        "metadata": {"name": "prov"},
        "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io", **spec},
    }


def test_config_defaults_are_kueues_and_bad_values_are_refused() -> None:
    config = parse_config(prc())
    assert (config.backoff_limit_count, config.backoff_base_seconds, config.backoff_max_seconds) == (
        3,
        60,
        1800,
    )
    with pytest.raises(ParametersError, match="provisioningClassName"):
        parse_config({"metadata": {"name": "x"}, "spec": {}})
    with pytest.raises(ParametersError, match="backoffLimitCount"):
        parse_config(prc(retryStrategy={"backoffLimitCount": -1}))
    with pytest.raises(ParametersError, match="podSetMergePolicy"):
        parse_config(prc(podSetMergePolicy="Whatever"))


def test_names_are_kueues_and_long_ones_are_shortened_with_a_hash() -> None:
    assert request_name("job-a-1b2c3", "prov", 2) == "job-a-1b2c3-prov-2"
    assert template_name("job-a-1b2c3-prov-2", "main") == "ppt-job-a-1b2c3-prov-2-main"
    long = request_name("w" * 250, "check", 1)
    assert len(long) == 253 and long[247] == "-"
    assert attempt_of({"metadata": {"name": long}}, "w" * 250, "check") == 1
    assert attempt_of({"metadata": {"name": "wl-check-7"}}, "wl", "check") == 7
    assert attempt_of({"metadata": {"name": "wl-other-7"}}, "wl", "check") is None


def test_backoff_doubles_per_retry_up_to_the_maximum() -> None:
    config = ProvisioningConfig("p", "c", backoff_base_seconds=10, backoff_max_seconds=35)
    assert [backoff_seconds(config, n) for n in range(4)] == [10, 20, 35, 35]


def gpu_workload(count: int = 2, **status: object) -> Obj:
    return {
        "metadata": {"namespace": "ns", "name": "wl", "uid": "wl-uid"},
        "spec": {
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
                        }
                    },
                },
                {
                    "name": "driver",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                    },
                },
            ]
        },
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {"name": "main", "count": count, "flavors": {"nvidia.com/gpu": "gpu"}},
                    {"name": "driver", "count": 1, "flavors": {"cpu": "gpu"}},
                ],
            },
            **status,
        },
    }


def test_only_pod_sets_using_a_managed_resource_need_a_request() -> None:
    with_managed = ProvisioningConfig("p", "c", managed_resources=frozenset({"nvidia.com/gpu"}))
    assert [ps["name"] for ps, _ in qualifying_pod_sets(gpu_workload(), with_managed)] == ["main"]
    assert [ps["name"] for ps, _ in qualifying_pod_sets(gpu_workload(), ProvisioningConfig("p", "c"))] == [
        "main",
        "driver",
    ]
    assert qualifying_pod_sets(gpu_workload(count=0), with_managed) == []


def test_merge_policies_add_counts_under_the_first_name() -> None:
    a = {"spec": {"containers": [{"name": "x", "image": "a", "resources": {"requests": {"cpu": "1"}}}]}}
    b = {"spec": {"containers": [{"name": "y", "image": "b", "resources": {"requests": {"cpu": "1"}}}]}}
    items = [("one", a, 2), ("two", b, 3), ("three", a, 1)]
    assert [(n, c) for n, _, c in merge_groups(items, "IdenticalPodTemplates")] == [("one", 3), ("two", 3)]
    assert [(n, c) for n, _, c in merge_groups(items, "IdenticalWorkloadSchedulingRequirements")] == [
        ("one", 6)
    ]
    assert merge_groups(items, None) == items


def request(attempt: int, *conditions: tuple[str, str], details: Obj | None = None) -> Obj:
    name = request_name("wl", "prov", attempt)
    return {
        "metadata": {
            "namespace": "ns",
            "name": name,
            "uid": f"pr-{attempt}",
            "ownerReferences": [{"kind": "Workload", "name": "wl", "uid": "wl-uid", "controller": True}],
        },
        "spec": {
            "provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
            "parameters": {},
            "podSets": [{"podTemplateRef": {"name": template_name(name, "main")}, "count": 2}],
        },
        "status": {
            "conditions": [{"type": t, "status": "True", "message": m} for t, m in conditions],
            "provisioningClassDetails": details or {},
        },
    }


async def evaluate(workload: Obj, prs: list[Obj], state: Obj | None = None, **config: Any) -> object:
    cluster, _ = memory_cluster({PROVISIONING_REQUESTS: prs, RESOURCE_FLAVORS: []})
    parsed = parse_config(prc(managedResources=["nvidia.com/gpu"], **config))
    context = CheckContext("prov", {}, state, parsed, datetime(2026, 1, 1, tzinfo=UTC), cluster)
    return await ProvisioningCheck().evaluate(workload, context)


RETRY = {"retryStrategy": {"backoffLimitCount": 2, "backoffBaseSeconds": 5, "backoffMaxSeconds": 60}}


async def test_provisioned_is_ready_with_the_consume_annotations_and_detail_node_selector() -> None:
    pr = request(1, ("Accepted", ""), ("Provisioned", "capacity is ready"), details={"pool": "gpu-a"})
    verdict = await evaluate(
        gpu_workload(),
        [pr],
        podSetUpdates={
            "nodeSelector": [
                {"key": "pool", "valueFromProvisioningClassDetail": "pool"},
                {"key": "x", "valueFromProvisioningClassDetail": "x"},
            ]
        },
    )
    assert isinstance(verdict, Ready) and verdict.message == "capacity is ready"
    [update] = verdict.pod_set_updates
    assert update.name == "main" and update.node_selector == {"pool": "gpu-a"}
    assert update.annotations[CONSUME_ANNOTATION] == "wl-prov-1"


async def test_failure_retries_once_per_attempt_with_growing_delay_then_rejects() -> None:
    first = await evaluate(
        gpu_workload(), [request(1, ("Failed", "no nodes"))], {"state": "Pending"}, **RETRY
    )
    assert first == Retry("Retrying after failure: no nodes", after=5)
    second = await evaluate(
        gpu_workload(), [request(2, ("Failed", "no nodes"))], {"state": "Pending", "retryCount": 1}, **RETRY
    )
    assert second == Retry("Retrying after failure: no nodes", after=10)
    last = await evaluate(
        gpu_workload(), [request(3, ("Failed", "no nodes"))], {"state": "Pending", "retryCount": 2}, **RETRY
    )
    assert last == Rejected("no nodes")


async def test_capacity_revoked_rejects_even_after_admission_and_expired_bookings_only_before() -> None:
    admitted = gpu_workload()
    admitted["status"]["conditions"].append({"type": "Admitted", "status": "True"})
    revoked = await evaluate(
        admitted, [request(1, ("Provisioned", ""), ("CapacityRevoked", "nodes gone"))], {"state": "Ready"}
    )
    assert revoked == Rejected("nodes gone")
    expired = request(1, ("Provisioned", "ok"), ("BookingExpired", "too late"))
    assert isinstance(await evaluate(admitted, [expired], {"state": "Ready"}), Ready)
    assert await evaluate(gpu_workload(), [expired], {"state": "Pending"}, **RETRY) == Retry(
        "Retrying after booking expired: too late", after=5
    )


async def test_accepted_but_not_provisioned_is_pending_with_the_provisioned_message() -> None:
    pr = request(1, ("Accepted", ""))
    pr["status"]["conditions"].append(
        {"type": "Provisioned", "status": "False", "message": "waiting for nodes"}
    )
    assert await evaluate(gpu_workload(), [pr]) == Pending("waiting for nodes")


async def test_no_pod_set_needs_capacity_means_ready_without_a_request() -> None:
    assert await evaluate(gpu_workload(count=0), []) == Ready(NOT_NEEDED)
