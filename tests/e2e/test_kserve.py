"""KServe InferenceServices through kadmit local, as Kueue-based platforms run them: KServe runs
the predictor as a Deployment carrying the InferenceService's labels (the queue name included),
and Kueue's ``deployment`` integration admits each predictor Pod (a Workload per Pod, serving).
The local cluster serves the InferenceService CRD and runs a simulated KServe controller.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kadmit.controller.apply import Applier
from kadmit.kube import Resource
from kadmit.kube.resources import DEPLOYMENTS, JOBS, PODS, WORKLOADS
from tests.e2e.conftest import WebhookEnv, eventually, fast_config, webhook_env
from tests.e2e.helpers import apply_small_setup, condition_of, job, workload_event

Obj = dict[str, Any]
INFERENCE_SERVICES = Resource("serving.kserve.io", "v1beta1", "inferenceservices", "InferenceService")
SAMPLE = Path(__file__).resolve().parents[2] / "manifests" / "samples" / "inferenceservice.yaml"
GATE = "kueue.x-k8s.io/admission"
FLAVOR = {"kadmit.dev/pool": "cpu"}


@pytest.fixture
async def kadmit_serving() -> AsyncIterator[WebhookEnv]:
    async for env in webhook_env(config=fast_config(frameworks=("batch/job", "deployment"))):
        yield env


def sample() -> tuple[list[Obj], Obj]:
    """The sample's queues, and its InferenceService."""
    docs = [d for d in yaml.safe_load_all(SAMPLE.read_text()) if d]
    return [d for d in docs if d["kind"] != "InferenceService"], next(
        d for d in docs if d["kind"] == "InferenceService"
    )


def isvc(name: str, queue: str, *, cpu: str = "500m", replicas: int = 2, priority: str | None = None) -> Obj:
    _, body = sample()
    body["metadata"]["name"] = name
    body["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": queue}
    if priority:
        body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = priority
    body["spec"]["predictor"]["minReplicas"] = replicas
    body["spec"]["predictor"]["model"]["resources"]["requests"]["cpu"] = cpu
    return body


def true(obj: Obj | None, kind: str) -> bool:
    found = condition_of(obj, kind) if obj is not None else None
    return found is not None and found["status"] == "True"


def gates(pod: Obj) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates") or []]


async def predictor_pods(env: WebhookEnv, name: str) -> list[Obj]:
    selector = f"app=isvc.{name}-predictor"
    pods = (await env.kube.list(PODS, "default", label_selector=selector))["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


async def setup(env: WebhookEnv) -> None:
    await apply_small_setup(env.kube)
    queues, _ = sample()
    await Applier(env.kube).apply_all(queues)


async def test_an_inference_service_is_queued_admitted_with_its_flavor_and_serves(
    kadmit_serving: WebhookEnv,
) -> None:
    kube = kadmit_serving.kube
    await setup(kadmit_serving)
    await kube.create(INFERENCE_SERVICES, isvc("iris", "serving"))

    deployment = await eventually(
        lambda: kube.get_or_none(DEPLOYMENTS, "default", "iris-predictor"), what="the predictor Deployment"
    )
    assert deployment["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "serving"
    template = deployment["spec"]["template"]["metadata"]
    assert template["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] == "deployment"
    assert template["labels"]["kueue.x-k8s.io/queue-name"] == "serving"

    async def serving() -> Obj | None:
        found = await kube.get(INFERENCE_SERVICES, "default", "iris")
        return found if true(found, "Ready") else None

    served = await eventually(serving, within=30, what="the InferenceService Ready")
    assert served["status"]["url"] == "http://iris-default.example.com"
    pods = await predictor_pods(kadmit_serving, "iris")
    assert len(pods) == 2
    for pod in pods:
        assert pod["status"]["phase"] == "Running"
        assert pod["spec"]["nodeSelector"] == FLAVOR  # the flavor's nodeLabels, injected on admission
        assert GATE not in gates(pod)
        assert pod["metadata"]["labels"]["serving.kserve.io/inferenceservice"] == "iris"
    workloads = [
        w
        for w in (await kube.list(WORKLOADS, "default"))["items"]
        if w["metadata"]["name"].startswith("pod-iris-")
    ]
    assert len(workloads) == 2
    for wl in workloads:
        [pod_set] = wl["spec"]["podSets"]
        assert (pod_set["name"], pod_set["count"]) == ("main", 1)
        requests = pod_set["template"]["spec"]["containers"][0]["resources"]["requests"]
        assert requests["ephemeral-storage"] == "2Gi"
        assert true(wl, "Admitted") and not true(wl, "Finished")  # serving: never finished
        assert wl["status"]["admission"]["clusterQueue"] == "serving"
        assigned = wl["status"]["admission"]["podSetAssignments"][0]
        assert assigned["flavors"] == {"cpu": "cpu", "memory": "cpu", "ephemeral-storage": "cpu"}


async def test_an_inference_service_without_ephemeral_storage_quota_waits_with_a_clear_reason(
    kadmit_serving: WebhookEnv,
) -> None:
    """The ClusterQueue ``small`` covers cpu and memory only: the predictor's Pods stay gated."""
    kube = kadmit_serving.kube
    await setup(kadmit_serving)
    await kube.create(INFERENCE_SERVICES, isvc("uncovered", "small", replicas=1))

    async def pending() -> Obj | None:
        for wl in (await kube.list(WORKLOADS, "default"))["items"]:
            found = condition_of(wl, "QuotaReserved")
            if found is not None and found["status"] == "False" and found.get("message"):
                return found
        return None

    reason = await eventually(pending, within=20, what="the predictor Pod's Workload pending, with why")
    assert reason["reason"] == "NoMatchingFlavor"
    assert "resource ephemeral-storage unavailable in ClusterQueue" in reason["message"], reason
    [pod] = await predictor_pods(kadmit_serving, "uncovered")
    assert gates(pod) == [GATE] and not pod["spec"].get("nodeName")  # never ungated, never bound
    found = await kube.get(INFERENCE_SERVICES, "default", "uncovered")
    assert condition_of(found, "Ready")["status"] == "False"  # type: ignore[index]


async def test_a_preempted_inference_service_comes_back_as_it_was_and_is_readmitted(
    kadmit_serving: WebhookEnv,
) -> None:
    kube = kadmit_serving.kube
    await setup(kadmit_serving)
    created = await kube.create(INFERENCE_SERVICES, isvc("low", "serving", cpu="3", priority="low"))

    async def ready() -> Obj | None:
        found = await kube.get(INFERENCE_SERVICES, "default", "low")
        return found if true(found, "Ready") else None

    await eventually(ready, within=30, what="the InferenceService Ready")
    first = {p["metadata"]["name"] for p in await predictor_pods(kadmit_serving, "low")}
    await kube.create(
        JOBS, job("high", cpu="3", parallelism=2, runtime="1500ms", queue="serving", priority_class="high")
    )

    async def preempted() -> Obj | None:
        # The Workload's Preempted event: its Evicted condition lasts only until the Pod is gone,
        # which a busy machine's polls may miss.
        return await workload_event(kube, "Preempted", lambda o: str(o["name"]).startswith("pod-low-"))

    await eventually(preempted, within=20, what="a predictor Pod's Workload preempted")

    async def degraded() -> Obj | None:
        found = await kube.get(INFERENCE_SERVICES, "default", "low")
        pods = await predictor_pods(kadmit_serving, "low")
        waiting = [p for p in pods if p["metadata"]["name"] not in first and GATE in gates(p)]
        return found if waiting and not true(found, "Ready") else None

    await eventually(degraded, within=20, what="a replacement predictor Pod gated, the service not Ready")

    async def high_done() -> bool:
        return true(await kube.get(JOBS, "default", "high"), "Complete")

    await eventually(high_done, within=30, what="the high-priority Job complete")
    await eventually(ready, within=30, what="the InferenceService Ready again, its Pods re-admitted")
    pods = await predictor_pods(kadmit_serving, "low")
    assert len(pods) == 2 and first - {p["metadata"]["name"] for p in pods}
    assert all(p["spec"]["nodeSelector"] == FLAVOR and GATE not in gates(p) for p in pods)
    after = await kube.get(INFERENCE_SERVICES, "default", "low")
    assert after["spec"] == created["spec"]  # the InferenceService as the user wrote it
