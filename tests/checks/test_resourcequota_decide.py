"""The ResourceQuota check's decisions and ledger, on in-memory caches (the burst test runs it for real)."""

from __future__ import annotations

from typing import Any

from kadmit.checks.quota_usage import limit_range_defaults, with_limit_range_defaults
from kadmit.checks.resourcequota import ResourceQuotaCheck
from kadmit.checks.verdict import Ready, Rejected, Retry
from kadmit.kube.resources import ADMISSION_CHECKS, LIMIT_RANGES, PODS, RESOURCE_QUOTAS, WORKLOADS
from tests.checks.memory import memory_cluster

Obj = dict[str, Any]


def quota(hard: dict[str, str], used: dict[str, str] | None = None, **spec: object) -> Obj:
    return {
        "metadata": {"namespace": "team", "name": "q"},
        "spec": {"hard": hard, **spec},
        "status": {"hard": hard, "used": used or {}},
    }


def workload(name: str, pods: int, cpu: str = "1", check_state: str | None = None) -> Obj:
    status: Obj = {
        "conditions": [{"type": "QuotaReserved", "status": "True"}],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": pods}]},
    }
    if check_state:
        status["admissionChecks"] = [{"name": "rq", "state": check_state}]
    return {
        "metadata": {
            "namespace": "team",
            "name": name,
            "uid": f"uid-{name}",
            "ownerReferences": [{"kind": "Job", "name": name, "uid": f"job-{name}", "controller": True}],
        },
        "spec": {
            "podSets": [
                {
                    "name": "main",
                    "count": pods,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "c", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}
                            ]
                        }
                    },
                }
            ]
        },
        "status": status,
    }


def pod(owner: str, phase: str = "Running", cpu: str = "1") -> Obj:
    return {
        "metadata": {
            "namespace": "team",
            "name": f"{owner}-{phase}-{id(object())}",
            "ownerReferences": [{"kind": "Job", "uid": f"job-{owner}", "controller": True}],
        },
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]
        },
        "status": {"phase": phase},
    }


AC = {"metadata": {"name": "rq"}, "spec": {"controllerName": "kadmit.dev/resourcequota"}}


def test_the_ledger_keeps_a_second_workload_from_taking_quota_the_first_was_promised() -> None:
    a, b = workload("a", 2), workload("b", 2)
    cluster, watches = memory_cluster(
        {
            RESOURCE_QUOTAS: [quota({"requests.cpu": "4", "limits.cpu": "4"}, {"requests.cpu": "1"})],
            PODS: [],
            WORKLOADS: [a, b],
            ADMISSION_CHECKS: [AC],
        }
    )
    check = ResourceQuotaCheck()
    first = check.decide(a, cluster)
    assert isinstance(first, Ready)
    check._assumed["uid-a"] = a  # what evaluate() records when it returns Ready
    second = check.decide(b, cluster, retry_count=2)
    assert isinstance(second, Retry)
    assert second.after == 4.0
    expected = 'ResourceQuota "q": requests.cpu short by 1 (needs 2, hard 4, used 1, reserved 2)'
    assert second.message == expected

    # One pod of a exists and the quota counts it: a still has one pod to come.
    watches[PODS].put(pod("a"))
    watches[RESOURCE_QUOTAS].put(quota({"requests.cpu": "4", "limits.cpu": "4"}, {"requests.cpu": "2"}))
    assert "reserved 1" in check.decide(b, cluster).message

    # After a restart the ledger comes back from the Workload whose check is Ready, and its pods.
    watches[WORKLOADS].put(workload("a", 2, check_state="Ready"))
    fresh = ResourceQuotaCheck()
    assert isinstance(fresh.decide(b, cluster), Retry)

    # a finishes: its pods end, its reservation is gone, b fits.
    finished = workload("a", 2, check_state="Ready")
    finished["status"]["conditions"].append({"type": "Finished", "status": "True"})
    watches[WORKLOADS].put(finished)
    watches[PODS].objects.clear()
    watches[PODS].put(pod("a", phase="Succeeded"))
    assert isinstance(fresh.decide(b, cluster), Ready)


def test_pods_seen_before_the_quota_status_catches_up_still_count() -> None:
    b = workload("b", 1)
    cluster, _ = memory_cluster(
        {
            RESOURCE_QUOTAS: [quota({"pods": "2"}, {"pods": "0"})],
            PODS: [pod("x"), pod("y")],
            WORKLOADS: [b],
            ADMISSION_CHECKS: [AC],
        }
    )
    verdict = ResourceQuotaCheck().decide(b, cluster)
    assert isinstance(verdict, Retry) and "pods short by 1" in verdict.message


def test_quotas_whose_scopes_do_not_match_the_pods_are_ignored() -> None:
    b = workload("b", 8)
    cluster, _ = memory_cluster(
        {
            RESOURCE_QUOTAS: [quota({"requests.cpu": "1"}, scopes=["Terminating"])],
            PODS: [],
            WORKLOADS: [b],
            ADMISSION_CHECKS: [AC],
        }
    )
    assert ResourceQuotaCheck().decide(b, cluster) == Ready(
        "no ResourceQuota of the namespace charges its pods"
    )


def test_pods_the_quota_would_reject_for_a_missing_declaration_are_rejected() -> None:
    b = workload("b", 1)
    cluster, _ = memory_cluster(
        {
            RESOURCE_QUOTAS: [quota({"requests.memory": "1Gi"})],
            PODS: [],
            WORKLOADS: [b],
            ADMISSION_CHECKS: [AC],
        }
    )
    verdict = ResourceQuotaCheck().decide(b, cluster)
    assert isinstance(verdict, Rejected) and "requests.memory" in verdict.message


def test_only_changes_that_can_free_quota_re_evaluate_the_undecided() -> None:
    a, b = workload("a", 1, check_state="Ready"), workload("b", 1)
    q = quota({"requests.cpu": "1"}, {"requests.cpu": "1"})
    running = pod("a")
    cluster, watches = memory_cluster(
        {RESOURCE_QUOTAS: [q], PODS: [running], WORKLOADS: [a, b], ADMISSION_CHECKS: [AC]}
    )
    check = ResourceQuotaCheck()
    assert isinstance(check.decide(b, cluster), Retry)  # a is in the ledger now
    undecided = [("team", "b")]

    assert check.affected(WORKLOADS, a, cluster) == []  # a still holds its reservation
    assert check.affected(PODS, running, cluster) == []  # a pod starting takes room
    assert check.affected(RESOURCE_QUOTAS, q, cluster) == undecided  # first sight of the quota
    assert check.affected(RESOURCE_QUOTAS, q, cluster) == []  # nothing changed
    more_used = quota({"requests.cpu": "1"}, {"requests.cpu": "2"})
    watches[RESOURCE_QUOTAS].put(more_used)
    assert check.affected(RESOURCE_QUOTAS, more_used, cluster) == []
    less_used = quota({"requests.cpu": "1"}, {"requests.cpu": "0"})
    watches[RESOURCE_QUOTAS].put(less_used)
    assert check.affected(RESOURCE_QUOTAS, less_used, cluster) == undecided
    raised = quota({"requests.cpu": "5"}, {"requests.cpu": "0"})
    watches[RESOURCE_QUOTAS].put(raised)
    assert check.affected(RESOURCE_QUOTAS, raised, cluster) == undecided

    done = pod("a", phase="Succeeded")
    watches[PODS].objects.clear()
    watches[PODS].put(done)
    assert check.affected(PODS, done, cluster) == undecided
    watches[PODS].objects.clear()  # deleted
    assert check.affected(PODS, running, cluster) == undecided

    finished = workload("a", 1, check_state="Ready")
    finished["status"]["conditions"].append({"type": "Finished", "status": "True"})
    watches[WORKLOADS].put(finished)
    assert check.affected(WORKLOADS, finished, cluster) == undecided  # a left the ledger
    assert check.affected(WORKLOADS, finished, cluster) == []  # and is not counted twice


def test_pods_are_charged_as_the_namespace_limit_ranges_will_default_them() -> None:
    bare = {"spec": {"containers": [{"name": "c"}]}}
    limit_range = {
        "metadata": {"namespace": "team", "name": "defaults", "uid": "lr", "resourceVersion": "1"},
        "spec": {
            "limits": [
                {"type": "Container", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "500m"}},
                {"type": "Pod", "max": {"cpu": "8"}},
            ]
        },
    }

    def bare_workload(name: str, pods: int) -> Obj:
        wl = workload(name, pods)
        wl["spec"]["podSets"][0]["template"] = bare
        return wl

    fits, too_big = bare_workload("fits", 4), bare_workload("too-big", 5)
    cluster, _ = memory_cluster(
        {
            RESOURCE_QUOTAS: [quota({"requests.cpu": "2", "limits.cpu": "5"})],
            LIMIT_RANGES: [limit_range],
            PODS: [],
            WORKLOADS: [fits, too_big],
            ADMISSION_CHECKS: [AC],
        }
    )
    check = ResourceQuotaCheck()
    assert isinstance(check.decide(fits, cluster), Ready)  # 4 x 500m requested, 4 x 1 limit
    verdict = check.decide(too_big, cluster)
    assert isinstance(verdict, Retry)
    assert (
        verdict.message
        == 'ResourceQuota "q": requests.cpu short by 500m (needs 2500m, hard 2, used 0, reserved 0)'
    )
    # Without the LimitRange the same pods declare nothing the quota limits: the server refuses them.
    cluster_without, _ = memory_cluster(
        {RESOURCE_QUOTAS: [quota({"requests.cpu": "2"})], PODS: [], WORKLOADS: [fits], ADMISSION_CHECKS: [AC]}
    )
    assert isinstance(check.decide(fits, cluster_without), Rejected)


def test_limit_range_defaults_fall_back_as_the_api_server_defaults_them() -> None:
    only_max = {
        "metadata": {"name": "a"},
        "spec": {"limits": [{"type": "Container", "max": {"memory": "1Gi"}}]},
    }
    only_default = {
        "metadata": {"name": "b"},
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "2"}}]},
    }
    assert limit_range_defaults([only_max, only_default]) == (
        {"memory": "1Gi", "cpu": "2"},
        {"memory": "1Gi", "cpu": "2"},
    )


def test_a_declared_limit_is_the_request_before_limit_range_defaults_apply() -> None:
    # The API server defaults a Pod's missing request to its declared limit, then LimitRanger
    # fills what is still missing; a Container min stands in for a missing defaultRequest.
    ranges = [
        {
            "metadata": {"name": "a"},
            "spec": {
                "limits": [
                    {"type": "Container", "defaultRequest": {"cpu": "500m"}, "min": {"memory": "64Mi"}}
                ]
            },
        }
    ]
    spec = {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2"}}}]}
    assert with_limit_range_defaults(spec, ranges)["containers"][0]["resources"] == {
        "limits": {"cpu": "2"},
        "requests": {"cpu": "2", "memory": "64Mi"},
    }
