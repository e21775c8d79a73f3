"""The TrainJob webhooks over HTTPS, served as kadmit serves them (``all_webhooks``): Kueue's
defaulting (queue, suspend, managedBy, and Kueue's runtime patch), validation and the start guard."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch

from kadmit.webhook.app import all_webhooks
from kadmit.webhook.jobs import CONTROLLER_USERNAME, JobWebhookConfig
from tests.webhook.conftest import review
from tests.webhook.memview import MemoryView, admitted_workload

QUEUE = "kueue.x-k8s.io/queue-name"
MUTATE = "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"
VALIDATE = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"
KINDS = frozenset({("batch", "Job"), ("trainer.kubeflow.org", "TrainJob")})
ENABLED = JobWebhookConfig(integration_kinds=KINDS)
GVK = {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": "TrainJob"}
KUEUE_PATCH = {"manager": "kueue.x-k8s.io/manager", "trainingRuntimeSpec": {"template": {"spec": {}}}}


def trainjob(**labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "default", "uid": "uid-tj", "labels": dict(labels)},
        "spec": {"runtimeRef": {"name": "torch"}, "trainer": {"numNodes": 2}},
    }


def with_suspend(job: dict[str, Any], value: bool) -> dict[str, Any]:
    job = copy.deepcopy(job)
    job["spec"]["suspend"] = value
    return job


async def mutate(server: Any, job: dict[str, Any]) -> dict[str, Any]:
    async with await server.post(MUTATE, review(job, **GVK)) as resp:
        response = (await resp.json())["response"]
    assert response["allowed"] is True, response
    if "patch" not in response:
        return job
    patched: dict[str, Any] = jsonpatch.apply_patch(job, json.loads(base64.b64decode(response["patch"])))
    return patched


async def validate(
    server: Any, job: dict[str, Any], old: dict[str, Any] | None = None, user: str = "alice"
) -> Any:
    body = review(job, old=old, operation="UPDATE" if old else "CREATE", username=user, **GVK)
    async with await server.post(VALIDATE, body) as resp:
        return (await resp.json())["response"]


async def test_defaulting_suspends_and_adds_kueues_runtime_patch_once(serve: Any) -> None:
    server = await serve(all_webhooks(MemoryView(local_queues={("default", "default"): "cq"}), ENABLED))
    mutated = await mutate(server, trainjob())
    assert mutated["metadata"]["labels"] == {QUEUE: "default"}
    assert mutated["spec"]["suspend"] is True
    assert mutated["spec"]["runtimePatches"] == [KUEUE_PATCH]
    again = await mutate(server, mutated)
    assert again["spec"]["runtimePatches"] == [KUEUE_PATCH]  # not twice
    mine = trainjob(**{QUEUE: "q"})
    mine["spec"]["runtimePatches"] = [{"manager": "me"}]
    assert [p["manager"] for p in (await mutate(server, mine))["spec"]["runtimePatches"]] == [
        "me",
        "kueue.x-k8s.io/manager",
    ]


async def test_multikueue_sets_spec_managed_by(serve: Any) -> None:
    view = MemoryView(
        local_queues={("default", "mk"): "mk-cq"},
        cluster_queue_checks={"mk-cq": ["kueue.x-k8s.io/multikueue"]},
    )
    server = await serve(all_webhooks(view, JobWebhookConfig(integration_kinds=KINDS, multikueue=True)))
    assert (await mutate(server, trainjob(**{QUEUE: "mk"})))["spec"][
        "managedBy"
    ] == "kueue.x-k8s.io/multikueue"


async def test_disabled_is_a_no_op(serve: Any) -> None:
    server = await serve(
        all_webhooks(MemoryView(local_queues={("default", "default"): "cq"}), JobWebhookConfig())
    )
    assert await mutate(server, trainjob()) == trainjob()


async def test_validation_and_the_start_guard(serve: Any) -> None:
    server = await serve(all_webhooks(MemoryView(), ENABLED))
    response = await validate(server, with_suspend(trainjob(**{QUEUE: "a_b"}), True))
    assert response["allowed"] is False
    assert response["status"]["message"].startswith(
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "a_b"'
    )
    old = with_suspend(trainjob(**{QUEUE: "q"}), True)
    response = await validate(server, with_suspend(old, False), old, CONTROLLER_USERNAME)
    assert response["status"]["message"] == (
        "TrainJob default/tj cannot be unsuspended: its Workload is not admitted by kadmit"
    )
    admitted = await serve(all_webhooks(MemoryView(workloads={"uid-tj": admitted_workload(True)}), ENABLED))
    assert (await validate(admitted, with_suspend(old, False), old, CONTROLLER_USERNAME))["allowed"] is True
    response = await validate(admitted, with_suspend(old, False), old, "alice")
    assert "cannot be unsuspended by alice" in response["status"]["message"]
