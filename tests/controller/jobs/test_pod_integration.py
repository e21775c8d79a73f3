"""Kueue's pod framework rules, pure: pod sets by role, fast admission, finish, start, stop."""

from __future__ import annotations

from typing import Any

import pytest

from kadmit.controller.jobs.pod_integration import GroupError, PodIntegration, workload_name_for_pod
from kadmit.controller.jobs.podtemplate import PodSetInfo
from kadmit.webhook.pods import role_hash_of_spec

Obj = dict[str, Any]
GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"
GATE = {"name": "kueue.x-k8s.io/admission"}
P = PodIntegration()


def member(name: str, cpu: str = "1", phase: str = "Pending", total: int = 3, **annotations: str) -> Obj:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {GROUP: "g", "kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/managed": "true"},
            "annotations": {TOTAL: str(total), **annotations},
            "creationTimestamp": f"2026-01-01T00:00:0{name[-1]}Z",
        },
        "spec": {
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
            "schedulingGates": [GATE],
        },
        "status": {"phase": phase},
    }


def test_a_pod_alone_is_one_pod_set_named_main_in_a_workload_named_after_it() -> None:
    single = member("solo1")
    del single["metadata"]["labels"][GROUP]
    assert P.group_of(single) is None
    assert [(s["name"], s["count"]) for s in P.pod_sets([single], None)] == [("main", 1)]
    name = workload_name_for_pod(single)
    assert name.startswith("pod-solo1-") and len(name) == len("pod-solo1-") + 5
    assert P.workload_name([single], None) == name


def test_roles_become_pod_sets_sorted_by_role_hash_and_counted() -> None:
    pods = [member("d1", cpu="500m"), member("w2"), member("w3")]
    driver = role_hash_of_spec(pods[0]["spec"])
    sets = P.pod_sets(pods, "g")
    # dc85db45 is Kueue's hash for one container requesting cpu 1
    assert [(s["name"], s["count"]) for s in sets] == sorted([("dc85db45", 2), (driver, 1)])
    assert (
        sets[0]["template"]["spec"]["containers"]
        == pods[0 if driver < "dc85db45" else 1]["spec"]["containers"]
    )
    assert P.workload_name(pods, "g") == "g"


def test_an_incomplete_group_waits_unless_fast_admission() -> None:
    pods = [member("a1"), member("a2")]
    with pytest.raises(GroupError, match="'g' group has fewer runnable pods than expected"):
        P.check_group(pods)
    fast = [member("a1", **{"kueue.x-k8s.io/pod-group-fast-admission": "true"})]
    P.check_group(fast)
    assert [(s["name"], s["count"]) for s in P.pod_sets(fast, "g")] == [("dc85db45", 3)]
    failed = [member("a1"), member("a2"), member("a3", phase="Failed")]
    with pytest.raises(GroupError):
        P.check_group(failed)  # a Failed Pod is not runnable: it needs its replacement


def test_mismatched_queues_or_counts_are_refused_with_kueues_message() -> None:
    other = member("a3")
    other["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "r"
    with pytest.raises(GroupError, match=r"pods 'a1' and 'a3' has different queue names: q!=r"):
        P.check_group([member("a1"), member("a2"), other])
    with pytest.raises(GroupError, match=r"different 'kueue\.x-k8s\.io/pod-group-total-count' values: 3!=4"):
        P.check_group([member("a1"), member("a2"), member("a3", total=4)])


def test_a_group_finishes_when_all_succeed_or_an_unretriable_one_stops() -> None:
    assert P.finished([member("a1", phase="Succeeded"), member("a2", phase="Succeeded")], "g") is None
    done = P.finished([member(f"a{i}", phase="Succeeded") for i in (1, 2, 3)], "g")
    assert done is not None and (done.reason, done.message) == ("Succeeded", "Pods succeeded: 3/3.")
    unretriable = [
        member("a1", phase="Failed", **{"kueue.x-k8s.io/retriable-in-group": "false"}),
        member("a2", phase="Succeeded"),
        member("a3", phase="Failed"),
    ]
    stopped = P.finished(unretriable, "g")
    assert stopped is not None and stopped.message == "Pods succeeded: 1/3."
    serving = [
        member(f"a{i}", phase="Succeeded", **{"kueue.x-k8s.io/pod-group-serving": "true"}) for i in (1, 2, 3)
    ]
    assert P.finished(serving, "g") is None


def test_start_merges_the_flavor_and_removes_only_kueues_gate() -> None:
    pod = member("a1")
    pod["spec"]["schedulingGates"].append({"name": "example.com/other"})
    info = PodSetInfo(
        name="dc85db45",
        count=3,
        node_selector={"pool": "cpu"},
        tolerations=[{"key": "gpu", "operator": "Exists"}],
        labels={"kueue.x-k8s.io/podset": "x"},
    )
    started = P.started(pod, info)
    assert started is not None
    assert started["spec"]["nodeSelector"] == {"pool": "cpu"}
    assert started["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert started["spec"]["schedulingGates"] == [{"name": "example.com/other"}]
    assert started["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "x"
    assert P.started(started, info) is None  # already running: left alone


def test_stop_deletes_what_runs_and_replacements_are_counted() -> None:
    running = member("a1", phase="Running")
    running["spec"].pop("schedulingGates")
    gated, done = member("a2"), member("a3", phase="Succeeded")
    assert P.to_stop([running, gated, done], workload_deleted=False) == [running]
    assert P.to_stop([running, gated, done], workload_deleted=True) == [running, gated, done]
    assert P.absent([running], 3, 1) == 2
    fast = [member("a1", **{"kueue.x-k8s.io/pod-group-fast-admission": "true"})]
    assert P.absent(fast, 3, 1) == 0 and P.absent(fast, 3, 0) == 1


def test_succeeded_members_are_reclaimable_by_role() -> None:
    pods = [member("a1", phase="Succeeded"), member("a2", phase="Running"), member("a3", phase="Succeeded")]
    assert P.reclaimable_pods(pods, "g") == [{"name": "dc85db45", "count": 2}]
    assert P.reclaimable_pods(pods[:1], None) == []


def test_a_pod_alone_finishes_with_its_phase_and_message() -> None:
    single = member("solo1", phase="Failed")
    del single["metadata"]["labels"][GROUP]
    single["status"]["message"] = "OOMKilled"
    done = P.finished([single], None)
    assert done is not None and (done.reason, done.message) == ("Failed", "OOMKilled")
    single["status"] = {"phase": "Running"}
    assert P.finished([single], None) is None
