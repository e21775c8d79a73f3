"""The Kubeflow jobs' webhooks over HTTPS, served as kadmit serves them (``all_webhooks``):
Kueue's defaulting and validation on ``spec.runPolicy``, kadmit's start guard, and no-ops while
a kind's integration is disabled; every sample of ``manifests/samples`` for the six kinds."""

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
from kadmit.webhook.kubeflow import KUBEFLOW_KINDS, KubeflowKind
from tests.webhook.conftest import review
from tests.webhook.memview import MemoryView, admitted_workload

SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"
QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
ENABLED = JobWebhookConfig(
    integration_kinds=frozenset({("batch", "Job"), *(("kubeflow.org", k.kind) for k in KUBEFLOW_KINDS)})
)
KINDS = pytest.mark.parametrize("kind", KUBEFLOW_KINDS, ids=lambda k: k.kind)


def sample(kind: KubeflowKind, **labels: str) -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((SAMPLES / f"{kind.kind.lower()}.yaml").read_text())
    job["metadata"]["uid"] = "uid-kf"
    if labels:
        job["metadata"]["labels"] = dict(labels)
    return job


def with_suspend(job: dict[str, Any], value: bool) -> dict[str, Any]:
    job = copy.deepcopy(job)
    job["spec"].setdefault("runPolicy", {})["suspend"] = value
    return job


def paths(kind: KubeflowKind) -> tuple[str, str]:
    stem = f"kubeflow-org-{kind.version}-{kind.kind.lower()}"
    return f"/mutate-{stem}", f"/validate-{stem}"


def gvk(kind: KubeflowKind) -> dict[str, str]:
    return {"group": "kubeflow.org", "version": kind.version, "kind": kind.kind}


async def start(serve: Any, view: MemoryView, config: JobWebhookConfig | None = ENABLED) -> Any:
    return await serve(all_webhooks(view, config))


async def mutate(
    server: Any, kind: KubeflowKind, job: dict[str, Any], namespace: str = "default"
) -> dict[str, Any]:
    async with await server.post(paths(kind)[0], review(job, namespace=namespace, **gvk(kind))) as resp:
        assert resp.status == 200
        response = (await resp.json())["response"]
    assert response["allowed"] is True, response
    if "patch" not in response:
        return job
    patched: dict[str, Any] = jsonpatch.apply_patch(job, json.loads(base64.b64decode(response["patch"])))
    return patched


async def validate(
    server: Any,
    kind: KubeflowKind,
    job: dict[str, Any],
    old: dict[str, Any] | None = None,
    username: str = "alice",
) -> dict[str, Any]:
    body = review(job, old=old, operation="UPDATE" if old else "CREATE", username=username, **gvk(kind))
    async with await server.post(paths(kind)[1], body) as resp:
        assert resp.status == 200
        response: dict[str, Any] = (await resp.json())["response"]
    return response


def message(response: dict[str, Any]) -> str:
    assert response["allowed"] is False, response
    return str(response["status"]["message"])


@KINDS
async def test_the_sample_gets_the_default_queue_and_priority_and_is_suspended(
    serve: Any, kind: KubeflowKind
) -> None:
    view = MemoryView(local_queues={("default", "default"): "cluster-queue"}, priority_classes={"default"})
    server = await start(serve, view)
    mutated = await mutate(server, kind, sample(kind))
    assert mutated["spec"]["runPolicy"]["suspend"] is True
    assert "suspend" not in {k for k in mutated["spec"] if k != "runPolicy"}
    assert mutated["metadata"]["labels"] == {QUEUE: "default", PRIORITY: "default"}
    field = kind.replica_specs_field
    assert mutated["spec"][field] == sample(kind)["spec"][field]
    # the run policy's other fields are kept
    assert {k: v for k, v in mutated["spec"]["runPolicy"].items() if k != "suspend"} == (
        sample(kind)["spec"].get("runPolicy") or {}
    )


@KINDS
async def test_unlabelled_left_alone_and_disabled_integration_is_a_no_op(
    serve: Any, kind: KubeflowKind
) -> None:
    server = await start(serve, MemoryView())
    assert (await mutate(server, kind, sample(kind))) == sample(kind)
    disabled = await start(serve, MemoryView(local_queues={("default", "default"): "cq"}), JobWebhookConfig())
    job = sample(kind, **{QUEUE: "bad_name"})
    assert await mutate(disabled, kind, job) == job
    assert (await validate(disabled, kind, with_suspend(job, False)))["allowed"] is True


@KINDS
async def test_a_multikueue_queue_hands_the_job_to_multikueue_in_run_policy(
    serve: Any, kind: KubeflowKind
) -> None:
    view = MemoryView(
        local_queues={("default", "mk"): "mk-cq", ("default", "plain"): "cq"},
        cluster_queue_checks={"mk-cq": [MULTIKUEUE]},
    )
    server = await start(
        serve, view, JobWebhookConfig(integration_kinds=ENABLED.integration_kinds, multikueue=True)
    )
    mutated = await mutate(server, kind, sample(kind, **{QUEUE: "mk"}))
    assert mutated["spec"]["runPolicy"]["managedBy"] == MULTIKUEUE and "managedBy" not in mutated["spec"]
    own = sample(kind, **{QUEUE: "mk"})
    own["spec"].setdefault("runPolicy", {})["managedBy"] = kind.managed_by
    assert (await mutate(server, kind, own))["spec"]["runPolicy"]["managedBy"] == MULTIKUEUE
    other = sample(kind, **{QUEUE: "mk"})
    other["spec"].setdefault("runPolicy", {})["managedBy"] = "example.com/mine"
    assert (await mutate(server, kind, other))["spec"]["runPolicy"]["managedBy"] == "example.com/mine"
    assert (
        "managedBy" not in (await mutate(server, kind, sample(kind, **{QUEUE: "plain"})))["spec"]["runPolicy"]
    )


@KINDS
async def test_labels_and_topology_are_validated_with_kueues_messages(serve: Any, kind: KubeflowKind) -> None:
    server = await start(serve, MemoryView())
    job = with_suspend(sample(kind, **{QUEUE: "a_b", "kueue.x-k8s.io/max-exec-time-seconds": "0"}), True)
    text = message(await validate(server, kind, job))
    assert 'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "a_b"' in text
    assert (
        "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: 0: should be greater than 0"
        in text
    )
    job = with_suspend(sample(kind, **{QUEUE: "q"}), True)
    last = (
        kind.replica_types[-1]
        if kind.replica_types[-1] in job["spec"][kind.replica_specs_field]
        else "Worker"
    )
    meta = job["spec"][kind.replica_specs_field][last]["template"]["metadata"]
    meta["annotations"]["kueue.x-k8s.io/podset-slice-size"] = "5"
    count = job["spec"][kind.replica_specs_field][last]["replicas"]
    text = message(await validate(server, kind, job))
    assert text.startswith(f"[spec.{kind.replica_specs_field}[{last}].template.metadata.annotations"), text
    assert f"must not be greater than pod set count {count}" in text


@KINDS
async def test_queue_immutable_while_running_read_from_run_policy(serve: Any, kind: KubeflowKind) -> None:
    server = await start(serve, MemoryView(local_queues={("default", "default"): "cq"}))
    old = with_suspend(sample(kind, **{QUEUE: "a", PRIORITY: "high"}), False)
    moved = with_suspend(sample(kind, **{QUEUE: "b", PRIORITY: "high"}), False)
    assert message(await validate(server, kind, moved, old, CONTROLLER_USERNAME)) == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "b": field is immutable'
    )
    assert (await validate(server, kind, with_suspend(moved, True), with_suspend(old, True)))[
        "allowed"
    ] is True
    assert message(
        await validate(
            server, kind, with_suspend(sample(kind, **{QUEUE: "a"}), True), with_suspend(old, True)
        )
    ) == (
        'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "": '
        "WorkloadPriorityClass cannot be removed from a workload"
    )


@KINDS
async def test_the_start_guard(serve: Any, kind: KubeflowKind) -> None:
    old = with_suspend(sample(kind, **{QUEUE: "q"}), True)
    name = f"default/sample-{kind.kind.lower()}"
    server = await start(serve, MemoryView(workloads={"uid-kf": admitted_workload(True)}))
    assert message(await validate(server, kind, with_suspend(old, False), old, "alice")) == (
        f"{kind.kind} {name} cannot be unsuspended by alice: kadmit starts it once its Workload is admitted"
    )
    assert (await validate(server, kind, with_suspend(old, False), old, CONTROLLER_USERNAME))[
        "allowed"
    ] is True
    server = await start(serve, MemoryView())
    assert message(await validate(server, kind, with_suspend(old, False), old, CONTROLLER_USERNAME)) == (
        f"{kind.kind} {name} cannot be unsuspended: its Workload is not admitted by kadmit"
    )
    created = with_suspend(sample(kind, **{QUEUE: "q"}), False)
    assert message(await validate(server, kind, created)) == (
        f"{kind.kind} {name} is managed by kadmit and must be created suspended "
        f"(is the mutating webhook m{kind.kind.lower()}.kb.io registered?)"
    )


async def test_mpijob_errors_are_sorted_by_field_as_kueues_mpijob_webhook_does(serve: Any) -> None:
    server = await start(serve, MemoryView())
    labels = {QUEUE: "a_b", "kueue.x-k8s.io/max-exec-time-seconds": "0"}
    for kind in KUBEFLOW_KINDS:
        job = with_suspend(sample(kind, **labels), True)
        meta = job["spec"][kind.replica_specs_field]["Worker"]["template"]["metadata"]
        meta["annotations"]["kueue.x-k8s.io/podset-slice-size"] = "5"
        text = message(await validate(server, kind, job))
        first = text.split(": ", 1)[0].lstrip("[")
        # MPIJob's sorted: max-exec-time before queue-name; the others keep Kueue's order (queue first)
        expected = "max-exec-time-seconds" if kind.kind == "MPIJob" else "queue-name"
        assert first == f"metadata.labels[kueue.x-k8s.io/{expected}]", (kind.kind, text)
