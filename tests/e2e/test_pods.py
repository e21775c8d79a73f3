"""Plain Pods and pod groups through kadmit local (Kueue's ``pod`` framework).

The fixture is ``kadmit local`` in-process with ``integrations.frameworks`` including ``pod``:
the Pod webhooks gate queued Pods, the group reconciler makes one Workload per Pod or per
group, and the local cluster's binder leaves a gated Pod alone until kadmit ungates it.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kadmit.controller.jobs.pod_integration import workload_name_for_pod
from kadmit.kube import ApiError, Client
from kadmit.kube.resources import CLUSTER_QUEUES, JOBS, PODS, WORKLOADS
from tests.e2e.conftest import MANIFESTS, WebhookEnv, eventually, fast_config, webhook_env
from tests.e2e.helpers import apply_small_setup, condition_of, job
from tests.e2e.test_kadmit_local import kubectl, kubectl_json
from tests.kadmit_local import kadmit_local

Obj = dict[str, Any]
FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset", "pod")
GATE = "kueue.x-k8s.io/admission"


@pytest.fixture
async def kadmit_pods() -> AsyncIterator[WebhookEnv]:
    async for env in webhook_env(config=fast_config(frameworks=FRAMEWORKS)):
        yield env


def pod(
    name: str,
    *,
    queue: str = "small",
    cpu: str = "500m",
    runtime: str = "200ms",
    group: str | None = None,
    total: int | None = None,
    priority_class: str | None = None,
) -> Obj:
    labels = {"kueue.x-k8s.io/queue-name": queue}
    annotations = {"localcluster.kadmit.dev/runtime": runtime}
    if group is not None:
        labels["kueue.x-k8s.io/pod-group-name"] = group
        annotations["kueue.x-k8s.io/pod-group-total-count"] = str(total)
    if priority_class:
        labels["kueue.x-k8s.io/priority-class"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels, "annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}},
                }
            ],
        },
    }


def true(obj: Obj, kind: str) -> bool:
    found = condition_of(obj, kind)
    return found is not None and found["status"] == "True"


def gates(p: Obj) -> list[str]:
    return [g["name"] for g in p["spec"].get("schedulingGates") or []]


async def quota_released(kube: Client) -> None:
    async def released() -> bool:
        status = (await kube.get(CLUSTER_QUEUES, None, "small")).get("status") or {}
        flavors = {f["name"]: f for f in status.get("flavorsUsage") or []}
        used = {r["name"]: r["total"] for r in (flavors.get("cpu") or {}).get("resources") or []}
        return status.get("admittedWorkloads") == 0 and used.get("cpu") == "0"

    await eventually(released, what="the ClusterQueue's quota released")


async def test_a_queued_pod_is_gated_admitted_with_its_flavor_and_finishes(kadmit_pods: WebhookEnv) -> None:
    kube = kadmit_pods.kube
    await apply_small_setup(kube)
    created = await kube.create(PODS, pod("solo"))
    # the mutating webhook mpod.kb.io: Kueue's gate, managed label, finalizer and role hash
    assert gates(created) == [GATE]
    assert created["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert created["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    assert len(created["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"]) == 8
    name = workload_name_for_pod(created)
    assert name.startswith("pod-solo-")

    wl = await eventually(lambda: kube.get_or_none(WORKLOADS, "default", name), what="the Pod's Workload")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("main", 1)]
    refs = wl["metadata"]["ownerReferences"]
    assert [(r["kind"], r["name"], r.get("controller")) for r in refs] == [("Pod", "solo", True)]

    async def succeeded() -> Obj | None:
        current = await kube.get(PODS, "default", "solo")
        return current if current["status"].get("phase") == "Succeeded" else None

    done = await eventually(succeeded, what="the Pod run to completion")
    assert not done["spec"].get("schedulingGates")
    assert done["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}
    assert done["spec"]["nodeName"].startswith("cpu-")

    async def finished() -> Obj | None:
        current = await kube.get(WORKLOADS, "default", name)
        return current if true(current, "Finished") else None

    wl = await eventually(finished, what="the Workload Finished")
    assert condition_of(wl, "Finished")["reason"] == "Succeeded"  # type: ignore[index]

    async def let_go() -> bool:
        current = await kube.get(PODS, "default", "solo")
        return not current["metadata"].get("finalizers")

    await eventually(let_go, what="the Pod's finalizer removed once its Workload finished")
    await quota_released(kube)


async def test_a_pod_without_a_queue_is_left_alone(kadmit_pods: WebhookEnv) -> None:
    kube = kadmit_pods.kube
    await apply_small_setup(kube)
    plain = pod("plain")
    del plain["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    created = await kube.create(PODS, plain)
    assert not created["spec"].get("schedulingGates")
    assert "kueue.x-k8s.io/managed" not in created["metadata"]["labels"]
    assert not created["metadata"].get("finalizers")


async def test_bad_pod_group_metadata_is_refused_with_kueues_message(kadmit_pods: WebhookEnv) -> None:
    kube = kadmit_pods.kube
    await apply_small_setup(kube)
    missing = pod("half", group="g")
    del missing["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"]
    with pytest.raises(ApiError) as refused:
        await kube.create(PODS, missing)
    assert (
        "metadata.annotations[kueue.x-k8s.io/pod-group-total-count]: Required value: both the "
        "'kueue.x-k8s.io/pod-group-total-count' annotation and the 'kueue.x-k8s.io/pod-group-name' "
        "label should be set" in refused.value.message
    )
    with pytest.raises(ApiError) as zero:
        await kube.create(PODS, pod("zero", group="g", total=0))
    assert "group total count should be greater than zero" in zero.value.message


async def test_a_pod_group_arriving_over_seconds_is_admitted_only_when_complete(
    kadmit_pods: WebhookEnv,
) -> None:
    """Two roles (different requests): two pod sets, named by role hash, sorted; all or nothing."""
    kube = kadmit_pods.kube
    await apply_small_setup(kube)
    members = [
        pod("g-driver", group="train", total=3, cpu="500m"),
        pod("g-worker-0", group="train", total=3, cpu="1"),
        pod("g-worker-1", group="train", total=3, cpu="1"),
    ]
    for member in members[:2]:
        await kube.create(PODS, member)
        await asyncio.sleep(1.0)
    await asyncio.sleep(1.0)
    # Two of three, seconds later: no Workload, nothing ungated, nothing bound.
    assert await kube.get_or_none(WORKLOADS, "default", "train") is None
    for created in (await kube.list(PODS, "default", label_selector="kueue.x-k8s.io/pod-group-name=train"))[
        "items"
    ]:
        assert gates(created) == [GATE] and not created["spec"].get("nodeName")
    await kube.create(PODS, members[2])

    wl = await eventually(
        lambda: kube.get_or_none(WORKLOADS, "default", "train"), what="the group's Workload"
    )
    assert wl["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"] == "true"
    pods = (await kube.list(PODS, "default", label_selector="kueue.x-k8s.io/pod-group-name=train"))["items"]
    roles = {p["metadata"]["name"]: p["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"] for p in pods}
    assert roles["g-worker-0"] == roles["g-worker-1"] != roles["g-driver"]
    expected = sorted([(roles["g-driver"], 1), (roles["g-worker-0"], 2)])
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == expected
    assert sorted(r["name"] for r in wl["metadata"]["ownerReferences"]) == [
        "g-driver",
        "g-worker-0",
        "g-worker-1",
    ]

    async def all_succeeded() -> list[Obj] | None:
        found = (await kube.list(PODS, "default", label_selector="kueue.x-k8s.io/pod-group-name=train"))[
            "items"
        ]
        ok = len(found) == 3 and all(p["status"].get("phase") == "Succeeded" for p in found)
        return found if ok else None

    for done in await eventually(all_succeeded, what="the whole group run"):
        assert done["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"} and not gates(done)

    async def finished() -> Obj | None:
        current = await kube.get(WORKLOADS, "default", "train")
        return current if true(current, "Finished") else None

    wl = await eventually(finished, what="the group's Workload Finished")
    assert condition_of(wl, "Finished")["message"] == "Pods succeeded: 3/3."  # type: ignore[index]
    await quota_released(kube)


async def test_a_group_with_more_pods_than_it_counts_loses_the_last_ones(kadmit_pods: WebhookEnv) -> None:
    kube = kadmit_pods.kube
    await apply_small_setup(kube)
    for i in range(3):
        await kube.create(PODS, pod(f"extra-{i}", group="pair", total=2))

    wl = await eventually(lambda: kube.get_or_none(WORKLOADS, "default", "pair"), what="the group's Workload")
    assert [p["count"] for p in wl["spec"]["podSets"]] == [2]

    async def two_left() -> list[Obj] | None:
        found = (await kube.list(PODS, "default", label_selector="kueue.x-k8s.io/pod-group-name=pair"))[
            "items"
        ]
        return found if len(found) == 2 else None

    kept = await eventually(two_left, what="the excess Pod deleted")
    assert sorted(p["metadata"]["name"] for p in kept) == ["extra-0", "extra-1"]  # the newest went


async def test_a_preempted_plain_pod_is_deleted_and_its_workload_let_go(kadmit_pods: WebhookEnv) -> None:
    """Kueue stops a plain Pod by deleting it; nothing creates it again (a Deployment would)."""
    kube = kadmit_pods.kube
    await apply_small_setup(kube)
    created = await kube.create(PODS, pod("victim", cpu="3", runtime="30s", priority_class="low"))
    name = workload_name_for_pod(created)

    async def running() -> bool:
        return (await kube.get(PODS, "default", "victim"))["status"].get("phase") == "Running"

    await eventually(running, what="the low-priority Pod running")
    await kube.create(
        JOBS, job("high", cpu="1", parallelism=2, runtime="300ms", queue="small", priority_class="high")
    )

    async def gone() -> bool:
        return await kube.get_or_none(PODS, "default", "victim") is None

    await eventually(gone, what="the preempted Pod deleted, its finalizer removed")

    async def released() -> bool:
        return await kube.get_or_none(WORKLOADS, "default", name) is None

    await eventually(released, what="its Workload let go with it")

    async def high_done() -> bool:
        return true(await kube.get(JOBS, "default", "high"), "Complete")

    await eventually(high_done, what="the high-priority Job run in its place")


async def test_a_preempted_pod_group_is_stopped_replaced_and_readmitted(kadmit_pods: WebhookEnv) -> None:
    """Kueue stops a pod group by deleting its Pods; the replacements a user (or a controller)
    creates run under the same Workload, with the same pod sets, once it is admitted again."""
    kube = kadmit_pods.kube
    await apply_small_setup(kube)
    selector = "kueue.x-k8s.io/pod-group-name=low"
    for i in range(3):  # 3 of the queue's 4 cpu, running long enough to be preempted
        await kube.create(
            PODS, pod(f"low-{i}", group="low", total=3, cpu="1", runtime="30s", priority_class="low")
        )

    async def running() -> list[Obj] | None:
        found = (await kube.list(PODS, "default", label_selector=selector))["items"]
        return (
            found if len(found) == 3 and all(p["status"].get("phase") == "Running" for p in found) else None
        )

    await eventually(running, what="the low group running")
    wl = await kube.get(WORKLOADS, "default", "low")
    pod_sets = wl["spec"]["podSets"]
    await kube.create(
        JOBS, job("high", cpu="1", parallelism=2, runtime="1500ms", queue="small", priority_class="high")
    )

    async def preempted() -> Obj | None:
        current = await kube.get(WORKLOADS, "default", "low")
        return current if true(current, "Preempted") and not true(current, "QuotaReserved") else None

    victim = await eventually(preempted, what="the group's Workload preempted and its quota given back")
    assert condition_of(victim, "Evicted")["reason"] == "Preempted"  # type: ignore[index]

    async def stopped() -> list[Obj] | None:
        found = (await kube.list(PODS, "default", label_selector=selector))["items"]
        ok = len(found) == 3 and all(
            p["metadata"].get("deletionTimestamp") and p["status"].get("phase") == "Failed" for p in found
        )
        return found if ok else None

    for gone in await eventually(stopped, what="the group's Pods deleted, held Failed by the finalizer"):
        target = condition_of(gone, "TerminationTarget")
        assert target is not None and target["reason"] == "StoppedByKueue"

    async def waiting() -> Obj | None:
        current = await kube.get(WORKLOADS, "default", "low")
        return current if true(current, "WaitingForReplacementPods") else None

    wl = await eventually(waiting, what="WaitingForReplacementPods")
    assert condition_of(wl, "WaitingForReplacementPods")["reason"] == "Preempted"  # type: ignore[index]

    for i in range(3):  # the replacements, as a user or a controller creates them
        await kube.create(
            PODS, pod(f"low-again-{i}", group="low", total=3, cpu="1", runtime="300ms", priority_class="low")
        )

    async def high_done() -> bool:
        return true(await kube.get(JOBS, "default", "high"), "Complete")

    await eventually(high_done, what="the high-priority Job complete")

    async def replaced() -> list[Obj] | None:
        found = (await kube.list(PODS, "default", label_selector=selector))["items"]
        ok = sorted(p["metadata"]["name"] for p in found) == [
            "low-again-0",
            "low-again-1",
            "low-again-2",
        ] and all(p["status"].get("phase") == "Succeeded" for p in found)
        return found if ok else None

    for again in await eventually(replaced, within=30, what="the replacements run, the failed Pods let go"):
        assert again["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}

    async def finished() -> Obj | None:
        current = await kube.get(WORKLOADS, "default", "low")
        return current if true(current, "Finished") else None

    wl = await eventually(finished, what="the group's Workload Finished")
    assert wl["spec"]["podSets"] == pod_sets  # the same Workload, the same pod sets
    requeued = condition_of(wl, "Requeued")
    assert requeued is not None and requeued["status"] == "True"
    await quota_released(kube)


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_quickstart_pod_samples_with_kubectl_on_kadmit_local(tmp_path: Path) -> None:
    """The quickstart's Pod, Deployment, StatefulSet and LeaderWorkerSet sections: kadmit local
    says it manages them, and their samples run."""
    async with kadmit_local(tmp_path) as local:
        kubeconfig = local.kubeconfig
        manages = await local.next_line()
        assert manages.strip() == (
            "kadmit local: manages batch/v1 Job (batch/job), "
            "jobset.x-k8s.io/v1alpha2 JobSet (jobset.x-k8s.io/jobset), "
            "kubeflow.org/v1 PyTorchJob (kubeflow.org/pytorchjob), "
            "kubeflow.org/v1 TFJob (kubeflow.org/tfjob), "
            "kubeflow.org/v1 XGBoostJob (kubeflow.org/xgboostjob), "
            "kubeflow.org/v1 PaddleJob (kubeflow.org/paddlejob), "
            "kubeflow.org/v1 JAXJob (kubeflow.org/jaxjob), "
            "kubeflow.org/v2beta1 MPIJob (kubeflow.org/mpijob), "
            "trainer.kubeflow.org/v1alpha1 TrainJob (trainer.kubeflow.org/trainjob), "
            "ray.io/v1 RayJob (ray.io/rayjob), ray.io/v1 RayCluster (ray.io/raycluster), "
            "workload.codeflare.dev/v1beta2 AppWrapper (workload.codeflare.dev/appwrapper), "
            "v1 Pod and pod groups (pod), apps/v1 Deployment (deployment), "
            "apps/v1 StatefulSet (statefulset), "
            "leaderworkerset.x-k8s.io/v1 LeaderWorkerSet (leaderworkerset.x-k8s.io/leaderworkerset), "
            "serving.kserve.io/v1beta1 InferenceService (through deployment), "
            "tekton.dev/v1 PipelineRun (through pod)"
        )
        for sample in (
            "pod.yaml",
            "pod-group.yaml",
            "deployment.yaml",
            "statefulset.yaml",
            "leaderworkerset.yaml",
            "inferenceservice.yaml",
            "pipelinerun.yaml",
        ):
            await kubectl(kubeconfig, "create", "-f", str(MANIFESTS / "samples" / sample))
        gated = await kubectl_json(kubeconfig, "get", "pod", "sample-pod")
        assert gated["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"  # the default LocalQueue

        async def all_done() -> list[Obj] | None:
            pods = await kubectl_json(kubeconfig, "get", "pods")
            mine = [
                p
                for p in pods["items"]
                if p["metadata"]["name"] == "sample-pod" or p["metadata"]["name"].startswith("sample-group-")
            ]
            ok = len(mine) == 4 and all(p["status"].get("phase") == "Succeeded" for p in mine)
            return mine if ok else None

        pods = await eventually(all_done, within=40, what="the sample Pods run")
        for done in pods:
            assert done["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}, done["metadata"]["name"]
        workloads = await kubectl_json(kubeconfig, "get", "workloads")
        by_name = {w["metadata"]["name"]: w for w in workloads["items"]}
        group = by_name["sample-group"]
        assert sorted(p["count"] for p in group["spec"]["podSets"]) == [1, 2]
        [single] = [w for n, w in by_name.items() if n.startswith("pod-sample-pod-")]
        assert [p["name"] for p in single["spec"]["podSets"]] == ["main"]

        async def serving() -> Obj | None:
            pods = await kubectl_json(
                kubeconfig, "get", "pods", "-l", "app in (sample-deployment,sample-statefulset)"
            )
            ok = len(pods["items"]) == 5 and all(p["status"].get("phase") == "Running" for p in pods["items"])
            return pods if ok else None

        pods = await eventually(serving, within=40, what="the sample Deployment and StatefulSet serving")
        assert all(p["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"} for p in pods["items"])
        workloads = await kubectl_json(kubeconfig, "get", "workloads")
        [sts] = [
            w
            for w in workloads["items"]
            if w["metadata"]["name"].startswith("statefulset-sample-statefulset-")
        ]
        assert [(p["name"], p["count"]) for p in sts["spec"]["podSets"]] == [("main", 3)]

        async def groups() -> list[Obj] | None:
            pods = await kubectl_json(
                kubeconfig, "get", "pods", "-l", "leaderworkerset.sigs.k8s.io/name=sample-lws"
            )
            ok = len(pods["items"]) == 6 and all(p["status"].get("phase") == "Running" for p in pods["items"])
            if not ok:
                return None
            wls = (await kubectl_json(kubeconfig, "get", "workloads"))["items"]
            return [w for w in wls if w["metadata"]["name"].startswith("leaderworkerset-sample-lws-")]

        lws_workloads = await eventually(
            groups, within=40, what="the sample LeaderWorkerSet's two groups running"
        )
        assert (
            sorted([(p["name"], p["count"]) for p in w["spec"]["podSets"]] for w in lws_workloads)
            == [[("leader", 1), ("worker", 2)]] * 2
        )

        async def served_and_run() -> tuple[Obj, Obj] | None:
            isvc = await kubectl_json(kubeconfig, "get", "inferenceservice", "sample-isvc")
            run = await kubectl_json(kubeconfig, "get", "pipelinerun", "sample-pipelinerun")
            ready, done = condition_of(isvc, "Ready") or {}, condition_of(run, "Succeeded") or {}
            return (isvc, run) if ready.get("status") == done.get("status") == "True" else None

        await eventually(served_and_run, within=40, what="the InferenceService Ready, PipelineRun Succeeded")
        selector = "app=isvc.sample-isvc-predictor,kueue.x-k8s.io/queue-name=serving"
        pods = (await kubectl_json(kubeconfig, "get", "pods", "-l", selector))["items"]
        assert len(pods) == 2
        selector = "tekton.dev/pipelineRun=sample-pipelinerun"
        tasks = (await kubectl_json(kubeconfig, "get", "pods", "-l", selector))["items"]
        assert sorted(p["metadata"]["name"] for p in tasks) == [
            "sample-pipelinerun-build-pod",
            "sample-pipelinerun-test-pod",
        ]
        assert all(p["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"} for p in pods + tasks)


async def test_a_pod_asking_for_an_uncovered_resource_waits_with_a_clear_reason(
    kadmit_pods: WebhookEnv,
) -> None:
    """What KServe's predictors meet on a ClusterQueue without ``ephemeral-storage``: Kueue's reason."""
    kube = kadmit_pods.kube
    await apply_small_setup(kube)
    asking = pod("scratch")
    asking["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "1Gi"
    created = await kube.create(PODS, asking)
    name = workload_name_for_pod(created)

    async def pending() -> Obj | None:
        wl = await kube.get_or_none(WORKLOADS, "default", name)
        found = condition_of(wl, "QuotaReserved") if wl is not None else None
        return found if found is not None and found["status"] == "False" and found.get("message") else None

    reason = await eventually(pending, what="the Pod's Workload pending, with why")
    assert reason["reason"] == "NoMatchingFlavor"
    assert "resource ephemeral-storage unavailable in ClusterQueue" in reason["message"], reason
    assert gates(await kube.get(PODS, "default", "scratch")) == [GATE]  # never ungated, never bound
