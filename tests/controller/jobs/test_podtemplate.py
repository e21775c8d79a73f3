"""Start/stop injection into pod templates (Kueue contract §4.6, §3 podSetUpdates)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kadmit.controller.jobs.podtemplate import (
    FlavorNotFound,
    PodSetInfo,
    PodSetMergeError,
    merge_into_template,
    pod_set_infos,
    restore_template,
)

FLAVORS: dict[str, dict[str, Any]] = {
    "on-demand": {"metadata": {"name": "on-demand"},
                  "spec": {"nodeLabels": {"instance-type": "on-demand"}}},
    "spot": {"metadata": {"name": "spot"},
             "spec": {"nodeLabels": {"instance-type": "spot", "zone": "a"},
                      "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}},
    "gpu": {"metadata": {"name": "gpu"},
            "spec": {"nodeLabels": {"accelerator": "a100"},
                     "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"},
                                     {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}},
}


def workload(assignments: list[dict[str, Any]], checks: list[dict[str, Any]] | None = None,
             cq: str = "cluster-queue") -> dict[str, Any]:
    return {
        "metadata": {"name": "job-sample-ef3a1", "namespace": "default"},
        "spec": {"queueName": "user-queue",
                 "podSets": [{"name": a["name"], "count": 3, "template": {}} for a in assignments]},
        "status": {"admission": {"clusterQueue": cq, "podSetAssignments": assignments},
                   "admissionChecks": checks or []},
    }


def test_flavors_checks_labels_and_annotations_are_injected() -> None:
    wl = workload([{"name": "main", "flavors": {"cpu": "spot", "nvidia.com/gpu": "gpu"}, "count": 2}],
                  checks=[{"name": "prov", "state": "Ready", "podSetUpdates": [
                      {"name": "main", "labels": {"team": "a"}, "nodeSelector": {"zone": "a"},
                       "annotations": {"note": "x"},
                       "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                                       {"key": "prov", "operator": "Exists"}]}]}])
    [info] = pod_set_infos(wl, FLAVORS)
    assert info.name == "main" and info.count == 2
    assert info.node_selector == {"accelerator": "a100", "instance-type": "spot", "zone": "a"}
    assert info.labels == {"kueue.x-k8s.io/podset": "main", "kueue.x-k8s.io/local-queue-name": "user-queue",
                           "kueue.x-k8s.io/cluster-queue-name": "cluster-queue", "team": "a"}
    assert info.annotations == {"kueue.x-k8s.io/workload": "job-sample-ef3a1", "note": "x"}
    # each toleration once: flavors by sorted name (gpu lists spot first), then the check's new one
    assert info.tolerations == [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"},
                                {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
                                {"key": "prov", "operator": "Exists"}]


def test_count_falls_back_to_the_pod_set_count() -> None:
    [info] = pod_set_infos(workload([{"name": "main", "flavors": {"cpu": "on-demand"}}]), FLAVORS)
    assert info.count == 3


def test_cluster_queue_label_only_for_valid_label_values() -> None:
    [info] = pod_set_infos(workload([{"name": "main", "flavors": {}}], cq="x" * 70), FLAVORS)
    assert "kueue.x-k8s.io/cluster-queue-name" not in info.labels


def test_missing_flavor_is_retryable() -> None:
    with pytest.raises(FlavorNotFound, match="ResourceFlavor absent not found"):
        pod_set_infos(workload([{"name": "main", "flavors": {"cpu": "absent"}}]), FLAVORS)


def test_conflicting_flavors_are_an_error() -> None:
    with pytest.raises(PodSetMergeError, match="instance-type"):
        pod_set_infos(workload([{"name": "main", "flavors": {"cpu": "spot", "memory": "on-demand"}}]),
                      FLAVORS)


def test_check_update_conflicting_with_a_flavor_is_an_error() -> None:
    wl = workload([{"name": "main", "flavors": {"cpu": "spot"}}],
                  checks=[{"name": "c", "state": "Ready",
                           "podSetUpdates": [{"name": "main", "nodeSelector": {"zone": "b"}}]}])
    with pytest.raises(PodSetMergeError) as exc:
        pod_set_infos(wl, FLAVORS)
    assert str(exc.value) == ("invalid admission check PodSetUpdate: conflict for nodeSelector: "
                              "conflict for key=zone, value1=a, value2=b")


def test_only_the_first_update_per_pod_set_and_check_counts() -> None:
    wl = workload([{"name": "main", "flavors": {}}],
                  checks=[{"name": "c", "state": "Ready", "podSetUpdates": [
                      {"name": "main", "labels": {"a": "1"}}, {"name": "main", "labels": {"a": "2"}},
                      {"name": "other", "labels": {"b": "1"}}]}])
    [info] = pod_set_infos(wl, FLAVORS)
    assert info.labels["a"] == "1" and "b" not in info.labels


TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "x", "batch.kubernetes.io/job-name": "sample"},
                 "annotations": {"keep": "me"}},
    "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeSelector": {"disk": "ssd"},
             "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]},
}


def test_merge_adds_without_overwriting_and_leaves_the_input_alone() -> None:
    before = copy.deepcopy(TEMPLATE)
    info = PodSetInfo("main", 1, labels={"kueue.x-k8s.io/podset": "main", "app": "x"},
                      annotations={"kueue.x-k8s.io/workload": "wl"}, node_selector={"instance-type": "spot"},
                      tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"},
                                   {"key": "gpu", "operator": "Exists"}],
                      scheduling_gates=[{"name": "kueue.x-k8s.io/topology"}])
    merged = merge_into_template(TEMPLATE, info)
    assert before == TEMPLATE
    assert merged["metadata"]["labels"] == {"app": "x", "batch.kubernetes.io/job-name": "sample",
                                            "kueue.x-k8s.io/podset": "main"}
    assert merged["metadata"]["annotations"] == {"keep": "me", "kueue.x-k8s.io/workload": "wl"}
    assert merged["spec"]["nodeSelector"] == {"disk": "ssd", "instance-type": "spot"}
    assert merged["spec"]["tolerations"] == [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"},
                                             {"key": "gpu", "operator": "Exists"}]
    assert merged["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    assert merged["spec"]["containers"] == TEMPLATE["spec"]["containers"]


def test_merge_conflict_with_the_template() -> None:
    with pytest.raises(PodSetMergeError, match="conflict for nodeSelector: conflict for key=disk"):
        merge_into_template(TEMPLATE, PodSetInfo("main", 1, node_selector={"disk": "hdd"}))


def test_restore_puts_the_workload_copy_back_but_keeps_job_controller_labels() -> None:
    original = {"metadata": {"labels": {"app": "x"}, "annotations": {"keep": "me"}},
                "spec": {"containers": [], "nodeSelector": {"disk": "ssd"}}}
    started = merge_into_template(TEMPLATE, PodSetInfo(
        "main", 1, labels={"kueue.x-k8s.io/podset": "main"}, annotations={"kueue.x-k8s.io/workload": "wl"},
        node_selector={"instance-type": "spot"}, tolerations=[{"key": "gpu", "operator": "Exists"}]))
    started["metadata"]["labels"]["controller-uid"] = "u1"
    restored = restore_template(started, original)
    assert restored["metadata"]["labels"] == {"app": "x", "batch.kubernetes.io/job-name": "sample",
                                              "controller-uid": "u1"}
    assert restored["metadata"]["annotations"] == {"keep": "me"}
    assert restored["spec"]["nodeSelector"] == {"disk": "ssd"}
    assert "tolerations" not in restored["spec"]  # the original had none: the injected ones go
    assert restored["spec"]["containers"] == TEMPLATE["spec"]["containers"]  # only the five fields change
