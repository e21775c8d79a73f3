"""Bare Pods on the simulated nodes: restart policy, bad annotations, scheduling gates."""

from __future__ import annotations

from kubernetes_asyncio import client as k8s

from .conftest import Obj, condition, wait_for


def bare_pod(name: str, annotations: dict[str, str] | None = None, **spec: object) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"containers": [{"name": "c", "image": "i"}], **spec}}


def phase_is(phase: str) -> object:
    return lambda pod: (pod.get("status") or {}).get("phase") == phase


async def test_restart_policy_always_keeps_the_pod_running(core: k8s.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", bare_pod("server"))
    await wait_for(core.list_namespaced_pod, phase_is("Running"), namespace="default",
                   field_selector="metadata.name=server")
    await core.create_namespaced_pod("default", bare_pod("task", restartPolicy="Never"))
    task = await wait_for(core.list_namespaced_pod, phase_is("Succeeded"), namespace="default",
                          field_selector="metadata.name=task")
    assert task["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    server = await core.read_namespaced_pod_status("server", "default")
    assert server.status.phase == "Running"  # same runtime as the task, yet still running
    ready = next(c for c in server.status.conditions if c.type == "Ready")
    assert ready.status == "True"


async def test_unreadable_runtime_fails_the_pod_with_a_message(core: k8s.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", bare_pod(
        "odd", {"localcluster.kadmit.dev/runtime": "a while"}, restartPolicy="Never"))
    failed = await wait_for(core.list_namespaced_pod, phase_is("Failed"), namespace="default",
                            field_selector="metadata.name=odd")
    assert "invalid duration 'a while'" in failed["status"]["message"]


async def test_gated_pod_waits_with_scheduling_gated(core: k8s.CoreV1Api) -> None:
    await core.create_namespaced_pod("default", bare_pod(
        "gated", schedulingGates=[{"name": "example.com/wait"}]))

    def gated(pod: Obj) -> bool:
        scheduled = condition(pod, "PodScheduled")
        return scheduled is not None and scheduled["reason"] == "SchedulingGated"

    pod = await wait_for(core.list_namespaced_pod, gated, namespace="default",
                         field_selector="metadata.name=gated")
    assert not pod["spec"].get("nodeName")
    await core.patch_namespaced_pod("gated", "default", {"spec": {"schedulingGates": None}},
                                    _content_type="application/merge-patch+json")
    bound = await wait_for(core.list_namespaced_pod, lambda p: bool(p["spec"].get("nodeName")),
                           namespace="default", field_selector="metadata.name=gated")
    assert bound["spec"]["nodeName"].startswith("cpu-")
