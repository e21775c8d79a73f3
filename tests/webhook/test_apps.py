"""The Deployment and StatefulSet webhooks over HTTPS (Kueue's ``deployment`` and ``statefulset``)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch

from kadmit.webhook.app import all_webhooks
from kadmit.webhook.jobs import JobWebhookConfig
from tests.webhook.conftest import review
from tests.webhook.memview import MemoryView, admitted_workload

QUEUE = "kueue.x-k8s.io/queue-name"
PARENT = "kueue.x-k8s.io/pod-suspending-parent"
ENABLED = JobWebhookConfig(
    integration_kinds=frozenset({("batch", "Job"), ("apps", "Deployment"), ("apps", "StatefulSet")})
)


def parent(kind: str, replicas: int = 3, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "default", "labels": dict(labels)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "x"}},
            "template": {
                "metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }


async def mutate(server: Any, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    path = f"/mutate-apps-v1-{kind.lower()}"
    async with await server.post(path, review(obj, group="apps", version="v1", kind=kind)) as resp:
        response = (await resp.json())["response"]
    assert response["allowed"] is True, response
    if "patch" not in response:
        return obj
    patched: dict[str, Any] = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))
    return patched


async def validate(server: Any, kind: str, obj: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    body = review(obj, old=old, operation="UPDATE", group="apps", version="v1", kind=kind)
    async with await server.post(f"/validate-apps-v1-{kind.lower()}", body) as resp:
        response: dict[str, Any] = (await resp.json())["response"]
    return response


async def test_a_queued_deployment_marks_its_pod_template(serve: Any) -> None:
    server = await serve(all_webhooks(MemoryView(), ENABLED))
    mutated = await mutate(server, "Deployment", parent("Deployment", **{QUEUE: "q"}))
    template = mutated["spec"]["template"]["metadata"]
    assert template["annotations"] == {PARENT: "deployment"}
    assert template["labels"] == {"app": "x", "kueue.x-k8s.io/managed": "true", QUEUE: "q"}
    unqueued = parent("Deployment")
    assert await mutate(server, "Deployment", unqueued) == unqueued


async def test_a_queued_statefulset_marks_only_the_parent_annotation(serve: Any) -> None:
    view = MemoryView(local_queues={("default", "default"): "cq"})
    server = await serve(all_webhooks(view, ENABLED))
    mutated = await mutate(server, "StatefulSet", parent("StatefulSet"))
    assert mutated["metadata"]["labels"] == {QUEUE: "default"}  # the default LocalQueue
    assert mutated["spec"]["template"]["metadata"] == {
        "labels": {"app": "x"},
        "annotations": {PARENT: "statefulset"},
    }


async def test_a_managed_statefulset_scales_only_to_and_from_zero(serve: Any) -> None:
    server = await serve(all_webhooks(MemoryView(), ENABLED))
    old = parent("StatefulSet", 3, **{QUEUE: "q"})
    bigger = copy.deepcopy(old)
    bigger["spec"]["replicas"] = 5
    refused = await validate(server, "StatefulSet", bigger, old)
    assert refused["allowed"] is False
    assert refused["status"]["message"] == "spec.replicas: Invalid value: 5: field is immutable"
    zero = copy.deepcopy(old)
    zero["spec"]["replicas"] = 0
    assert (await validate(server, "StatefulSet", zero, old))["allowed"] is True
    back = copy.deepcopy(old)
    back["spec"]["replicas"] = 5
    assert (await validate(server, "StatefulSet", back, zero))["allowed"] is True
    unmanaged = parent("StatefulSet", 3)
    more = copy.deepcopy(unmanaged)
    more["spec"]["replicas"] = 5
    assert (await validate(server, "StatefulSet", more, unmanaged))["allowed"] is True


async def test_a_statefulset_scales_up_from_zero_only_once_its_workload_is_on_hold(serve: Any) -> None:
    """Kueue's: the Workload kept at zero replicas is on hold; one that is not is still going."""
    view = MemoryView()
    server = await serve(all_webhooks(view, ENABLED))
    zero = parent("StatefulSet", 0, **{QUEUE: "q"})
    zero["metadata"]["uid"] = "sts-uid"
    back = copy.deepcopy(zero)
    back["spec"]["replicas"] = 3
    view.workloads["sts-uid"] = admitted_workload()
    refused = await validate(server, "StatefulSet", back, zero)
    assert refused["allowed"] is False
    assert refused["status"]["message"] == (
        "spec.replicas: Forbidden: workload from previous scale-down is still being deleted"
    )
    held = {"type": "QuotaReserved", "status": "False", "reason": "OnHold", "message": "held"}
    view.workloads["sts-uid"] = {"status": {"conditions": [held]}}
    assert (await validate(server, "StatefulSet", back, zero))["allowed"] is True
    terminating = copy.deepcopy(back)
    terminating["status"] = {"replicas": 1}
    refused = await validate(server, "StatefulSet", terminating, zero)
    assert refused["status"]["message"] == "spec.replicas: Forbidden: scaling down is still in progress"
    del view.workloads["sts-uid"]
    assert (await validate(server, "StatefulSet", back, zero))["allowed"] is True


async def test_the_queue_is_fixed_once_a_replica_is_ready(serve: Any) -> None:
    server = await serve(all_webhooks(MemoryView(), ENABLED))
    old = parent("Deployment", **{QUEUE: "a"})
    old["status"] = {"readyReplicas": 1}
    moved = copy.deepcopy(old)
    moved["metadata"]["labels"][QUEUE] = "b"
    response = await validate(server, "Deployment", moved, old)
    assert (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "b": field is immutable'
        in response["status"]["message"]
    )
    old["status"] = {"readyReplicas": 0}
    assert (await validate(server, "Deployment", moved, old))["allowed"] is True


async def test_disabled_integrations_leave_them_alone(serve: Any) -> None:
    server = await serve(all_webhooks(MemoryView(), JobWebhookConfig()))
    queued = parent("StatefulSet", **{QUEUE: "q"})
    assert await mutate(server, "StatefulSet", queued) == queued


LWS_ENABLED = JobWebhookConfig(integration_kinds=frozenset({("leaderworkerset.x-k8s.io", "LeaderWorkerSet")}))


async def test_a_queued_leader_worker_set_marks_both_templates(serve: Any) -> None:
    server = await serve(all_webhooks(MemoryView(), LWS_ENABLED))
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "x", "namespace": "default", "labels": {QUEUE: "q"}},
        "spec": {
            "leaderWorkerTemplate": {
                "size": 3,
                "leaderTemplate": {"spec": {"containers": []}},
                "workerTemplate": {"spec": {"containers": []}},
            }
        },
    }
    body = review(lws, group="leaderworkerset.x-k8s.io", version="v1", kind="LeaderWorkerSet")
    async with await server.post("/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset", body) as resp:
        response = (await resp.json())["response"]
    mutated = jsonpatch.apply_patch(lws, json.loads(base64.b64decode(response["patch"])))
    for key in ("leaderTemplate", "workerTemplate"):
        meta = mutated["spec"]["leaderWorkerTemplate"][key]["metadata"]
        assert meta["annotations"] == {PARENT: "leaderworkerset", "kueue.x-k8s.io/pod-group-serving": "true"}
        assert meta["labels"] == {QUEUE: "q"}
