"""The Pod webhooks over HTTPS, served as kadmit serves them (``all_webhooks``): Kueue's gate,
label, finalizer and role hash on queued Pods, its pod-group rules, and no-ops while the pod
integration is disabled."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch

from kadmit.webhook.app import all_webhooks
from kadmit.webhook.jobs import JobWebhookConfig
from kadmit.webhook.pods import PodOptions, role_hash_of_spec
from tests.webhook.conftest import review
from tests.webhook.memview import MemoryView

QUEUE = "kueue.x-k8s.io/queue-name"
GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"
ENABLED = JobWebhookConfig(integration_kinds=frozenset({("batch", "Job"), ("", "Pod")}))
POD = {"group": "", "version": "v1", "kind": "Pod"}


def pod(
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "default", "labels": labels or {}}
    if annotations:
        meta["annotations"] = annotations
    if owner:
        meta["ownerReferences"] = [owner]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]},
    }


async def start(
    serve: Any, view: MemoryView, config: JobWebhookConfig = ENABLED, options: PodOptions | None = None
) -> Any:
    return await serve(all_webhooks(view, config, pod_options=options))


async def mutate(server: Any, obj: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    async with await server.post("/mutate--v1-pod", review(obj, namespace=namespace, **POD)) as resp:
        response = (await resp.json())["response"]
    assert response["allowed"] is True, response
    if "patch" not in response:
        return obj
    patched: dict[str, Any] = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))
    return patched


async def validate(server: Any, obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    body = review(obj, old=old, operation="UPDATE" if old else "CREATE", **POD)
    async with await server.post("/validate--v1-pod", body) as resp:
        response: dict[str, Any] = (await resp.json())["response"]
    return response


def test_role_hash_is_kueues() -> None:
    """Kueue's own test vectors (pkg/controller/jobs/pod/pod_controller_test.go)."""
    one_cpu = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
    }
    assert role_hash_of_spec(one_cpu) == "dc85db45"
    with_memory = copy.deepcopy(one_cpu)
    with_memory["containers"][0]["resources"]["requests"] = {"memory": "1Gi", "cpu": "1"}
    assert role_hash_of_spec(with_memory) == "4ebdd4a6"
    renamed = copy.deepcopy(one_cpu)
    renamed["containers"][0]["name"] = "other"  # names and images are not part of a role
    assert role_hash_of_spec(renamed) == "dc85db45"


async def test_a_queued_pod_is_gated_labelled_and_finalized(serve: Any) -> None:
    server = await start(serve, MemoryView())
    mutated = await mutate(server, pod({QUEUE: "team"}))
    assert mutated["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}]
    assert mutated["metadata"]["labels"] == {QUEUE: "team", "kueue.x-k8s.io/managed": "true"}
    assert mutated["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    assert mutated["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] == "dc85db45"


async def test_default_queue_and_namespace_selectors(serve: Any) -> None:
    view = MemoryView(
        local_queues={("default", "default"): "cq"},
        namespaces={
            "default": {"kubernetes.io/metadata.name": "default"},
            "kube-system": {"kubernetes.io/metadata.name": "kube-system"},
            "ml": {"kubernetes.io/metadata.name": "ml", "team": "ml"},
        },
    )
    server = await start(serve, view)
    assert (await mutate(server, pod()))["metadata"]["labels"][QUEUE] == "default"
    assert await mutate(server, pod({QUEUE: "q"}), namespace="kube-system") == pod({QUEUE: "q"})
    options = PodOptions(namespace_selector={"matchLabels": {"team": "ml"}})
    server = await start(serve, view, options=options)
    assert await mutate(server, pod({QUEUE: "q"})) == pod({QUEUE: "q"})  # podOptions.namespaceSelector
    assert (await mutate(server, pod({QUEUE: "q"}), namespace="ml"))["spec"]["schedulingGates"]


async def test_a_pod_of_a_managed_owner_or_without_queue_is_left_alone(serve: Any) -> None:
    server = await start(serve, MemoryView())
    assert await mutate(server, pod()) == pod()
    owned = pod(
        {QUEUE: "q"},
        owner={"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True},
    )
    assert await mutate(server, owned) == owned


async def test_with_the_integration_disabled_every_pod_passes_unchanged(serve: Any) -> None:
    server = await start(serve, MemoryView(), JobWebhookConfig())
    queued = pod({QUEUE: "q", GROUP: "g"})
    assert await mutate(server, queued) == queued
    assert (await validate(server, queued))["allowed"] is True


async def test_pod_group_rules(serve: Any) -> None:
    server = await start(serve, MemoryView())
    refused = await validate(server, pod({QUEUE: "q", GROUP: "g"}))
    assert refused["allowed"] is False
    assert refused["status"]["message"] == (
        "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Required value: both the "
        "'kueue.x-k8s.io/pod-group-total-count' annotation and the 'kueue.x-k8s.io/pod-group-name' label "
        "should be set"
    )
    bad = await validate(server, pod({QUEUE: "q", GROUP: "g"}, {TOTAL: "two"}))
    assert 'strconv.Atoi: parsing "two": invalid syntax' in bad["status"]["message"]
    managed = await validate(server, pod({"kueue.x-k8s.io/managed": "yes"}))
    assert "managed label value can only be 'true'" in managed["status"]["message"]
    good = pod({QUEUE: "q", GROUP: "g"}, {TOTAL: "2"})
    assert (await validate(server, good))["allowed"] is True
    renamed = pod({QUEUE: "q", GROUP: "h"}, {TOTAL: "2"})
    moved = await validate(server, renamed, good)
    assert (
        'metadata.labels[kueue.x-k8s.io/pod-group-name]: Invalid value: "h": field is immutable'
        in moved["status"]["message"]
    )
    unretriable = pod({QUEUE: "q", GROUP: "g"}, {TOTAL: "2", "kueue.x-k8s.io/retriable-in-group": "false"})
    back = await validate(server, good, unretriable)
    assert "unretriable pod group can't be converted to retriable" in back["status"]["message"]


async def test_the_queue_of_a_running_pod_is_fixed(serve: Any) -> None:
    server = await start(serve, MemoryView())
    gated = pod({QUEUE: "a"})
    gated["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    moved = copy.deepcopy(gated)
    moved["metadata"]["labels"][QUEUE] = "b"
    assert (await validate(server, moved, gated))["allowed"] is True  # still gated: it may move
    running = copy.deepcopy(moved)
    del running["spec"]["schedulingGates"]
    old = copy.deepcopy(gated)
    del old["spec"]["schedulingGates"]
    response = await validate(server, running, old)
    assert (
        'kueue.x-k8s.io/queue-name]: Invalid value: "b": field is immutable' in response["status"]["message"]
    )
