"""Jobs on the local API server run to completion on the simulated nodes, as on a real cluster."""

from __future__ import annotations

import asyncio
import time

from kubernetes_asyncio import client as k8s

from kadmit.localcluster.cluster import LocalCluster

from .conftest import Obj, condition, has_true, job_manifest, wait_for, wait_for_count


async def pods_of(core: k8s.CoreV1Api, job: str) -> list[Obj]:
    listed = await core.list_namespaced_pod("default", label_selector=f"batch.kubernetes.io/job-name={job}")
    return [core.api_client.sanitize_for_serialization(p) for p in listed.items]


def required_affinity(*expressions: Obj) -> Obj:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(expressions)}]}}}


async def test_job_completes_with_pods_placed_by_selector_affinity_and_tolerations(
    batch: k8s.BatchV1Api, core: k8s.CoreV1Api
) -> None:
    gpu_spec = {
        "nodeSelector": {"localcluster.kadmit.dev/pool": "gpu"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": required_affinity({"key": "gpus", "operator": "Gt", "values": ["2"]},
                                      {"key": "zone", "operator": "In", "values": ["b"]}),
        "containers": [{"name": "main", "image": "cuda",
                        "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}}}],
    }
    await batch.create_namespaced_job("default", job_manifest("train", parallelism=2, completions=4,
                                                               pod_spec=gpu_spec))
    cpu_spec = {"affinity": required_affinity({"key": "zone", "operator": "NotIn", "values": ["b"]})}
    await batch.create_namespaced_job("default", job_manifest("prep", parallelism=3, completions=3,
                                                               pod_spec=cpu_spec))
    train = await wait_for(batch.list_namespaced_job, has_true("Complete"), namespace="default",
                           field_selector="metadata.name=train")
    prep = await wait_for(batch.list_namespaced_job, has_true("Complete"), namespace="default",
                          field_selector="metadata.name=prep")
    assert train["status"]["succeeded"] == 4 and "failed" not in train["status"]
    assert prep["status"]["succeeded"] == 3
    assert condition(train, "SuccessCriteriaMet") is not None
    assert train["status"]["startTime"] <= train["status"]["completionTime"]
    train_pods = await pods_of(core, "train")
    assert len(train_pods) == 4 and {p["spec"]["nodeName"] for p in train_pods} == {"gpu-0"}
    assert {p["status"]["phase"] for p in train_pods} == {"Succeeded"}
    prep_pods = await pods_of(core, "prep")
    assert {p["spec"]["nodeName"] for p in prep_pods} <= {"cpu-0", "cpu-1"}
    pod = train_pods[0]
    owner = pod["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Job", "train", True)
    labels = pod["metadata"]["labels"]
    assert labels["job-name"] == "train" and labels["controller-uid"] == train["metadata"]["uid"]
    assert labels["batch.kubernetes.io/controller-uid"] == train["metadata"]["uid"]
    scheduled = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert scheduled["status"] == "True"
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"


async def test_indexed_job_numbers_its_pods(batch: k8s.BatchV1Api, core: k8s.CoreV1Api) -> None:
    await batch.create_namespaced_job(
        "default", job_manifest("indexed", parallelism=2, completions=3, completionMode="Indexed"))
    job = await wait_for(batch.list_namespaced_job, has_true("Complete"), namespace="default",
                         field_selector="metadata.name=indexed")
    assert job["status"]["completedIndexes"] == "0-2"
    pods = await pods_of(core, "indexed")
    indexes = sorted(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in pods)
    assert indexes == ["0", "1", "2"]
    assert sorted(p["spec"]["hostname"] for p in pods) == ["indexed-0", "indexed-1", "indexed-2"]


async def test_unschedulable_pods_stay_pending_with_the_scheduler_reason(
    batch: k8s.BatchV1Api, core: k8s.CoreV1Api
) -> None:
    await batch.create_namespaced_job("default", job_manifest(
        "nowhere", pod_spec={"nodeSelector": {"zone": "mars"}}))
    gpu_without_toleration = {"containers": [{"name": "main", "image": "cuda",
                                              "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    await batch.create_namespaced_job("default", job_manifest("untolerated", pod_spec=gpu_without_toleration))

    def unschedulable(pod: Obj) -> bool:
        scheduled = condition(pod, "PodScheduled")
        return scheduled is not None and scheduled["reason"] == "Unschedulable"

    nowhere = await wait_for(core.list_namespaced_pod, unschedulable, namespace="default",
                             label_selector="job-name=nowhere")
    scheduled = condition(nowhere, "PodScheduled")
    assert scheduled is not None and scheduled["status"] == "False"
    assert scheduled["message"] == (
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.")
    assert nowhere["status"]["phase"] == "Pending" and not nowhere["spec"].get("nodeName")
    untolerated = await wait_for(core.list_namespaced_pod, unschedulable, namespace="default",
                                 label_selector="job-name=untolerated")
    assert condition(untolerated, "PodScheduled")["message"] == (  # type: ignore[index]
        "0/3 nodes are available: 2 Insufficient nvidia.com/gpu, "
        "1 node(s) had untolerated taint {nvidia.com/gpu: present}.")
    job = await batch.read_namespaced_job_status("nowhere", "default")
    assert job.status.active == 1 and job.status.ready == 0


async def test_suspend_deletes_pods_and_resume_starts_them_again(
    batch: k8s.BatchV1Api, core: k8s.CoreV1Api
) -> None:
    await batch.create_namespaced_job("default", job_manifest("long", parallelism=2, completions=2,
                                                               runtime="60s"))
    await wait_for(batch.list_namespaced_job, lambda j: (j.get("status") or {}).get("ready") == 2,
                   namespace="default", field_selector="metadata.name=long")
    await batch.patch_namespaced_job("long", "default", {"spec": {"suspend": True}})
    suspended = await wait_for(batch.list_namespaced_job, has_true("Suspended"), namespace="default",
                               field_selector="metadata.name=long")
    assert "startTime" not in suspended["status"] and "active" not in suspended["status"]
    assert condition(suspended, "Suspended")["reason"] == "JobSuspended"  # type: ignore[index]
    await wait_for_count(core.list_namespaced_pod, 0, namespace="default", label_selector="job-name=long")
    await batch.patch_namespaced_job("long", "default", {"spec": {"suspend": False}})
    resumed = await wait_for(
        batch.list_namespaced_job,
        lambda j: (j.get("status") or {}).get("active") == 2 and "startTime" in j["status"],
        namespace="default", field_selector="metadata.name=long")
    assert condition(resumed, "Suspended")["status"] == "False"  # type: ignore[index]
    assert condition(resumed, "Suspended")["reason"] == "JobResumed"  # type: ignore[index]


async def test_backoff_limit_fails_the_job(batch: k8s.BatchV1Api, core: k8s.CoreV1Api) -> None:
    await batch.create_namespaced_job("default", job_manifest(
        "crash", backoffLimit=1, annotations={"localcluster.kadmit.dev/exit-code": "3"}))
    failed = await wait_for(batch.list_namespaced_job, has_true("Failed"), namespace="default",
                            field_selector="metadata.name=crash")
    assert failed["status"]["failed"] == 2
    assert condition(failed, "Failed")["reason"] == "BackoffLimitExceeded"  # type: ignore[index]
    pods = await pods_of(core, "crash")
    assert len(pods) == 2
    assert {p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] for p in pods} == {3}


async def test_jobs_managed_by_another_controller_are_left_alone(
    batch: k8s.BatchV1Api, core: k8s.CoreV1Api
) -> None:
    elsewhere = job_manifest("elsewhere", managedBy="kueue.x-k8s.io/multikueue")
    await batch.create_namespaced_job("default", elsewhere)
    await batch.create_namespaced_job("default", job_manifest("here"))
    await wait_for(batch.list_namespaced_job, has_true("Complete"), namespace="default",
                   field_selector="metadata.name=here")
    job = await batch.read_namespaced_job_status("elsewhere", "default")
    assert not job.status or not (job.status.active or job.status.start_time or job.status.conditions)
    assert await pods_of(core, "elsewhere") == []


async def test_hundreds_of_jobs_with_zero_runtime_complete(batch: k8s.BatchV1Api) -> None:
    count = 200
    started = time.monotonic()
    await asyncio.gather(*(
        batch.create_namespaced_job("default", job_manifest(
            f"many-{i}", parallelism=2, completions=2, runtime="0",
            pod_spec={"containers": [{"name": "main", "image": "busybox",
                                      "resources": {"requests": {"cpu": "10m"}}}]}))
        for i in range(count)
    ))
    done: set[str] = set()

    def all_complete(job: Obj) -> bool:
        if has_true("Complete")(job):
            done.add(job["metadata"]["name"])
        return len(done) == count

    await wait_for(batch.list_namespaced_job, all_complete, within=60, namespace="default")
    print(f"{count} jobs x 2 pods completed in {time.monotonic() - started:.1f}s")
    listed = await batch.list_namespaced_job("default")
    assert all(j.status.succeeded == 2 and not j.status.failed for j in listed.items)


async def test_the_job_controller_never_sends_a_status_write_its_own_last_one_made_stale(
    batch: k8s.BatchV1Api, cluster: LocalCluster
) -> None:
    """Pod events re-run a Job's reconcile before the watch brings the controller's own previous
    status write: it waits for that event instead of sending a write the server refuses (409).
    The Jobs start suspended and are resumed, as Kueue's are."""
    count = 30
    names = [f"steady-{i}" for i in range(count)]
    for name in names:
        manifest = job_manifest(name, runtime="0.3")
        manifest["spec"]["suspend"] = True
        await batch.create_namespaced_job("default", manifest)
    await wait_for(batch.list_namespaced_job, has_true("Suspended"), within=30, namespace="default",
                   field_selector=f"metadata.name={names[-1]}")
    await asyncio.gather(*(batch.patch_namespaced_job(name, "default", {"spec": {"suspend": False}})
                           for name in names))
    done: set[str] = set()

    def all_complete(job: Obj) -> bool:
        if has_true("Complete")(job):
            done.add(job["metadata"]["name"])
        return len(done) == count

    await wait_for(batch.list_namespaced_job, all_complete, within=60, namespace="default")
    writes = [r for r in cluster.requests if r.method == "PUT" and r.path.endswith("/status")
              and "/jobs/steady-" in r.path]
    assert len(writes) >= 3 * count  # suspended, resumed and running, complete: each Job's status followed
    assert [r.path for r in writes if r.status == 409] == []
