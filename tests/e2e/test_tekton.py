"""Tekton PipelineRuns through kadmit local, as Kueue's "Run A Tekton Pipeline" runs them: the
queue-name label on the PipelineRun reaches every task Pod, and the ``pod`` integration admits
each task Pod (a Workload per Pod) as the pipeline reaches it. The local cluster serves Tekton's
CRDs and runs a simulated PipelineRun controller.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kadmit.controller.apply import Applier
from kadmit.kube import Resource
from kadmit.kube.resources import JOBS, PODS, WORKLOADS
from tests.e2e.conftest import WebhookEnv, eventually, fast_config, webhook_env
from tests.e2e.helpers import apply_small_setup, condition_of, job, workload_event

Obj = dict[str, Any]
PIPELINE_RUNS = Resource("tekton.dev", "v1", "pipelineruns", "PipelineRun")
SAMPLE = Path(__file__).resolve().parents[2] / "manifests" / "samples" / "pipelinerun.yaml"
GATE = "kueue.x-k8s.io/admission"
FLAVOR = {"kadmit.dev/pool": "cpu"}
RUNTIME = "localcluster.kadmit.dev/runtime"


@pytest.fixture
async def kadmit_tekton() -> AsyncIterator[WebhookEnv]:
    async for env in webhook_env(config=fast_config(frameworks=("batch/job", "pod"))):
        yield env


def sample(
    queue: str = "small", runtime: str = "1s", *, priority: str | None = None
) -> tuple[list[Obj], Obj]:
    """The sample's Task and Pipeline, and its PipelineRun on ``queue``."""
    docs = [d for d in yaml.safe_load_all(SAMPLE.read_text()) if d]
    run = next(d for d in docs if d["kind"] == "PipelineRun")
    run["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = queue
    if priority:
        run["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = priority
    run["metadata"]["annotations"][RUNTIME] = runtime
    return [d for d in docs if d["kind"] != "PipelineRun"], run


def succeeded(run: Obj | None) -> Obj | None:
    return condition_of(run, "Succeeded") if run is not None else None


def gates(pod: Obj) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


async def task_pods(env: WebhookEnv, run: str) -> dict[str, Obj]:
    pods = (await env.kube.list(PODS, "default", label_selector=f"tekton.dev/pipelineRun={run}"))["items"]
    return {p["metadata"]["name"]: p for p in pods}


async def workload_of_pod(env: WebhookEnv, pod: Obj) -> Obj | None:
    for wl in (await env.kube.list(WORKLOADS, "default"))["items"]:
        if any(r.get("uid") == pod["metadata"]["uid"] for r in wl["metadata"].get("ownerReferences") or []):
            return wl  # type: ignore[no-any-return]
    return None


async def cluster_state(env: WebhookEnv) -> str:
    """What a timed-out wait saw: each Workload's conditions, each Pod's phase and gates, each Job."""
    lines = []
    for wl in (await env.kube.list(WORKLOADS, "default"))["items"]:
        found = wl.get("status", {}).get("conditions") or []
        conds = [(c["type"], c["status"], c.get("reason")) for c in found]
        lines.append(f"workload {wl['metadata']['name']}: {conds}")
    for pod in (await env.kube.list(PODS, "default"))["items"]:
        lines.append(f"pod {pod['metadata']['name']}: {(pod.get('status') or {}).get('phase')} {gates(pod)}")
    for each in (await env.kube.list(JOBS, "default"))["items"]:
        suspended = each["spec"].get("suspend")
        lines.append(f"job {each['metadata']['name']}: suspend={suspended} {each.get('status')}")
    return "\n".join(lines)


def true(obj: Obj | None, kind: str) -> bool:
    found = condition_of(obj, kind) if obj is not None else None
    return found is not None and found["status"] == "True"


async def test_a_pipeline_runs_task_by_task_each_pod_admitted_in_order(kadmit_tekton: WebhookEnv) -> None:
    kube = kadmit_tekton.kube
    await apply_small_setup(kube)
    definitions, run = sample()
    await Applier(kube).apply_all(definitions)
    await kube.create(PIPELINE_RUNS, run)

    async def build_only() -> dict[str, Obj] | None:
        pods = await task_pods(kadmit_tekton, "sample-pipelinerun")
        return pods if list(pods) == ["sample-pipelinerun-build-pod"] else None

    pods = await eventually(build_only, what="the first task's Pod, alone")
    build = pods["sample-pipelinerun-build-pod"]
    assert build["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "small"
    assert build["metadata"]["labels"]["tekton.dev/pipelineTask"] == "build"

    async def admitted(name: str) -> tuple[Obj, Obj] | None:
        pod = (await task_pods(kadmit_tekton, "sample-pipelinerun")).get(name)
        wl = await workload_of_pod(kadmit_tekton, pod) if pod is not None else None
        if pod is None or wl is None or not true(wl, "Admitted") or gates(pod):
            return None
        return pod, wl

    build, build_wl = await eventually(
        lambda: admitted("sample-pipelinerun-build-pod"), what="build admitted"
    )
    assert [(p["name"], p["count"]) for p in build_wl["spec"]["podSets"]] == [("main", 1)]
    assert build["spec"]["nodeSelector"] == FLAVOR
    assert "sample-pipelinerun-test-pod" not in await task_pods(kadmit_tekton, "sample-pipelinerun")

    test, test_wl = await eventually(
        lambda: admitted("sample-pipelinerun-test-pod"),
        within=20,
        what="test created and admitted after build",
    )
    build_done = await kube.get(WORKLOADS, "default", build_wl["metadata"]["name"])
    assert true(build_done, "Finished")  # build's Workload finished before test's was admitted
    finished_at = condition_of(build_done, "Finished")["lastTransitionTime"]  # type: ignore[index]
    assert finished_at <= condition_of(test_wl, "Admitted")["lastTransitionTime"]  # type: ignore[index]
    assert test["spec"]["nodeSelector"] == FLAVOR
    assert test["metadata"]["labels"]["tekton.dev/task"] == "sample-hello"

    async def done() -> Obj | None:
        found = await kube.get(PIPELINE_RUNS, "default", "sample-pipelinerun")
        cond = succeeded(found)
        return found if cond is not None and cond["status"] == "True" else None

    finished = await eventually(done, within=20, what="the PipelineRun Succeeded")
    assert succeeded(finished)["message"] == "Tasks Completed: 2 (Failed: 0, Cancelled 0), Skipped: 0"  # type: ignore[index]


    async def all_finished() -> list[Obj] | None:
        # kadmit finishes a Pod's Workload once it sees the Pod succeed: a moment after Tekton may
        # have seen it and declared the run done
        workloads: list[Obj] = (await kube.list(WORKLOADS, "default"))["items"]
        return workloads if len(workloads) == 2 and all(true(wl, "Finished") for wl in workloads) else None

    await eventually(all_finished, what="both task Pods' Workloads Finished")


async def test_a_pending_pipeline_run_creates_nothing_until_started(kadmit_tekton: WebhookEnv) -> None:
    kube = kadmit_tekton.kube
    await apply_small_setup(kube)
    definitions, run = sample(runtime="200ms")
    run["spec"]["status"] = "PipelineRunPending"
    await Applier(kube).apply_all(definitions)
    await kube.create(PIPELINE_RUNS, run)

    async def pending() -> Obj | None:
        cond = succeeded(await kube.get(PIPELINE_RUNS, "default", "sample-pipelinerun"))
        return cond if cond is not None and cond["reason"] == "PipelineRunPending" else None

    cond = await eventually(pending, what="the PipelineRun pending")
    assert (cond["status"], cond["message"]) == ("Unknown", 'PipelineRun "sample-pipelinerun" is pending')
    assert await task_pods(kadmit_tekton, "sample-pipelinerun") == {}
    assert (await kube.list(WORKLOADS, "default"))["items"] == []

    await kube.patch(PIPELINE_RUNS, "default", "sample-pipelinerun", {"spec": {"status": None}})

    async def done() -> bool:
        found = succeeded(await kube.get(PIPELINE_RUNS, "default", "sample-pipelinerun"))
        return found is not None and found["status"] == "True"

    await eventually(done, within=20, what="the PipelineRun run once no longer pending")


async def test_a_preempted_task_pod_is_retried_and_readmitted(kadmit_tekton: WebhookEnv) -> None:
    """A preempted task Pod is deleted as Kueue stops a plain Pod; Tekton retries the task (its
    ``retries``) with a new Pod, gated again, admitted once the quota is free."""
    kube = kadmit_tekton.kube
    await apply_small_setup(kube)
    # The first Pod must outlive its preemption on a loaded machine; its retry is made short below.
    _, run = sample(runtime="60s", priority="low")
    run["spec"] = {
        "pipelineSpec": {
            "tasks": [
                {
                    "name": "train",
                    "retries": 1,
                    "taskSpec": {
                        "steps": [
                            {
                                "name": "fit",
                                "image": "python:3.12",
                                "script": "python fit.py",
                                "computeResources": {"requests": {"cpu": "3", "memory": "1Gi"}},
                            }
                        ]
                    },
                }
            ]
        }
    }
    created = await kube.create(PIPELINE_RUNS, run)

    async def running() -> Obj | None:
        pod = (await task_pods(kadmit_tekton, "sample-pipelinerun")).get("sample-pipelinerun-train-pod")
        return pod if pod is not None and (pod.get("status") or {}).get("phase") == "Running" else None

    first = await eventually(running, what="the train task's Pod running")
    first_wl = await workload_of_pod(kadmit_tekton, first)
    assert first_wl is not None
    # Tekton builds the retry Pod from the PipelineRun as it is then: the retry will run for 1s
    await kube.patch(
        PIPELINE_RUNS, "default", "sample-pipelinerun",
        {"metadata": {"annotations": {RUNTIME: "1s"}}},
    )
    await kube.create(
        JOBS, job("high", cpu="3", parallelism=1, runtime="1s", queue="small", priority_class="high")
    )

    async def preempted() -> Obj | None:
        # The Workload's Preempted Event: its Evicted condition lasts only until the Pod and then
        # the Workload are gone, which a busy machine's polls miss (CI did, twice).
        return await workload_event(kube, "Preempted", lambda o: o["uid"] == first_wl["metadata"]["uid"])

    try:
        await eventually(preempted, what="the task Pod's Workload preempted")
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}\n{await cluster_state(kadmit_tekton)}") from None

    async def retry_gated() -> Obj | None:
        pod = (await task_pods(kadmit_tekton, "sample-pipelinerun")).get(
            "sample-pipelinerun-train-pod-retry1"
        )
        return pod if pod is not None and GATE in gates(pod) else None

    retry = await eventually(retry_gated, within=20, what="Tekton's retry Pod, gated")
    assert retry["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "small"

    async def done() -> Obj | None:
        found = await kube.get(PIPELINE_RUNS, "default", "sample-pipelinerun")
        cond = succeeded(found)
        return found if cond is not None and cond["status"] == "True" else None

    await eventually(done, within=30, what="the PipelineRun Succeeded on its retry")
    assert true(await kube.get(JOBS, "default", "high"), "Complete")
    assert (await kube.get(PIPELINE_RUNS, "default", "sample-pipelinerun"))["spec"] == created["spec"]
    retried = (await task_pods(kadmit_tekton, "sample-pipelinerun"))["sample-pipelinerun-train-pod-retry1"]
    assert retried["status"]["phase"] == "Succeeded" and retried["spec"]["nodeSelector"] == FLAVOR
    retry_wl = await workload_of_pod(kadmit_tekton, retried)
    assert true(retry_wl, "Finished") and retry_wl["metadata"]["name"] != first_wl["metadata"]["name"]  # type: ignore[index]
