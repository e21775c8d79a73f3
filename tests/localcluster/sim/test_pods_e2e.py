"""Bare Pods on the simulated nodes: restart policy, bad annotations, scheduling gates."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from .conftest import Obj, condition, wait_for, wait_for_count


def bare_pod(name: str, annotations: dict[str, str] | None = None, **spec: object) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "c", "image": "i"}], **spec},
    }


def phase_is(phase: str) -> object:
    return lambda pod: (pod.get("status") or {}).get("phase") == phase


async def test_restart_policy_always_keeps_the_pod_running(core: k8s.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", bare_pod("server"))
    await wait_for(
        core.list_namespaced_pod,
        phase_is("Running"),
        namespace="default",
        field_selector="metadata.name=server",
    )
    await core.create_namespaced_pod("default", bare_pod("task", restartPolicy="Never"))
    task = await wait_for(
        core.list_namespaced_pod,
        phase_is("Succeeded"),
        namespace="default",
        field_selector="metadata.name=task",
    )
    assert task["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    server = await core.read_namespaced_pod_status("server", "default")
    assert server.status.phase == "Running"  # same runtime as the task, yet still running
    ready = next(c for c in server.status.conditions if c.type == "Ready")
    assert ready.status == "True"


async def test_unreadable_runtime_fails_the_pod_with_a_message(core: k8s.CoreV1Api) -> None:
    await core.create_namespaced_pod(
        "default", bare_pod("odd", {"localcluster.kadmit.dev/runtime": "a while"}, restartPolicy="Never")
    )
    failed = await wait_for(
        core.list_namespaced_pod, phase_is("Failed"), namespace="default", field_selector="metadata.name=odd"
    )
    assert "invalid duration 'a while'" in failed["status"]["message"]


async def test_gated_pod_waits_with_scheduling_gated(core: k8s.CoreV1Api) -> None:
    await core.create_namespaced_pod(
        "default", bare_pod("gated", schedulingGates=[{"name": "example.com/wait"}])
    )

    def gated(pod: Obj) -> bool:
        scheduled = condition(pod, "PodScheduled")
        return scheduled is not None and scheduled["reason"] == "SchedulingGated"

    pod = await wait_for(
        core.list_namespaced_pod, gated, namespace="default", field_selector="metadata.name=gated"
    )
    assert not pod["spec"].get("nodeName")
    await core.patch_namespaced_pod(
        "gated", "default", {"spec": {"schedulingGates": None}}, _content_type="application/merge-patch+json"
    )
    bound = await wait_for(
        core.list_namespaced_pod,
        lambda p: bool(p["spec"].get("nodeName")),
        namespace="default",
        field_selector="metadata.name=gated",
    )
    assert bound["spec"]["nodeName"].startswith("cpu-")


async def test_gated_pod_takes_a_node_selector_then_runs_where_it_says(core: k8s.CoreV1Api) -> None:
    """What a queue controller does on admission: add the flavor's selector and tolerations, ungate."""
    await core.create_namespaced_pod(
        "default", bare_pod("admitted", schedulingGates=[{"name": "kueue.x-k8s.io/admission"}])
    )
    await core.patch_namespaced_pod(
        "admitted",
        "default",
        {
            "spec": {
                "nodeSelector": {"gpus": "4"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "schedulingGates": None,
            }
        },
        _content_type="application/merge-patch+json",
    )
    bound = await wait_for(
        core.list_namespaced_pod,
        lambda p: bool(p["spec"].get("nodeName")),
        namespace="default",
        field_selector="metadata.name=admitted",
    )
    assert bound["spec"]["nodeName"].startswith("gpu-")


async def test_pod_rules_for_gates_and_node_selectors(core: k8s.CoreV1Api) -> None:
    await core.create_namespaced_pod(
        "default",
        bare_pod("held", schedulingGates=[{"name": "a.example.com/wait"}], nodeSelector={"zone": "a"}),
    )
    with pytest.raises(ApiException) as changed:
        await core.patch_namespaced_pod(
            "held",
            "default",
            {"spec": {"nodeSelector": {"zone": "b"}}},
            _content_type="application/merge-patch+json",
        )
    assert changed.value.status == 422
    assert "only additions to spec.nodeSelector are allowed" in changed.value.body
    with pytest.raises(ApiException) as added:
        await core.patch_namespaced_pod(
            "held",
            "default",
            {"spec": {"schedulingGates": [{"name": "a.example.com/wait"}, {"name": "b.example.com/wait"}]}},
            _content_type="application/merge-patch+json",
        )
    assert "only deletion is allowed, but found new scheduling gate 'b.example.com/wait'" in added.value.body
    await core.patch_namespaced_pod(
        "held", "default", {"spec": {"schedulingGates": None}}, _content_type="application/merge-patch+json"
    )
    with pytest.raises(ApiException) as ungated:  # no longer gated: the selector is fixed again
        await core.patch_namespaced_pod(
            "held",
            "default",
            {"spec": {"nodeSelector": {"zone": "a", "x": "y"}}},
            _content_type="application/merge-patch+json",
        )
    assert ungated.value.status == 422


async def test_deleting_a_running_pod_held_by_a_finalizer_ends_it_failed(core: k8s.CoreV1Api) -> None:
    pod = bare_pod("held-back")
    pod["metadata"]["finalizers"] = ["example.com/keep"]
    await core.create_namespaced_pod("default", pod)
    await wait_for(
        core.list_namespaced_pod,
        phase_is("Running"),
        namespace="default",
        field_selector="metadata.name=held-back",
    )
    await core.delete_namespaced_pod("held-back", "default")
    failed = await wait_for(
        core.list_namespaced_pod,
        phase_is("Failed"),
        namespace="default",
        field_selector="metadata.name=held-back",
    )
    assert failed["metadata"]["deletionTimestamp"]
    await core.patch_namespaced_pod(
        "held-back",
        "default",
        {"metadata": {"finalizers": None}},
        _content_type="application/merge-patch+json",
    )
    await wait_for_count(
        core.list_namespaced_pod, 0, namespace="default", field_selector="metadata.name=held-back"
    )
