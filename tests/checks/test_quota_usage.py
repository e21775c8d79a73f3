"""Pod charges under a ResourceQuota: effective requests, scopes, required declarations."""

from __future__ import annotations

import pytest

from kadmit.checks.quota_usage import (
    NANO,
    describe,
    missing_declarations,
    pod_totals,
    pod_usage,
    quota_matches,
    to_nano,
)


def container(
    requests: dict[str, str] | None = None, limits: dict[str, str] | None = None, **extra: object
) -> dict[str, object]:
    resources: dict[str, object] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": "c", "image": "busybox", "resources": resources, **extra}


def test_effective_requests_take_the_larger_of_app_containers_and_each_init_plus_overhead() -> None:
    spec = {
        "containers": [container({"cpu": "500m"}), container({"cpu": "250m", "memory": "1Gi"})],
        "initContainers": [container({"cpu": "2"}), container({"cpu": "100m"}, restartPolicy="Always")],
        "overhead": {"cpu": "10m"},
    }
    totals = pod_totals(spec, "requests")
    # app 750m + sidecar 100m = 850m; the plain init runs before the sidecar starts: 2 → max 2; +10m.
    assert totals["cpu"] == to_nano("2010m")
    assert totals["memory"] == to_nano("1Gi")


def test_limits_stand_in_for_missing_requests_and_keys_map_to_requests_or_limits() -> None:
    spec = {"containers": [container(limits={"cpu": "1", "nvidia.com/gpu": "2"})]}
    usage = pod_usage(
        spec,
        [
            "cpu",
            "requests.cpu",
            "limits.cpu",
            "requests.nvidia.com/gpu",
            "pods",
            "count/pods",
            "count/jobs.batch",
            "services",
        ],
    )
    assert {k: v / NANO for k, v in usage.items()} == {
        "cpu": 1,
        "requests.cpu": 1,
        "limits.cpu": 1,
        "requests.nvidia.com/gpu": 2,
        "pods": 1,
        "count/pods": 1,
        "count/jobs.batch": 0,
        "services": 0,
    }


@pytest.mark.parametrize(
    ("quota_spec", "pod_spec", "matches"),
    [
        ({"scopes": ["Terminating"]}, {"activeDeadlineSeconds": 60}, True),
        ({"scopes": ["Terminating"]}, {}, False),
        ({"scopes": ["NotTerminating"]}, {}, True),
        ({"scopes": ["BestEffort"]}, {"containers": [container()]}, True),
        ({"scopes": ["NotBestEffort"]}, {"containers": [container({"cpu": "1"})]}, True),
        (
            {
                "scopeSelector": {
                    "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
                }
            },
            {"priorityClassName": "high"},
            True,
        ),
        (
            {
                "scopeSelector": {
                    "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
                }
            },
            {"priorityClassName": "low"},
            False,
        ),
        (
            {
                "scopeSelector": {
                    "matchExpressions": [
                        {"scopeName": "PriorityClass", "operator": "NotIn", "values": ["high"]}
                    ]
                }
            },
            {},
            True,
        ),
        (
            {"scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "Exists"}]}},
            {},
            False,
        ),
        (
            {
                "scopes": ["NotTerminating"],
                "scopeSelector": {
                    "matchExpressions": [{"scopeName": "PriorityClass", "operator": "DoesNotExist"}]
                },
            },
            {"activeDeadlineSeconds": 5},
            False,
        ),
    ],
)
def test_scopes_and_scope_selectors(
    quota_spec: dict[str, object], pod_spec: dict[str, object], matches: bool
) -> None:
    assert quota_matches({"spec": quota_spec}, pod_spec) is matches


def test_cpu_and_memory_quotas_require_every_container_to_declare_them() -> None:
    spec = {"containers": [container({"cpu": "1"}), container(limits={"cpu": "1", "memory": "1Gi"})]}
    assert missing_declarations(spec, ["requests.cpu", "requests.memory", "limits.cpu", "pods"]) == [
        "limits.cpu",
        "requests.memory",
    ]


def test_amounts_print_as_kubernetes_prints_them() -> None:
    assert describe("requests.cpu", to_nano("1.5")) == "1500m"
    assert describe("cpu", to_nano(2)) == "2"
    assert describe("requests.memory", to_nano("2Gi")) == "2Gi"
    assert describe("pods", to_nano(3)) == "3"
    assert describe("requests.cpu", 1) == "1m"  # one nano-cpu still shows as short
