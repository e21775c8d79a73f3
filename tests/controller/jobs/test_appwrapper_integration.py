"""The AppWrapper integration's pure functions: pod sets declared, inferred or from the status,
start through podSetInfos and stop by clearing them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kadmit.controller.jobs.appwrapper import AppWrapperIntegration, PathError, value_at
from kadmit.controller.jobs.construct import Priority, construct_workload
from kadmit.controller.jobs.podtemplate import PodSetInfo

AW = AppWrapperIntegration()


def pod_template(cpu: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "x"}},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "i",
                    "resources": {"requests": {"cpu": cpu}},
                    "env": [{"name": "A", "value": "1"}],
                }
            ]
        },
    }


def appwrapper() -> dict[str, Any]:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"parallelism": 3, "completions": 2, "template": pod_template("1")},
    }
    ray = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "r"},
        "spec": {
            "headGroupSpec": {"template": pod_template("2")},
            "workerGroupSpecs": [{"groupName": "w", "replicas": 4, "template": pod_template("1")}],
        },
    }
    declared = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"x": "y"}}
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": {
            "name": "aw",
            "namespace": "default",
            "uid": "u",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
        },
        "spec": {
            "suspend": True,
            "components": [{"template": job}, {"template": ray}, {"template": declared}],
        },
    }


def test_pod_sets_inferred_in_component_order() -> None:
    aw = appwrapper()
    pod_sets = AW.pod_sets(aw)
    assert [(p["name"], p["count"]) for p in pod_sets] == [("aw-0", 2), ("aw-1", 1), ("aw-2", 4)]
    template = pod_sets[1]["template"]
    assert template == {
        "metadata": {"labels": {"app": "x"}},
        "spec": {
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "2"}}}],
            "restartPolicy": "Always",
        },
    }
    wl = construct_workload(AW, aw, Priority(0))
    assert wl["metadata"]["name"].startswith("appwrapper-aw-") and wl["spec"]["queueName"] == "lq"


def test_declared_pod_sets_and_status_take_precedence() -> None:
    aw = appwrapper()
    aw["spec"]["components"][0]["podSets"] = [{"path": "template.spec.template", "replicas": 5}]
    assert [p["count"] for p in AW.pod_sets(aw)] == [5, 1, 4]
    aw["status"] = {
        "componentStatus": [
            {"podSets": [{"path": "template.spec.template", "replicas": 7}]},
            {"podSets": []},
            {"podSets": []},
        ]
    }
    assert [(p["name"], p["count"]) for p in AW.pod_sets(aw)] == [("aw-0", 7)]


def test_paths() -> None:
    component = {"template": {"spec": {"groups": [{"t": {"a": 1}}]}}}
    assert value_at(component, "template.spec.groups[0].t") == {"a": 1}
    for bad in ("spec.groups", "template.spec.groups[3]", "template.spec.missing"):
        with pytest.raises(PathError):
            value_at(component, bad)


def test_start_writes_pod_set_infos_and_stop_clears_them() -> None:
    aw = appwrapper()
    original = copy.deepcopy(aw)
    infos = [
        PodSetInfo(
            p["name"], p["count"], labels={"kueue.x-k8s.io/podset": p["name"]}, node_selector={"pool": "cpu"}
        )
        for p in AW.pod_sets(aw)
    ]
    started = AW.run_with_pod_set_infos(aw, infos)
    assert aw == original and started["spec"]["suspend"] is False
    assert started["spec"]["components"][1]["podSetInfos"] == [
        {"labels": {"kueue.x-k8s.io/podset": "aw-1"}, "nodeSelector": {"pool": "cpu"}},
        {"labels": {"kueue.x-k8s.io/podset": "aw-2"}, "nodeSelector": {"pool": "cpu"}},
    ]
    assert started["spec"]["components"][2]["podSetInfos"] == []
    with pytest.raises(ValueError, match="expecting 3 podsets, got 1"):
        AW.run_with_pod_set_infos(aw, infos[:1])
    restored = AW.restored(AW.suspended(started), AW.pod_sets(aw))
    assert restored == original  # exactly: infos gone, suspended, no stopping annotation


def test_state_from_status() -> None:
    aw = appwrapper()
    assert not AW.is_active(aw) and AW.finished(aw) is None and not AW.pods_ready(aw)
    aw["status"] = {
        "phase": "Running",
        "conditions": [
            {"type": "QuotaReserved", "status": "True"},
            {"type": "PodsReady", "status": "True"},
            {"type": "ResourcesDeployed", "status": "True"},
        ],
    }
    assert AW.is_active(aw) and AW.pods_ready(aw)
    aw["status"]["phase"] = "Failed"
    assert AW.finished(aw) is None  # still deleting its resources
    aw["status"]["conditions"][2]["status"] = "False"
    finished = AW.finished(aw)
    assert finished is not None and (finished.reason, finished.message) == ("Failed", "AppWrapper failed")
    aw["status"]["phase"] = "Succeeded"
    succeeded = AW.finished(aw)
    assert succeeded is not None and (succeeded.reason, succeeded.message) == (
        "Succeeded",
        "AppWrapper finished successfully",
    )
