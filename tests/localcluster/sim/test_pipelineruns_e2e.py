"""Tekton PipelineRuns on the simulated cluster: served with the upstream CRDs (their schemas,
descriptions trimmed), each pipeline task run as a Pod once the tasks it runs after succeeded."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes_asyncio import client as k8s

from kadmit.localcluster.sim.pipelineruns import attempt_of, containers

from .conftest import Obj, established, has_true, wait_for

THIRD_PARTY = Path(__file__).resolve().parents[3] / "manifests" / "third-party"


async def install(api_client: k8s.ApiClient) -> None:
    ext = k8s.ApiextensionsV1Api(api_client)
    for plural in ("pipelineruns", "pipelines", "tasks"):
        path = THIRD_PARTY / f"tekton.dev_{plural}.yaml"
        await ext.create_custom_resource_definition(
            next(d for d in yaml.safe_load_all(path.read_text()) if d)
        )
        await wait_for(
            ext.list_custom_resource_definition,
            established,
            field_selector=f"metadata.name={plural}.tekton.dev",
        )


def step(name: str) -> Obj:
    return {
        "name": name,
        "image": "alpine",
        "script": "echo hi",
        "computeResources": {"requests": {"cpu": "100m"}},
    }


def test_steps_are_containers_named_as_tekton_names_them() -> None:
    made = containers(
        {"stepTemplate": {"env": [{"name": "A", "value": "1"}]}, "steps": [step("build"), {"image": "x"}]}
    )
    assert [c["name"] for c in made] == ["step-build", "step-unnamed-1"]
    assert made[0]["args"] == ["echo hi"] and made[0]["env"] == [{"name": "A", "value": "1"}]
    assert made[0]["resources"] == {"requests": {"cpu": "100m"}}
    assert attempt_of("run", "build", "run-build-pod") == 0
    assert attempt_of("run", "build", "run-build-pod-retry2") == 2
    assert attempt_of("run", "build", "run-test-pod") is None


async def test_a_pipeline_run_runs_its_tasks_in_order(api_client: k8s.ApiClient) -> None:
    await install(api_client)
    custom, core = k8s.CustomObjectsApi(api_client), k8s.CoreV1Api(api_client)
    task = {
        "apiVersion": "tekton.dev/v1",
        "kind": "Task",
        "metadata": {"name": "hello"},
        "spec": {"steps": [step("say")]},
    }
    await custom.create_namespaced_custom_object("tekton.dev", "v1", "default", "tasks", task)
    run = {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {
            "name": "ci",
            "labels": {"team": "a"},
            "annotations": {"localcluster.kadmit.dev/runtime": "100ms"},
        },
        "spec": {
            "status": "PipelineRunPending",
            "pipelineSpec": {
                "tasks": [
                    {"name": "build", "taskSpec": {"steps": [step("compile")]}},
                    {"name": "test", "runAfter": ["build"], "taskRef": {"name": "hello"}},
                ]
            },
        },
    }
    await custom.create_namespaced_custom_object("tekton.dev", "v1", "default", "pipelineruns", run)

    def pending(obj: Obj) -> bool:
        found = next(
            (c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Succeeded"), None
        )
        return found is not None and found["reason"] == "PipelineRunPending"

    kwargs = {"group": "tekton.dev", "version": "v1", "namespace": "default", "plural": "pipelineruns"}
    waiting = await wait_for(custom.list_namespaced_custom_object, pending, **kwargs)
    assert waiting["status"]["conditions"][0]["message"] == 'PipelineRun "ci" is pending'
    assert (await core.list_namespaced_pod("default", label_selector="tekton.dev/pipelineRun=ci")).items == []

    await custom.patch_namespaced_custom_object(
        "tekton.dev", "v1", "default", "pipelineruns", "ci", [{"op": "remove", "path": "/spec/status"}]
    )
    done = await wait_for(custom.list_namespaced_custom_object, has_true("Succeeded"), within=20, **kwargs)
    assert (
        done["status"]["conditions"][0]["message"]
        == "Tasks Completed: 2 (Failed: 0, Cancelled 0), Skipped: 0"
    )
    assert [c["pipelineTaskName"] for c in done["status"]["childReferences"]] == ["build", "test"]
    pods = {
        p.metadata.name: p
        for p in (await core.list_namespaced_pod("default", label_selector="tekton.dev/pipelineRun=ci")).items
    }
    assert sorted(pods) == ["ci-build-pod", "ci-test-pod"]
    build, test = pods["ci-build-pod"], pods["ci-test-pod"]
    assert build.metadata.labels["team"] == "a"
    assert build.metadata.labels["tekton.dev/pipelineTask"] == "build"
    assert test.metadata.labels["tekton.dev/task"] == "hello"
    assert test.metadata.labels["tekton.dev/taskRun"] == "ci-test"
    assert build.status.phase == test.status.phase == "Succeeded"
    assert build.status.container_statuses[0].state.terminated.finished_at <= test.status.start_time


async def test_a_failed_task_is_retried_then_fails_the_run_and_skips_the_rest(
    api_client: k8s.ApiClient,
) -> None:
    await install(api_client)
    custom, core = k8s.CustomObjectsApi(api_client), k8s.CoreV1Api(api_client)
    run = {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {
            "name": "broken",
            "annotations": {
                "localcluster.kadmit.dev/runtime": "50ms",
                "localcluster.kadmit.dev/exit-code": "1",
            },
        },
        "spec": {
            "pipelineSpec": {
                "tasks": [
                    {"name": "build", "retries": 1, "taskSpec": {"steps": [step("compile")]}},
                    {"name": "test", "runAfter": ["build"], "taskSpec": {"steps": [step("check")]}},
                ]
            },
        },
    }
    await custom.create_namespaced_custom_object("tekton.dev", "v1", "default", "pipelineruns", run)

    def failed(obj: Obj) -> bool:
        found = next(
            (c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == "Succeeded"), None
        )
        return found is not None and found["status"] == "False"

    kwargs = {"group": "tekton.dev", "version": "v1", "namespace": "default", "plural": "pipelineruns"}
    done = await wait_for(custom.list_namespaced_custom_object, failed, within=20, **kwargs)
    [condition] = done["status"]["conditions"]
    assert condition["reason"] == "Failed"
    assert condition["message"] == "Tasks Completed: 1 (Failed: 1, Cancelled 0), Skipped: 1"
    pods = (await core.list_namespaced_pod("default", label_selector="tekton.dev/pipelineRun=broken")).items
    assert sorted(p.metadata.name for p in pods) == ["broken-build-pod", "broken-build-pod-retry1"]
    assert all(p.status.phase == "Failed" for p in pods)
