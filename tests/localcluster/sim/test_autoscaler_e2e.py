"""ProvisioningRequests answered by the autoscaler stand-in, with the conditions Kueue reads."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client as k8s

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.sim import Autoscaler
from kadmit.localcluster.sim.scheduler import BOOKED_FOR

from .conftest import Obj, condition, has_true, job_manifest, wait_for, wait_for_count

GROUP, VERSION, PLURAL = "autoscaling.x-k8s.io", "v1", "provisioningrequests"
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
GPU_POD = {
    "restartPolicy": "Never",
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
    "containers": [{"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "4"}}}],
}


async def request_capacity(core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, name: str, count: int,
                           klass: str = ATOMIC,
                           pod_spec: Obj | None = None, annotations: dict[str, str] | None = None) -> None:
    await core.create_namespaced_pod_template("default", {
        "apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"ppt-{name}"},
        "template": {"spec": pod_spec or GPU_POD},
    })
    await custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ProvisioningRequest",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"provisioningClassName": klass,
                 "podSets": [{"podTemplateRef": {"name": f"ppt-{name}"}, "count": count}]},
    })


async def wait_request(custom: k8s.CustomObjectsApi, name: str, kind: str, within: float = 10) -> Obj:
    def holds(obj: Obj) -> bool:
        return obj["metadata"]["name"] == name and has_true(kind)(obj)

    return await wait_for(custom.list_namespaced_custom_object, holds, within, group=GROUP, version=VERSION,
                          namespace="default", plural=PLURAL)


async def booking_time_passed(core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi) -> None:
    """A new, unused request expiring proves every earlier booking's time has passed too."""
    cpu_pod = {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}
    await request_capacity(core, custom, "sentinel", count=1, pod_spec=cpu_pod)
    await wait_request(custom, "sentinel", "BookingExpired")


async def gpu_nodes(core: k8s.CoreV1Api) -> list[Any]:
    listed = await core.list_node(label_selector="localcluster.kadmit.dev/pool=gpu")
    return list(listed.items)


async def test_scale_up_adds_booked_nodes_then_booking_expires_unused(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi
) -> None:
    await request_capacity(core, custom, "unused", count=2)  # 2 x 4 GPUs: one more 4-GPU node
    provisioned = await wait_request(custom, "unused", "Provisioned")
    assert has_true("Accepted")(provisioned)
    assert condition(provisioned, "Provisioned")["reason"] == "Provisioned"  # type: ignore[index]
    nodes = await gpu_nodes(core)
    assert sorted(n.metadata.name for n in nodes) == ["gpu-0", "gpu-1"]
    new = next(n for n in nodes if n.metadata.name == "gpu-1")
    assert new.metadata.annotations[BOOKED_FOR] == "default/unused"
    assert new.status.allocatable["nvidia.com/gpu"] == "4"
    expired = await wait_request(custom, "unused", "BookingExpired")
    assert "expired" in condition(expired, "BookingExpired")["message"]  # type: ignore[index]
    await wait_for_count(core.list_node, 1, label_selector="localcluster.kadmit.dev/pool=gpu")


async def test_consumed_capacity_hosts_the_pods_and_does_not_expire(
    cluster: LocalCluster, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi
) -> None:
    busy = {**GPU_POD, "nodeName": "gpu-0"}  # fill the existing GPU node so the new one is needed
    await core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "hog", "annotations": {"localcluster.kadmit.dev/runtime": "60s"}}, "spec": busy})
    await request_capacity(core, custom, "used", count=1)
    await wait_request(custom, "used", "Provisioned")
    await core.create_namespaced_pod("default", {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "consumer", "annotations": {
            "autoscaling.x-k8s.io/consume-provisioning-request": "used",
            "autoscaling.x-k8s.io/provisioning-class-name": ATOMIC,
            "localcluster.kadmit.dev/runtime": "60s"}},
        "spec": GPU_POD,
    })
    pod = await wait_for(core.list_namespaced_pod, lambda p: p["status"].get("phase") == "Running",
                         namespace="default", field_selector="metadata.name=consumer")
    assert pod["spec"]["nodeName"] == "gpu-1"
    autoscaler = next(a for a in cluster.addons if isinstance(a, Autoscaler))
    await booking_time_passed(core, custom)
    request = await custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "used")
    assert condition(request, "BookingExpired") is None
    assert autoscaler.nodes_added == ["gpu-1"]


async def test_booked_nodes_refuse_other_pods(core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi) -> None:
    await core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "hog", "annotations": {"localcluster.kadmit.dev/runtime": "60s"}},
        "spec": {**GPU_POD, "nodeName": "gpu-0"}})
    await request_capacity(core, custom, "reserved", count=1)
    await wait_request(custom, "reserved", "Provisioned")
    await core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod",
                                                 "metadata": {"name": "intruder"}, "spec": GPU_POD})

    def unschedulable(pod: Obj) -> bool:
        scheduled = condition(pod, "PodScheduled")
        return scheduled is not None and scheduled["reason"] == "Unschedulable"

    pod = await wait_for(core.list_namespaced_pod, unschedulable, namespace="default",
                         field_selector="metadata.name=intruder")
    assert "1 node(s) were booked for a ProvisioningRequest" in condition(pod, "PodScheduled")["message"]  # type: ignore[index]


async def test_scale_up_beyond_the_pool_fails(core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi) -> None:
    await request_capacity(core, custom, "too-big", count=3)  # the GPU pool stops at 2 nodes
    failed = await wait_request(custom, "too-big", "Failed")
    message = condition(failed, "Failed")["message"]  # type: ignore[index]
    assert "pool gpu: at its maximum of 2 nodes" in message
    assert len(await gpu_nodes(core)) == 1  # all or nothing: no node was added


async def test_check_capacity_only_checks(core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi) -> None:
    check = "check-capacity.autoscaling.x-k8s.io"
    await request_capacity(core, custom, "fits", count=1, klass=check)
    fits = await wait_request(custom, "fits", "Provisioned")
    assert condition(fits, "Provisioned")["reason"] == "CapacityIsFound"  # type: ignore[index]
    await request_capacity(core, custom, "nofit", count=2, klass=check)
    def answered(obj: Obj) -> bool:
        return obj["metadata"]["name"] == "nofit" and condition(obj, "Provisioned") is not None

    nofit = await wait_for(custom.list_namespaced_custom_object, answered,
                           group=GROUP, version=VERSION, namespace="default", plural=PLURAL)
    provisioned = condition(nofit, "Provisioned")
    assert provisioned is not None and provisioned["status"] == "False"
    assert provisioned["reason"] == "CapacityIsNotFound"
    assert len(await gpu_nodes(core)) == 1


async def test_capacity_revoked_on_request(core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi) -> None:
    await request_capacity(core, custom, "revocable", count=1)
    await wait_request(custom, "revocable", "Provisioned")
    await custom.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "revocable",
        {"metadata": {"annotations": {"localcluster.kadmit.dev/revoke-capacity": "true"}}},
        _content_type="application/merge-patch+json")
    revoked = await wait_request(custom, "revocable", "CapacityRevoked")
    assert condition(revoked, "CapacityRevoked")["reason"] == "CapacityRevoked"  # type: ignore[index]


async def test_missing_pod_template_fails_the_request(custom: k8s.CustomObjectsApi) -> None:
    await custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ProvisioningRequest", "metadata": {"name": "orphan"},
        "spec": {"provisioningClassName": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
                 "podSets": [{"podTemplateRef": {"name": "absent"}, "count": 1}]},
    })
    failed = await wait_request(custom, "orphan", "Failed")
    assert condition(failed, "Failed")["reason"] == "PodTemplateNotFound"  # type: ignore[index]


async def test_job_consuming_the_request_runs_on_the_booked_nodes(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, batch: k8s.BatchV1Api
) -> None:
    """Kueue's path: after Provisioned, the Job's pods carry the consume annotation (podSetUpdates)."""
    await request_capacity(core, custom, "train", count=2)  # gpu-0 takes one, a new node the other
    await wait_request(custom, "train", "Provisioned")
    job = job_manifest("train", parallelism=2, completions=2, runtime="200ms", pod_spec=GPU_POD, annotations={
        "autoscaling.x-k8s.io/consume-provisioning-request": "train",
        "autoscaling.x-k8s.io/provisioning-class-name": ATOMIC,
    })
    await batch.create_namespaced_job("default", job)
    await wait_for(batch.list_namespaced_job, has_true("Complete"), namespace="default",
                   field_selector="metadata.name=train")
    pods = await core.list_namespaced_pod("default", label_selector="job-name=train")
    assert sorted(p.spec.node_name for p in pods.items) == ["gpu-0", "gpu-1"]
    await booking_time_passed(core, custom)
    request = await custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "train")
    assert condition(request, "BookingExpired") is None
