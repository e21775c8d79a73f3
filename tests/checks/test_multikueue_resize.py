"""MultiKueue and elastic jobs, pure: how the adapters resize a worker's copy (Kueue's
``needElasticSync`` / ``syncElastic`` for the Job and the RayCluster), which Workloads leave their
copies alone, and how a scaled-down Workload's copy is updated rather than deleted."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kadmit.checks.multikueue_adapters import builtin_adapters, gvk_of_reference
from kadmit.checks.multikueue_remote import (
    PREBUILT_WORKLOAD,
    leaves_copies_alone,
    local_workload_of,
    replaced_slice,
    scaled_down_copy,
)
from kadmit.workload import job_workload_name, pod_set_counts, ray_worker_count, scaled_down

Obj = dict[str, Any]
ELASTIC = {"kueue.x-k8s.io/elastic-job": "true"}
REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
ALL = builtin_adapters(
    [
        "batch/job",
        "ray.io/raycluster",
        "ray.io/rayjob",
        "jobset.x-k8s.io/jobset",
        "kubeflow.org/pytorchjob",
        "workload.codeflare.dev/appwrapper",
        "trainer.kubeflow.org/trainjob",
        "pod",
    ]
)
JOB = ALL[gvk_of_reference("batch/v1", "Job")]
RAY_CLUSTER = ALL[gvk_of_reference("ray.io/v1", "RayCluster")]


def job(parallelism: int, generation: int = 1, elastic: bool = True) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "uid": "u1",
            "generation": generation,
            "annotations": dict(ELASTIC) if elastic else {},
        },
        "spec": {"parallelism": parallelism, "completions": 8, "template": {"spec": {"containers": []}}},
    }


def copy_of(local: Obj, workload: str, resource_version: str = "5") -> Obj:
    """The copy as the worker holds it: our metadata, the local spec of an earlier time."""
    out = copy.deepcopy(local)
    out["metadata"] = {
        "name": "train",
        "namespace": "ns",
        "uid": "remote-uid",
        "resourceVersion": resource_version,
        "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue", PREBUILT_WORKLOAD: workload},
        "annotations": {**ELASTIC, PREBUILT_WORKLOAD: workload},
    }
    out["spec"]["suspend"] = False
    return out


def slice_name(local: Obj) -> str:
    return job_workload_name(str(local["kind"]), str(local["apiVersion"]).rpartition("/")[0], local)


def test_a_job_scaled_up_is_resized_under_the_new_slice_only() -> None:
    old = job(2, generation=1)
    first = slice_name(old)
    grown = job(3, generation=2)
    second = slice_name(grown)
    assert first != second, "an elastic job's slices are named after its generation"
    remote = copy_of(old, first)

    # The old slice seen after the job grew: stale, the copy keeps its size (Kueue's guard).
    assert JOB.resized(grown, remote, first, second) is None
    # The new slice, admitted on the worker: the copy takes the new parallelism and runs under it.
    resized = JOB.resized(grown, remote, second, second)
    assert resized is not None
    assert resized["spec"]["parallelism"] == 3
    assert local_workload_of(resized) == second
    assert resized["metadata"]["labels"][PREBUILT_WORKLOAD] == second
    assert resized["metadata"]["resourceVersion"] == "5", "a conditional update of the copy"
    assert {k: v for k, v in resized["spec"].items() if k != "parallelism"} == {
        k: v for k, v in remote["spec"].items() if k != "parallelism"
    }
    assert remote["spec"]["parallelism"] == 2, "the copy given is not changed"
    # Done: nothing more to write.
    assert JOB.resized(grown, resized, second, second) is None


def test_a_job_scaled_down_is_resized_under_the_same_slice() -> None:
    running = job(3, generation=2)
    current = slice_name(running)
    remote = copy_of(running, current)
    shrunk = job(1, generation=3)  # a new generation, but the slice shrinks in place: same name
    resized = JOB.resized(shrunk, remote, current, slice_name(shrunk))
    assert resized is not None
    assert resized["spec"]["parallelism"] == 1
    assert local_workload_of(resized) == current


def test_a_job_that_is_not_elastic_is_never_resized() -> None:
    plain = job(3, elastic=False)
    remote = copy_of(job(2, elastic=False), "w")
    assert JOB.resized(plain, remote, "w", "w") is None


def test_a_long_workload_name_drops_the_label_and_keeps_the_annotation() -> None:
    grown = job(3)
    remote = copy_of(job(2), "short")
    name = "x" * 70
    resized = JOB.resized(grown, remote, name, name)
    assert resized is not None
    assert resized["metadata"]["annotations"][PREBUILT_WORKLOAD] == name
    assert PREBUILT_WORKLOAD not in resized["metadata"]["labels"]
    assert local_workload_of(resized) == name


def raycluster(groups: list[Obj], generation: int = 1) -> Obj:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": "train",
            "namespace": "ns",
            "uid": "u2",
            "generation": generation,
            "annotations": dict(ELASTIC),
        },
        "spec": {
            "headGroupSpec": {"template": {"spec": {"containers": []}}},
            "workerGroupSpecs": [{"template": {"spec": {"containers": []}}, **g} for g in groups],
        },
    }


def test_a_raycluster_copy_follows_each_worker_group_by_name() -> None:
    old = raycluster(
        [{"groupName": "small", "replicas": 1}, {"groupName": "gpu", "replicas": 2, "numOfHosts": 2}]
    )
    remote = copy_of(old, slice_name(old))
    remote["spec"]["workerGroupSpecs"].append({"groupName": "only-on-the-copy", "replicas": 5})
    grown = raycluster(
        [
            {"groupName": "small", "replicas": 3},
            {"groupName": "gpu", "replicas": 3},  # numOfHosts gone: 3 pods, not 4
            {"groupName": "only-on-the-manager", "replicas": 7},
        ],
        generation=2,
    )
    new_slice = slice_name(grown)
    # 6 pods in the groups on both sides, from 5: it grew, and the old slice's view is stale.
    assert RAY_CLUSTER.resized(grown, remote, slice_name(old), new_slice) is None
    resized = RAY_CLUSTER.resized(grown, remote, new_slice, new_slice)
    assert resized is not None
    groups = {g["groupName"]: g for g in resized["spec"]["workerGroupSpecs"]}
    assert groups["small"]["replicas"] == 3
    assert groups["gpu"]["replicas"] == 3 and "numOfHosts" not in groups["gpu"]
    assert groups["only-on-the-copy"]["replicas"] == 5, "a group only the copy has is left alone"
    assert "only-on-the-manager" not in groups, "a group only the manager has is out of scope (Kueue)"
    assert local_workload_of(resized) == new_slice


def test_a_raycluster_whose_pod_counts_did_not_change_is_left_alone() -> None:
    """Kueue compares each group's pods (replicas times numOfHosts), not how they are made up."""
    old = raycluster([{"groupName": "gpu", "replicas": 2, "numOfHosts": 1}])
    remote = copy_of(old, "w1")
    reshaped = raycluster([{"groupName": "gpu", "replicas": 1, "numOfHosts": 2}], generation=2)
    assert RAY_CLUSTER.replicas(reshaped) == RAY_CLUSTER.replicas(remote) == {"gpu": 2}
    assert RAY_CLUSTER.resized(reshaped, remote, "w1", slice_name(reshaped)) is None


@pytest.mark.parametrize(
    "kind",
    [k for k in ALL if k not in (JOB.gvk, RAY_CLUSTER.gvk)],
)
def test_the_kinds_kueue_does_not_resize_are_never_resized(kind: str) -> None:
    adapter = ALL[kind]
    local: Obj = {
        "kind": "X",
        "metadata": {"name": "a", "namespace": "ns", "annotations": dict(ELASTIC)},
        "spec": {"parallelism": 3, "replicas": 3},
    }
    remote = copy.deepcopy(local)
    remote["spec"] = {"parallelism": 1, "replicas": 1}
    assert adapter.replicas(local) is None
    assert adapter.resized(local, remote, "w", "w") is None


def workload(
    counts: dict[str, int],
    *,
    conditions: list[Obj] | None = None,
    replaces: str | None = None,
    elastic: bool = True,
    **spec: Any,
) -> Obj:
    annotations = dict(ELASTIC) if elastic else {}
    if replaces:
        annotations[REPLACEMENT_FOR] = replaces
    status: Obj = {"conditions": conditions or []}
    if any(c["type"] == "QuotaReserved" and c["status"] == "True" for c in status["conditions"]):
        status["admission"] = {"clusterQueue": "cq"}
    return {
        "metadata": {"name": "wl", "namespace": "ns", "annotations": annotations},
        "spec": {"queueName": "q", "podSets": [{"name": n, "count": c} for n, c in counts.items()], **spec},
        "status": status,
    }


RESERVED = {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"}
REPLACED = {"type": "Finished", "status": "True", "reason": "WorkloadSliceReplaced"}
SUCCEEDED = {"type": "Finished", "status": "True", "reason": "Succeeded"}


def test_which_workloads_leave_their_copies_alone() -> None:
    # A slice replaced by a new one: its job runs on under the new slice.
    assert leaves_copies_alone(workload({"main": 2}, conditions=[RESERVED, REPLACED]))
    # Every other end removes them: finished otherwise, evicted (quota lost), deleted.
    assert not leaves_copies_alone(workload({"main": 2}, conditions=[RESERVED, SUCCEEDED]))
    assert not leaves_copies_alone(workload({"main": 2}))
    assert not leaves_copies_alone(workload({"main": 3}, replaces="ns/old"))
    assert not leaves_copies_alone(workload({"main": 3}, conditions=[RESERVED, REPLACED], elastic=False))


def test_the_slice_a_new_one_replaces() -> None:
    assert replaced_slice(workload({"main": 3}, replaces="ns/old")) == ("ns", "old")
    assert replaced_slice(workload({"main": 3})) is None
    assert replaced_slice(workload({"main": 3}, replaces="ns/old", elastic=False)) is None


def test_a_scaled_down_workload_updates_its_copy_in_place() -> None:
    local = workload({"main": 1, "side": 2}, conditions=[RESERVED])
    remote = workload({"main": 3, "side": 2}, preemptionGates=[{"name": "worker-gate"}], extra="x")
    patch = scaled_down_copy(local, remote)
    assert patch == {"spec": {"queueName": "q", "podSets": local["spec"]["podSets"], "extra": None}}
    # Grown, or changed otherwise: not a scale-down, the stale copy goes as before.
    assert scaled_down_copy(workload({"main": 4, "side": 2}), remote) is None
    assert scaled_down_copy(workload({"main": 1, "side": 3}), remote) is None
    assert scaled_down_copy(workload({"main": 1, "side": 2}, elastic=False), remote) is None


def test_the_vocabulary_the_check_shares_with_the_job_reconciler() -> None:
    assert pod_set_counts(workload({"a": 4, "b": 2})) == {"a": 4, "b": 2}
    assert scaled_down({"a": 4, "b": 2}, {"a": 3, "b": 2})
    assert not scaled_down({"a": 4, "b": 2}, {"a": 3, "b": 3})
    assert not scaled_down({"a": 4}, {"a": 4})
    assert ray_worker_count({"replicas": 3}) == 3
    assert ray_worker_count({"replicas": 3, "numOfHosts": 2}) == 6
    assert ray_worker_count({}) == 1
    assert ray_worker_count({"replicas": True, "numOfHosts": "2"}) == 1
    assert job_workload_name("Job", "batch", job(2, elastic=False)) == job_workload_name(
        "Job", "batch", job(3, generation=5, elastic=False)
    ), "a job that is not elastic keeps its Workload's name"


class _Worker:
    """What the check reads of a connected worker: its watch's copies of Jobs."""

    connected = True
    api: Any = None

    def __init__(self, copies: dict[tuple[str, str], Obj]) -> None:
        self.copies = copies

    def watches(self, kind: Any) -> bool:
        return bool(kind == JOB.resource)

    def cached(self, kind: Any, namespace: str, name: str) -> Obj | None:
        return self.copies.get((namespace, name))


def test_a_new_slice_whose_old_one_recorded_no_worker_goes_where_the_jobs_copy_is() -> None:
    """Scaled up while the first slice was being admitted (its worker not recorded yet): the copy
    of the job on a worker pins the new slice there; no copy anywhere leaves it to the dispatcher."""
    from kadmit.checks.multikueue import MultiKueueCheck, _Owned

    check = MultiKueueCheck()
    local = job(3, generation=2)
    check.workers = {"w1": _Worker({}), "w2": _Worker({("ns", "train"): copy_of(job(2), "old")})}  # type: ignore[dict-item]
    owned = _Owned(JOB, [local])
    assert check._holding_copy(owned, {"w1": None, "w2": None}) == "w2"  # type: ignore[dict-item]
    assert check._holding_copy(owned, {"w1": None}) == ""  # type: ignore[dict-item]
