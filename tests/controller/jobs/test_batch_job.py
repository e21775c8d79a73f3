"""A batch/v1 Job's Workload for ``kadmit simulate``: Kueue's ConstructWorkload (contract §4.4)."""

from __future__ import annotations

from typing import Any

import pytest

from kadmit.controller.jobs.batch_job import JobConversionError, workload_for_job
from kadmit.controller.jobs.construct import workload_name
from kadmit.engine import parse


def job(**overrides: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "sample",
            "namespace": "team",
            "uid": "uid-1",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
            "annotations": {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "600", "other": "x"},
        },
        "spec": {
            "parallelism": 3,
            "completions": 5,
            "template": {
                "metadata": {
                    "labels": {
                        "job-name": "sample",
                        "controller-uid": "u",
                        "batch.kubernetes.io/controller-uid": "u",
                        "batch.kubernetes.io/job-name": "sample",
                        "app": "demo",
                    }
                },
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            },
        },
    }
    for key, value in overrides.items():
        obj[key] = value
    return obj


def test_name_matches_kueue_unit_test() -> None:
    assert workload_name("Job", "batch", "name", "uid") == "job-name-ef3a1"


def test_long_names_are_truncated_before_the_hash() -> None:
    name = workload_name("Job", "batch", "x" * 300, "uid")
    assert len(name) == 253 and name.startswith("job-xxx")


def test_workload_shape() -> None:
    wl = workload_for_job(job())
    assert wl["apiVersion"] == "kueue.x-k8s.io/v1beta2" and wl["kind"] == "Workload"
    assert wl["metadata"]["name"] == workload_name("Job", "batch", "sample", "uid-1")
    assert wl["metadata"]["namespace"] == "team"
    assert wl["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": "uid-1"}
    assert wl["metadata"]["annotations"] == {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "600"}
    assert wl["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    [owner] = wl["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "sample",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert wl["spec"]["queueName"] == "user-queue"
    [pod_set] = wl["spec"]["podSets"]
    assert (pod_set["name"], pod_set["count"]) == ("main", 3)  # min(parallelism, completions)
    assert pod_set["template"]["metadata"]["labels"] == {
        "batch.kubernetes.io/job-name": "sample",
        "app": "demo",
    }
    assert "priority" not in wl["spec"]
    parse.workload(wl)  # the engine accepts what we build


@pytest.mark.parametrize(
    ("spec", "count"),
    [({"parallelism": 4}, 4), ({"parallelism": 4, "completions": 2}, 2), ({}, 1), ({"completions": 7}, 1)],
)
def test_count(spec: dict[str, Any], count: int) -> None:
    obj = job()
    obj["spec"] = {**spec, "template": obj["spec"]["template"]}
    assert workload_for_job(obj)["spec"]["podSets"][0]["count"] == count


def test_min_parallelism_becomes_min_count() -> None:
    obj = job()
    obj["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] = "2"
    assert workload_for_job(obj)["spec"]["podSets"][0]["minCount"] == 2


def test_priority_class_label() -> None:
    obj = job()
    obj["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    spec = workload_for_job(obj, {"high": 1000})["spec"]
    assert spec["priority"] == 1000
    assert spec["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "high",
    }


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda o: o["metadata"]["labels"].update({"kueue.x-k8s.io/priority-class": "missing"}),
            "WorkloadPriorityClass missing not found",
        ),
        (
            lambda o: o["metadata"]["annotations"].update({"kueue.x-k8s.io/job-min-parallelism": "3"}),
            "should be between 0 and 2",
        ),
        (
            lambda o: o["metadata"]["annotations"].update({"kueue.x-k8s.io/job-min-parallelism": "two"}),
            'strconv.Atoi: parsing "two": invalid syntax',
        ),
        (lambda o: o["metadata"].pop("name"), "metadata.name: Required value"),
        (lambda o: o["spec"].update(parallelism="3"), "spec.parallelism"),
        (
            lambda o: o["metadata"]["labels"].update({"kueue.x-k8s.io/max-exec-time-seconds": "0"}),
            "should be greater than 0",
        ),
    ],
)
def test_rejections(mutate: Any, message: str) -> None:
    obj = job()
    mutate(obj)
    with pytest.raises(JobConversionError, match=message):
        workload_for_job(obj)


def test_input_is_not_modified() -> None:
    obj = job()
    before = repr(obj)
    workload_for_job(obj)
    assert repr(obj) == before
