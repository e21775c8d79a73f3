"""The Job webhooks over HTTPS: Kueue's defaulting and validation, and kadmit's start guard."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from kadmit.webhook.jobs import CONTROLLER_USERNAME, BatchJobWebhooks, JobWebhookConfig
from tests.webhook.conftest import review
from tests.webhook.memview import MemoryView, admitted_workload

EXAMPLES = Path("/work/shared/kueue-examples")
QUEUE = "kueue.x-k8s.io/queue-name"


def sample_job() -> dict[str, Any]:
    job: dict[str, Any] = yaml.safe_load((EXAMPLES / "jobs__sample-job.yaml").read_text())
    job["metadata"]["name"] = "sample-job-abcde"
    job["metadata"]["uid"] = "uid-1"
    return job


def plain_job(name: str = "x", namespace: str = "default", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": dict(labels)},
        "spec": {"parallelism": 2, "completions": 2, "template": {"spec": {"containers": []}}},
    }


async def start(serve: Any, view: MemoryView, config: JobWebhookConfig | None = None) -> Any:
    return await serve(BatchJobWebhooks(view, config).webhooks())


async def mutate(server: Any, job: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    body = review(job, namespace=namespace)
    async with await server.post("/mutate-batch-v1-job", body) as resp:
        assert resp.status == 200
        response = (await resp.json())["response"]
    assert response["allowed"] is True, response
    assert response["uid"] == body["request"]["uid"]
    if "patch" not in response:
        return job
    patched: dict[str, Any] = jsonpatch.apply_patch(job, json.loads(base64.b64decode(response["patch"])))
    return patched


async def validate(
    server: Any, job: dict[str, Any], old: dict[str, Any] | None = None, username: str = "alice"
) -> dict[str, Any]:
    body = review(job, old=old, operation="UPDATE" if old else "CREATE", username=username)
    async with await server.post("/validate-batch-v1-job", body) as resp:
        assert resp.status == 200
        response: dict[str, Any] = (await resp.json())["response"]
    assert response["uid"] == body["request"]["uid"]
    return response


def message(response: dict[str, Any]) -> str:
    assert response["allowed"] is False
    return str(response["status"]["message"])


# -- mutating ---------------------------------------------------------------------------------------


async def test_kueue_sample_job_is_suspended(serve: Any) -> None:
    server = await start(serve, MemoryView(local_queues={("default", "user-queue"): "cluster-queue"}))
    job = sample_job()
    assert "suspend" not in job["spec"]
    mutated = await mutate(server, job)
    assert mutated["spec"]["suspend"] is True
    assert mutated["metadata"]["labels"] == {QUEUE: "user-queue"}
    assert "managedBy" not in mutated["spec"]
    assert (await validate(server, mutated))["allowed"] is True


async def test_job_without_queue_is_left_alone(serve: Any) -> None:
    server = await start(serve, MemoryView())
    job = plain_job()
    assert await mutate(server, job) == job


async def test_default_local_queue_is_applied_and_suspends(serve: Any) -> None:
    server = await start(serve, MemoryView(local_queues={("team", "default"): "cq"}))
    mutated = await mutate(server, plain_job(namespace="team"), namespace="team")
    assert mutated["metadata"]["labels"][QUEUE] == "default"
    assert mutated["spec"]["suspend"] is True


async def test_default_local_queue_respects_the_namespace_selector(serve: Any) -> None:
    view = MemoryView(
        local_queues={("kadmit-system", "default"): "cq"},
        namespaces={"kadmit-system": {"kubernetes.io/metadata.name": "kadmit-system"}},
    )
    server = await start(serve, view)
    job = plain_job(namespace="kadmit-system")
    assert await mutate(server, job, namespace="kadmit-system") == job


async def test_child_of_an_integration_is_not_defaulted(serve: Any) -> None:
    server = await start(serve, MemoryView(local_queues={("default", "default"): "cq"}))
    job = plain_job()
    job["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "parent", "uid": "p", "controller": True}
    ]
    assert await mutate(server, job) == job


async def test_manage_jobs_without_queue_name_follows_the_selector(serve: Any) -> None:
    view = MemoryView(
        namespaces={
            "team": {"kubernetes.io/metadata.name": "team", "kadmit": "on"},
            "other": {"kubernetes.io/metadata.name": "other"},
        }
    )
    config = JobWebhookConfig(
        manage_jobs_without_queue_name=True, managed_jobs_namespace_selector={"matchLabels": {"kadmit": "on"}}
    )
    server = await start(serve, view, config)
    assert (await mutate(server, plain_job(namespace="team"), "team"))["spec"]["suspend"] is True
    assert "suspend" not in (await mutate(server, plain_job(namespace="other"), "other"))["spec"]
    # A queue name always suspends, even where the selector does not reach (contract §10.8).
    labelled = plain_job(namespace="other", **{QUEUE: "q"})
    assert (await mutate(server, labelled, "other"))["spec"]["suspend"] is True


async def test_default_workload_priority_class(serve: Any) -> None:
    view = MemoryView(local_queues={("default", "q"): "cq"}, priority_classes={"default"})
    server = await start(serve, view)
    mutated = await mutate(server, plain_job(**{QUEUE: "q"}))
    assert mutated["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "default"
    chosen = plain_job(**{QUEUE: "q", "kueue.x-k8s.io/priority-class": "high"})
    assert (await mutate(server, chosen))["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high"
    off = await start(serve, view, JobWebhookConfig(workload_priority_class_defaulting=False))
    assert (
        "kueue.x-k8s.io/priority-class"
        not in (await mutate(off, plain_job(**{QUEUE: "q"})))["metadata"]["labels"]
    )


async def test_multikueue_cluster_queue_sets_managed_by(serve: Any) -> None:
    view = MemoryView(
        local_queues={("default", "mk"): "mk-cq", ("default", "plain"): "cq"},
        cluster_queue_checks={
            "mk-cq": ["kueue.x-k8s.io/multikueue"],
            "cq": ["kueue.x-k8s.io/provisioning-request"],
        },
    )
    server = await start(serve, view)
    assert (await mutate(server, plain_job(**{QUEUE: "mk"})))["spec"][
        "managedBy"
    ] == "kueue.x-k8s.io/multikueue"
    assert "managedBy" not in (await mutate(server, plain_job(**{QUEUE: "plain"})))["spec"]
    custom = plain_job(**{QUEUE: "mk"})
    custom["spec"]["managedBy"] = "example.com/other"
    assert (await mutate(server, custom))["spec"]["managedBy"] == "example.com/other"


# -- validating -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "annotations", "expected"),
    [
        (
            {QUEUE: "Bad_Queue"},
            {},
            'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Bad_Queue": a lowercase RFC 1123 '
            "subdomain must consist of lower case alphanumeric characters, '-' or '.', "
            "and must start and end with an alphanumeric character "
            "(e.g. 'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
        (
            {"kueue.x-k8s.io/max-exec-time-seconds": "0"},
            {},
            "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: 0: "
            "should be greater than 0",
        ),
        (
            {"kueue.x-k8s.io/max-exec-time-seconds": "ten"},
            {},
            'metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: "ten": '
            'strconv.Atoi: parsing "ten": invalid syntax',
        ),
        (
            {},
            {"kueue.x-k8s.io/job-min-parallelism": "2"},
            "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: Invalid value: 2: "
            "should be between 0 and 1",
        ),
        (
            {},
            {"kueue.x-k8s.io/job-completions-equal-parallelism": "true"},
            'metadata.annotations[kueue.x-k8s.io/job-completions-equal-parallelism]: Invalid value: "true": '
            "should not be enabled for NonIndexed jobs",
        ),
    ],
)
async def test_create_rules_use_kueue_messages(
    serve: Any, labels: dict[str, str], annotations: dict[str, str], expected: str
) -> None:
    server = await start(serve, MemoryView())
    job = plain_job(**labels)
    job["metadata"]["annotations"] = annotations
    job["spec"]["suspend"] = True
    response = await validate(server, job)
    assert message(response) == expected
    assert response["status"]["code"] == 403


async def test_several_errors_are_aggregated(serve: Any) -> None:
    server = await start(serve, MemoryView())
    job = plain_job(**{QUEUE: "a_b", "kueue.x-k8s.io/max-exec-time-seconds": "-1"})
    job["spec"]["suspend"] = True
    text = message(await validate(server, job))
    assert text.startswith('[metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "a_b"')
    assert text.endswith(
        "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: -1: should be greater than 0]"
    )


def running(job: dict[str, Any]) -> dict[str, Any]:
    job = copy.deepcopy(job)
    job["spec"]["suspend"] = False
    return job


def suspended(job: dict[str, Any]) -> dict[str, Any]:
    job = copy.deepcopy(job)
    job["spec"]["suspend"] = True
    return job


async def test_queue_name_is_immutable_while_running(serve: Any) -> None:
    server = await start(serve, MemoryView())
    old = running(plain_job(**{QUEUE: "a"}))
    new = running(plain_job(**{QUEUE: "b"}))
    assert message(await validate(server, new, old, CONTROLLER_USERNAME)) == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "b": field is immutable'
    )
    assert (await validate(server, suspended(new), suspended(old)))["allowed"] is True


async def test_queue_name_cannot_be_removed_with_a_default_queue(serve: Any) -> None:
    server = await start(serve, MemoryView(local_queues={("default", "default"): "cq"}))
    old = suspended(plain_job(**{QUEUE: "default"}))
    new = suspended(plain_job())
    assert message(await validate(server, new, old)) == (
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "": '
        "queue-name must not be empty in namespace with default queue"
    )


async def test_priority_class_rules(serve: Any) -> None:
    server = await start(serve, MemoryView())
    pc = "kueue.x-k8s.io/priority-class"
    with_class = plain_job(**{QUEUE: "q", pc: "high"})
    without = plain_job(**{QUEUE: "q"})
    assert message(await validate(server, running(with_class), running(without), CONTROLLER_USERNAME)) == (
        'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "high": '
        "WorkloadPriorityClass cannot be added to a non-suspended workload"
    )
    assert message(await validate(server, suspended(without), suspended(with_class))) == (
        'metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "": '
        "WorkloadPriorityClass cannot be removed from a workload"
    )
    changed = plain_job(**{QUEUE: "q", pc: "low"})
    assert (await validate(server, running(changed), running(with_class)))["allowed"] is True
    assert (await validate(server, suspended(with_class), suspended(without)))["allowed"] is True


async def test_max_exec_time_is_immutable_unless_both_suspended(serve: Any) -> None:
    server = await start(serve, MemoryView())
    key = "kueue.x-k8s.io/max-exec-time-seconds"
    old = plain_job(**{QUEUE: "q", key: "10"})
    new = plain_job(**{QUEUE: "q", key: "20"})
    assert message(await validate(server, running(new), running(old), CONTROLLER_USERNAME)) == (
        'metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: "20": field is immutable'
    )
    assert (await validate(server, suspended(new), suspended(old)))["allowed"] is True


async def test_partial_admission_parallelism_is_fixed_while_running(serve: Any) -> None:
    server = await start(serve, MemoryView())
    old = running(plain_job(**{QUEUE: "q"}))
    old["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "1"}
    new = copy.deepcopy(old)
    new["spec"]["parallelism"] = 1
    assert message(await validate(server, new, old, CONTROLLER_USERNAME)) == (
        "spec.parallelism: Forbidden: "
        "cannot change when partial admission is enabled and the job is not suspended"
    )


async def test_admission_gates_may_only_be_removed(serve: Any) -> None:
    server = await start(serve, MemoryView())
    gate = "kueue.x-k8s.io/admission-gated-by"
    old = suspended(plain_job(**{QUEUE: "q"}))
    old["metadata"]["annotations"] = {gate: "example.com/a,example.com/b"}
    fewer = copy.deepcopy(old)
    fewer["metadata"]["annotations"] = {gate: "example.com/b"}
    assert (await validate(server, fewer, old))["allowed"] is True
    more = copy.deepcopy(old)
    more["metadata"]["annotations"] = {gate: "example.com/a,example.com/c"}
    assert "admission gates can only be removed" in message(await validate(server, more, old))


# -- the start guard ---------------------------------------------------------------------------------


async def test_a_user_cannot_unsuspend_a_managed_job(serve: Any) -> None:
    view = MemoryView(workloads={"uid-x": admitted_workload(False)})
    server = await start(serve, view)
    old = suspended(plain_job(**{QUEUE: "q"}))
    response = await validate(server, running(old), old, "alice")
    assert message(response) == (
        "Job default/x cannot be unsuspended by alice: kadmit starts it once its Workload is admitted"
    )
    # Even an admitted Workload does not let a user start it: the controller injects the flavors first.
    view.workloads["uid-x"] = admitted_workload(True)
    assert message(await validate(server, running(old), old, "alice")).startswith(
        "Job default/x cannot be unsuspended by alice"
    )


async def test_the_controller_starts_only_an_admitted_job(serve: Any) -> None:
    view = MemoryView()
    server = await start(serve, view)
    old = suspended(plain_job(**{QUEUE: "q"}))
    assert message(await validate(server, running(old), old, CONTROLLER_USERNAME)) == (
        "Job default/x cannot be unsuspended: its Workload is not admitted by kadmit"
    )
    view.workloads["uid-x"] = admitted_workload(False)
    assert message(await validate(server, running(old), old, CONTROLLER_USERNAME)).endswith(
        "is not admitted by kadmit"
    )
    view.workloads["uid-x"] = admitted_workload(True, evicted=True)  # being evicted: it must stop, not start
    assert message(await validate(server, running(old), old, CONTROLLER_USERNAME)).endswith(
        "is not admitted by kadmit"
    )
    view.workloads["uid-x"] = admitted_workload(True)
    assert (await validate(server, running(old), old, CONTROLLER_USERNAME))["allowed"] is True


async def test_the_guard_ignores_unmanaged_jobs_and_other_updates(serve: Any) -> None:
    server = await start(serve, MemoryView())
    unmanaged = suspended(plain_job())
    assert (await validate(server, running(unmanaged), unmanaged, "alice"))["allowed"] is True
    managed = suspended(plain_job(**{QUEUE: "q"}))
    relabelled = copy.deepcopy(managed)
    relabelled["metadata"]["labels"]["team"] = "a"
    assert (await validate(server, relabelled, managed, "alice"))["allowed"] is True
    # Suspending (an eviction, or a user) is always allowed.
    assert (await validate(server, managed, running(managed), "alice"))["allowed"] is True


async def test_removing_the_queue_while_unsuspending_is_denied(serve: Any) -> None:
    server = await start(serve, MemoryView())
    old = suspended(plain_job(**{QUEUE: "q"}))
    sneaky = running(plain_job())
    assert "field is immutable" in message(await validate(server, sneaky, old, "alice"))


async def test_a_managed_job_created_running_is_denied(serve: Any) -> None:
    server = await start(serve, MemoryView())
    response = await validate(server, running(plain_job(**{QUEUE: "q"})))
    assert message(response).startswith("Job default/x is managed by kadmit and must be created suspended")


async def test_the_controller_username_is_configurable(serve: Any) -> None:
    view = MemoryView(workloads={"uid-x": admitted_workload(True)})
    server = await start(
        serve, view, JobWebhookConfig(controller_username="system:serviceaccount:ops:kadmit")
    )
    old = suspended(plain_job(**{QUEUE: "q"}))
    assert (await validate(server, running(old), old, "system:serviceaccount:ops:kadmit"))["allowed"] is True
    assert (await validate(server, running(old), old, CONTROLLER_USERNAME))["allowed"] is False


def test_a_broken_namespace_selector_is_refused_at_startup() -> None:
    from kadmit.engine.errors import InvalidObject

    broken = {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["b"]}]}
    with pytest.raises(InvalidObject, match="selector key a: unknown operator 'Near'"):
        BatchJobWebhooks(MemoryView(), JobWebhookConfig(managed_jobs_namespace_selector=broken))


async def test_mutation_leaves_the_request_object_untouched() -> None:
    """Copy on write: the handler shares unchanged parts with the request but never edits them."""
    from kadmit.webhook.review import AdmissionRequest

    view = MemoryView(local_queues={("default", "default"): "cq"}, priority_classes={"default"})
    job = plain_job()
    original = copy.deepcopy(job)
    request = AdmissionRequest(
        uid="u",
        group="batch",
        version="v1",
        kind="Job",
        operation="CREATE",
        namespace="default",
        name="x",
        username="alice",
        groups=(),
        object=job,
        old_object=None,
        dry_run=False,
    )
    wanted = await BatchJobWebhooks(view).mutate(request)
    assert job == original
    assert wanted is not None and wanted["spec"]["suspend"] is True
    assert wanted["metadata"]["labels"] == {QUEUE: "default", "kueue.x-k8s.io/priority-class": "default"}
    assert wanted["spec"]["template"] is job["spec"]["template"]  # shared, so the patch walk skips it


async def test_topology_annotations_are_validated(serve: Any) -> None:
    server = await start(serve, MemoryView())
    job = suspended(plain_job(**{QUEUE: "q"}))
    job["spec"]["template"]["metadata"] = {
        "annotations": {
            "kueue.x-k8s.io/podset-required-topology": "cloud.example.com/rack",
            "kueue.x-k8s.io/podset-preferred-topology": "cloud.example.com/block",
        }
    }
    assert message(await validate(server, job)) == (
        "spec.template.metadata.annotations: Invalid value: "
        "must not contain more than one topology annotation: "
        '["kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology", '
        '"kueue.x-k8s.io/podset-unconstrained-topology"]'
    )
    job["spec"]["template"]["metadata"]["annotations"] = {"kueue.x-k8s.io/podset-slice-size": "3"}
    text = message(await validate(server, job))
    assert "must not be greater than pod set count 2" in text
    assert "cannot be set when 'kueue.x-k8s.io/podset-slice-required-topology' is not present" in text
    job["spec"]["template"]["metadata"]["annotations"] = {
        "kueue.x-k8s.io/podset-slice-required-topology": "cloud.example.com/rack",
        "kueue.x-k8s.io/podset-slice-size": "2",
        "kueue.x-k8s.io/podset-unconstrained-topology": "true",
    }
    assert (await validate(server, job))["allowed"] is True


async def test_an_elastic_job_gets_the_elastic_scheduling_gate(serve: Any) -> None:
    """Kueue's ``applyWorkloadSliceSchedulingGate``: its pods wait for a Workload slice to grant them."""
    server = await start(serve, MemoryView(local_queues={("default", "q"): "cq"}))
    job = plain_job(**{QUEUE: "q"})
    job["metadata"]["annotations"] = {"kueue.x-k8s.io/elastic-job": "true"}
    job["spec"]["template"]["spec"]["schedulingGates"] = [{"name": "example.com/mine"}]
    patched = await mutate(server, job)
    assert patched["spec"]["suspend"] is True
    assert patched["spec"]["template"]["spec"]["schedulingGates"] == [
        {"name": "example.com/mine"},
        {"name": "kueue.x-k8s.io/elastic-job"},
    ]
    assert await mutate(server, patched) == patched  # once
    plain = await mutate(server, plain_job(**{QUEUE: "q"}))
    assert "schedulingGates" not in plain["spec"]["template"]["spec"]
