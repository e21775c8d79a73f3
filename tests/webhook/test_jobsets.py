"""The JobSet webhooks over HTTPS, served as kadmit serves them (``all_webhooks``): Kueue's
defaulting and validation for JobSets, kadmit's start guard, and no-ops while the JobSet
integration is disabled."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from kadmit.webhook.app import all_webhooks
from kadmit.webhook.jobs import CONTROLLER_USERNAME, JobWebhookConfig
from tests.webhook.conftest import review
from tests.webhook.memview import MemoryView, admitted_workload

SAMPLE = Path(__file__).resolve().parents[2] / "manifests" / "samples" / "jobset.yaml"
QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"
MUTATE = "/mutate-jobset-x-k8s-io-v1alpha2-jobset"
VALIDATE = "/validate-jobset-x-k8s-io-v1alpha2-jobset"
ENABLED = JobWebhookConfig(integration_kinds=frozenset({("batch", "Job"), ("jobset.x-k8s.io", "JobSet")}))
JOBSET = {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"}


def sample_jobset(**labels: str) -> dict[str, Any]:
    jobset: dict[str, Any] = yaml.safe_load(SAMPLE.read_text())
    jobset["metadata"]["uid"] = "uid-js"
    if labels:
        jobset["metadata"]["labels"] = dict(labels)
    return jobset


def running(jobset: dict[str, Any]) -> dict[str, Any]:
    jobset = copy.deepcopy(jobset)
    jobset["spec"]["suspend"] = False
    return jobset


def suspended(jobset: dict[str, Any]) -> dict[str, Any]:
    jobset = copy.deepcopy(jobset)
    jobset["spec"]["suspend"] = True
    return jobset


async def start(serve: Any, view: MemoryView, config: JobWebhookConfig | None = ENABLED) -> Any:
    return await serve(all_webhooks(view, config))


async def mutate(server: Any, jobset: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    body = review(jobset, namespace=namespace, **JOBSET)
    async with await server.post(MUTATE, body) as resp:
        assert resp.status == 200
        response = (await resp.json())["response"]
    assert response["allowed"] is True, response
    if "patch" not in response:
        return jobset
    patched: dict[str, Any] = jsonpatch.apply_patch(jobset, json.loads(base64.b64decode(response["patch"])))
    return patched


async def validate(
    server: Any, jobset: dict[str, Any], old: dict[str, Any] | None = None, username: str = "alice"
) -> dict[str, Any]:
    body = review(jobset, old=old, operation="UPDATE" if old else "CREATE", username=username, **JOBSET)
    async with await server.post(VALIDATE, body) as resp:
        assert resp.status == 200
        response: dict[str, Any] = (await resp.json())["response"]
    return response


def message(response: dict[str, Any]) -> str:
    assert response["allowed"] is False, response
    return str(response["status"]["message"])


# -- mutating ---------------------------------------------------------------------------------------


async def test_the_sample_gets_the_default_queue_and_priority_and_is_suspended(serve: Any) -> None:
    view = MemoryView(local_queues={("default", "default"): "cluster-queue"}, priority_classes={"default"})
    server = await start(serve, view)
    mutated = await mutate(server, sample_jobset())
    assert mutated["spec"]["suspend"] is True
    assert mutated["metadata"]["labels"] == {QUEUE: "default", PRIORITY: "default"}
    assert mutated["spec"]["replicatedJobs"] == sample_jobset()["spec"]["replicatedJobs"]


async def test_a_labelled_jobset_is_suspended_and_an_unlabelled_one_left_alone(serve: Any) -> None:
    server = await start(serve, MemoryView())
    assert (await mutate(server, sample_jobset(**{QUEUE: "team-a"})))["spec"]["suspend"] is True
    assert (await mutate(server, sample_jobset())) == sample_jobset()


async def test_manage_jobs_without_queue_name_follows_the_namespace_selector(serve: Any) -> None:
    config = JobWebhookConfig(
        manage_jobs_without_queue_name=True,
        managed_jobs_namespace_selector={"matchLabels": {"team": "ml"}},
        integration_kinds=ENABLED.integration_kinds,
    )
    view = MemoryView(namespaces={"ml": {"team": "ml"}, "web": {"team": "web"}})
    server = await start(serve, view, config)
    assert (await mutate(server, sample_jobset(), namespace="ml"))["spec"]["suspend"] is True
    assert "suspend" not in (await mutate(server, sample_jobset(), namespace="web"))["spec"]


async def test_a_multikueue_queue_hands_the_jobset_to_multikueue(serve: Any) -> None:
    view = MemoryView(
        local_queues={("default", "mk"): "mk-cq", ("default", "plain"): "cq"},
        cluster_queue_checks={"mk-cq": ["kueue.x-k8s.io/multikueue"]},
    )
    server = await start(serve, view)
    mutated = await mutate(server, sample_jobset(**{QUEUE: "mk"}))
    assert mutated["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    own = sample_jobset(**{QUEUE: "mk"})
    own["spec"]["managedBy"] = "jobset.sigs.k8s.io/jobset-controller"
    assert (await mutate(server, own))["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    other = sample_jobset(**{QUEUE: "mk"})
    other["spec"]["managedBy"] = "example.com/mine"
    assert (await mutate(server, other))["spec"]["managedBy"] == "example.com/mine"
    assert "managedBy" not in (await mutate(server, sample_jobset(**{QUEUE: "plain"})))["spec"]


async def test_with_the_integration_disabled_the_webhooks_allow_everything_unchanged(serve: Any) -> None:
    view = MemoryView(local_queues={("default", "default"): "cq"})
    server = await start(serve, view, JobWebhookConfig())
    jobset = sample_jobset(**{QUEUE: "bad_name"})
    assert await mutate(server, jobset) == jobset
    assert (await validate(server, running(jobset)))["allowed"] is True
    assert (await validate(server, running(jobset), suspended(jobset)))["allowed"] is True


# -- validating -------------------------------------------------------------------------------------


async def test_labels_are_validated_with_kueues_messages(serve: Any) -> None:
    server = await start(serve, MemoryView())
    jobset = suspended(sample_jobset(**{QUEUE: "a_b", "kueue.x-k8s.io/max-exec-time-seconds": "0"}))
    text = message(await validate(server, jobset))
    assert text.startswith('[metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "a_b"')
    assert text.endswith(
        "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: 0: should be greater than 0]"
    )


async def test_topology_annotations_are_checked_per_replicated_job(serve: Any) -> None:
    server = await start(serve, MemoryView())
    jobset = suspended(sample_jobset(**{QUEUE: "q"}))
    workers = jobset["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["metadata"]
    workers["annotations"]["kueue.x-k8s.io/podset-slice-size"] = "5"
    text = message(await validate(server, jobset))
    # the workers' pod set counts replicas * parallelism = 4 pods
    assert text.startswith("[spec.replicatedJobs[1].template.spec.template.metadata.annotations")
    assert "must not be greater than pod set count 4" in text
    workers["annotations"]["kueue.x-k8s.io/podset-slice-size"] = "2"
    workers["annotations"]["kueue.x-k8s.io/podset-slice-required-topology"] = "cloud.example.com/rack"
    assert (await validate(server, jobset))["allowed"] is True


async def test_queue_is_immutable_while_running_and_priority_may_not_go(serve: Any) -> None:
    server = await start(serve, MemoryView(local_queues={("default", "default"): "cq"}))
    old = running(sample_jobset(**{QUEUE: "a", PRIORITY: "high"}))
    moved = running(sample_jobset(**{QUEUE: "b", PRIORITY: "high"}))
    assert message(await validate(server, moved, old, CONTROLLER_USERNAME)) == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "b": field is immutable'
    )
    assert (await validate(server, suspended(moved), suspended(old)))["allowed"] is True
    assert message(await validate(server, suspended(sample_jobset(**{QUEUE: "a"})), suspended(old))) == (
        'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "": '
        "WorkloadPriorityClass cannot be removed from a workload"
    )
    assert "queue-name must not be empty in namespace with default queue" in message(
        await validate(server, suspended(sample_jobset(**{PRIORITY: "high"})), suspended(old))
    )


# -- the start guard ---------------------------------------------------------------------------------


async def test_a_user_cannot_unsuspend_a_managed_jobset(serve: Any) -> None:
    view = MemoryView(workloads={"uid-js": admitted_workload(True)})
    server = await start(serve, view)
    old = suspended(sample_jobset(**{QUEUE: "q"}))
    assert message(await validate(server, running(old), old, "alice")) == (
        "JobSet default/sample-jobset cannot be unsuspended by alice: "
        "kadmit starts it once its Workload is admitted"
    )


async def test_the_controller_starts_only_a_jobset_whose_workload_is_admitted(serve: Any) -> None:
    view = MemoryView()
    server = await start(serve, view)
    old = suspended(sample_jobset(**{QUEUE: "q"}))
    denied = "JobSet default/sample-jobset cannot be unsuspended: its Workload is not admitted by kadmit"
    assert message(await validate(server, running(old), old, CONTROLLER_USERNAME)) == denied
    view.workloads["uid-js"] = admitted_workload(False)
    assert message(await validate(server, running(old), old, CONTROLLER_USERNAME)) == denied
    view.workloads["uid-js"] = admitted_workload(True)
    assert (await validate(server, running(old), old, CONTROLLER_USERNAME))["allowed"] is True
    # Suspending (an eviction) is always allowed, and unmanaged JobSets are not guarded.
    assert (await validate(server, old, running(old), "alice"))["allowed"] is True
    unmanaged = suspended(sample_jobset())
    assert (await validate(server, running(unmanaged), unmanaged, "alice"))["allowed"] is True


async def test_a_managed_jobset_created_running_is_denied(serve: Any) -> None:
    server = await start(serve, MemoryView())
    response = await validate(server, running(sample_jobset(**{QUEUE: "q"})))
    assert message(response) == (
        "JobSet default/sample-jobset is managed by kadmit and must be created suspended "
        "(is the mutating webhook mjobset.kb.io registered?)"
    )


@pytest.mark.parametrize("path", [MUTATE, VALIDATE])
async def test_the_jobset_paths_refuse_other_kinds(serve: Any, path: str) -> None:
    server = await start(serve, MemoryView())
    body = review(sample_jobset(), group="batch", version="v1", kind="Job")
    async with await server.post(path, body) as resp:
        assert resp.status == 400
        assert f"{path} serves jobset.x-k8s.io/v1alpha2 JobSet, not batch/v1 Job" in await resp.text()
