"""JobSets on the local API server: the simulated JobSet controller makes and drives their Jobs.

The JobSet CRD is installed after the cluster (and its controllers) started, as ``kadmit local``
and the end-to-end tests do, so every test also shows the controller picking the API up late.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client as k8s

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.sim.jobsets import JOB_INDEX, JOBSET_NAME, REPLICATED_JOB_NAME, JobSetController

from .conftest import Obj, condition, has_true, wait_for, wait_for_count

CRD = Path(__file__).resolve().parents[3] / "manifests" / "third-party" / "jobset.x-k8s.io_jobsets.yaml"
GROUP, VERSION, PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"
MERGE = "application/merge-patch+json"


@pytest.fixture
async def jobsets(api_client: k8s.ApiClient) -> AsyncIterator[k8s.CustomObjectsApi]:
    crd = yaml.safe_load(CRD.read_text())
    await k8s.ApiextensionsV1Api(api_client).create_custom_resource_definition(crd)
    yield k8s.CustomObjectsApi(api_client)


def replicated_job(name: str, replicas: int, parallelism: int, **annotations: str) -> Obj:
    return {
        "name": name,
        "replicas": replicas,
        "template": {"spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"localcluster.kadmit.dev/runtime": "100ms", **annotations}},
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "busybox", "resources": {"requests": {"cpu": "250m"}}}]},
            },
        }},
    }


def jobset(name: str, *replicated: Obj, **spec: Any) -> Obj:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "JobSet", "metadata": {"name": name},
            "spec": {"replicatedJobs": list(replicated), **spec}}


async def create(api: k8s.CustomObjectsApi, body: Obj) -> Obj:
    created: Obj = await api.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)
    return created


async def until_jobset(api: k8s.CustomObjectsApi, name: str, check: Any, within: float = 10) -> Obj:
    return await wait_for(api.list_namespaced_custom_object, check, within, group=GROUP, version=VERSION,
                          namespace="default", plural=PLURAL, field_selector=f"metadata.name={name}")


async def children(batch: k8s.BatchV1Api, name: str) -> list[Obj]:
    listed = await batch.list_namespaced_job("default", label_selector=f"{JOBSET_NAME}={name}")
    return sorted((batch.api_client.sanitize_for_serialization(j) for j in listed.items),
                  key=lambda j: j["metadata"]["name"])


async def test_jobset_runs_one_job_per_replica_to_completion(
    jobsets: k8s.CustomObjectsApi, batch: k8s.BatchV1Api, core: k8s.CoreV1Api
) -> None:
    created = await create(jobsets, jobset("train", replicated_job("driver", 1, 1),
                                           replicated_job("workers", 2, 2)))
    done = await until_jobset(jobsets, "train", has_true("Completed"))
    assert done["status"]["terminalState"] == "Completed"
    assert condition(done, "Completed")["reason"] == "AllJobsCompleted"  # type: ignore[index]
    statuses = {s["name"]: s for s in done["status"]["replicatedJobsStatus"]}
    assert statuses["driver"]["succeeded"] == 1 and statuses["workers"]["succeeded"] == 2
    assert statuses["workers"]["failed"] == 0 and statuses["workers"]["active"] == 0
    jobs = await children(batch, "train")
    assert [j["metadata"]["name"] for j in jobs] == ["train-driver-0", "train-workers-0", "train-workers-1"]
    worker = jobs[2]
    for tags in (worker["metadata"]["labels"], worker["metadata"]["annotations"],
                 worker["spec"]["template"]["metadata"]["labels"]):
        assert (tags[JOBSET_NAME], tags[REPLICATED_JOB_NAME], tags[JOB_INDEX]) == ("train", "workers", "1")
    owner = worker["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "JobSet", "train", created["metadata"]["uid"], True)
    pods = await core.list_namespaced_pod("default", label_selector=f"{JOBSET_NAME}=train")
    assert len(pods.items) == 1 + 2 * 2 and {p.status.phase for p in pods.items} == {"Succeeded"}


async def test_suspend_reaches_the_jobs_and_resume_brings_the_jobsets_scheduling(
    jobsets: k8s.CustomObjectsApi, batch: k8s.BatchV1Api, core: k8s.CoreV1Api
) -> None:
    body = jobset("gang", replicated_job("workers", 2, 1, **{"localcluster.kadmit.dev/runtime": "60s"}))
    await create(jobsets, body)
    running = await until_jobset(jobsets, "gang", lambda js: any(
        s["active"] == 2 for s in (js.get("status") or {}).get("replicatedJobsStatus") or []))
    assert condition(running, "Suspended") is None

    await jobsets.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "gang",
                                                 {"spec": {"suspend": True}}, _content_type=MERGE)
    suspended = await until_jobset(jobsets, "gang", has_true("Suspended"))
    assert condition(suspended, "Suspended")["reason"] == "SuspendedJobs"  # type: ignore[index]
    await wait_for(batch.list_namespaced_job, lambda j: j["spec"].get("suspend") is True
                   and not (j.get("status") or {}).get("active"), namespace="default",
                   field_selector="metadata.name=gang-workers-1")

    # What kadmit does on admission: inject the flavor's scheduling into the template, then resume.
    resumed = copy.deepcopy(suspended["spec"]["replicatedJobs"])
    template = resumed[0]["template"]["spec"]["template"]
    template["metadata"]["labels"] = {"kueue.x-k8s.io/podset": "workers"}
    template["metadata"]["annotations"]["localcluster.kadmit.dev/runtime"] = "100ms"
    template["spec"]["nodeSelector"] = {"zone": "a"}
    template["spec"]["tolerations"] = [{"key": "example.com/team", "operator": "Exists"}]
    await jobsets.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "gang",
                                                 {"spec": {"suspend": False, "replicatedJobs": resumed}},
                                                 _content_type=MERGE)
    done = await until_jobset(jobsets, "gang", has_true("Completed"))
    assert condition(done, "Suspended")["status"] == "False"  # type: ignore[index]
    assert condition(done, "Suspended")["reason"] == "ResumeJobs"  # type: ignore[index]
    for job in await children(batch, "gang"):
        pod_template = job["spec"]["template"]
        assert pod_template["spec"]["nodeSelector"] == {"zone": "a"}
        assert pod_template["spec"]["tolerations"] == [{"key": "example.com/team", "operator": "Exists"}]
        assert pod_template["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "workers"
        assert pod_template["metadata"]["labels"][JOBSET_NAME] == "gang"
    pods = await core.list_namespaced_pod("default", label_selector=f"{JOBSET_NAME}=gang")
    finished = [p for p in pods.items if p.status.phase == "Succeeded"]
    assert len(finished) == 2 and {p.spec.node_selector["zone"] for p in finished} == {"a"}
    assert {p.spec.node_name for p in finished} <= {"cpu-0", "cpu-1"}


async def test_a_failed_job_restarts_the_jobset_then_fails_it(
    jobsets: k8s.CustomObjectsApi, batch: k8s.BatchV1Api
) -> None:
    failing = replicated_job("workers", 2, 1, **{"localcluster.kadmit.dev/exit-code": "3"})
    await create(jobsets, jobset("flaky", failing, failurePolicy={"maxRestarts": 1}))
    failed = await until_jobset(jobsets, "flaky", has_true("Failed"))
    assert failed["status"]["restarts"] == 1
    assert failed["status"]["terminalState"] == "Failed"
    assert condition(failed, "Failed")["reason"] == "ReachedMaxRestarts"  # type: ignore[index]
    assert condition(failed, "Completed") is None
    jobs = await children(batch, "flaky")
    attempts = {j["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] for j in jobs}
    assert attempts == {"1"}  # the first attempt's Jobs were deleted for the restart


async def test_jobset_of_another_controller_is_left_alone(
    jobsets: k8s.CustomObjectsApi, batch: k8s.BatchV1Api
) -> None:
    remote_body = jobset("remote", replicated_job("workers", 1, 1), managedBy="kueue.x-k8s.io/multikueue")
    await create(jobsets, remote_body)
    await create(jobsets, jobset("local", replicated_job("workers", 1, 1)))
    await until_jobset(jobsets, "local", has_true("Completed"))
    assert await children(batch, "remote") == []
    remote = await jobsets.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "remote")
    assert "status" not in remote or not remote["status"].get("conditions")


async def test_the_controller_follows_the_crd_going_and_coming_back(
    cluster: LocalCluster, jobsets: k8s.CustomObjectsApi, api_client: k8s.ApiClient, batch: k8s.BatchV1Api
) -> None:
    (controller,) = [a for a in cluster.addons if isinstance(a, JobSetController)]
    await create(jobsets, jobset("before", replicated_job("workers", 1, 1)))
    await until_jobset(jobsets, "before", has_true("Completed"))
    extensions = k8s.ApiextensionsV1Api(api_client)
    await extensions.delete_custom_resource_definition("jobsets.jobset.x-k8s.io")
    await wait_for_count(extensions.list_custom_resource_definition, 0,
                         field_selector="metadata.name=jobsets.jobset.x-k8s.io")
    await asyncio.wait_for(until(lambda: controller.jobsets is None), 5)
    await extensions.create_custom_resource_definition(yaml.safe_load(CRD.read_text()))
    await asyncio.wait_for(until(lambda: controller.serving), 5)
    await create(jobsets, jobset("after", replicated_job("workers", 1, 1)))
    await until_jobset(jobsets, "after", has_true("Completed"))
    assert [j["metadata"]["name"] for j in await children(batch, "after")] == ["after-workers-0"]


async def until(check: Any) -> None:
    """Until an in-memory flag of the controller holds (bounded by the caller's timeout)."""
    while not check():  # noqa: ASYNC110
        await asyncio.sleep(0.02)


async def test_success_policy_any_completes_on_its_target_and_deletes_the_rest(
    jobsets: k8s.CustomObjectsApi, batch: k8s.BatchV1Api
) -> None:
    slow = replicated_job("workers", 2, 1, **{"localcluster.kadmit.dev/runtime": "60s"})
    policy = {"operator": "Any", "targetReplicatedJobs": ["driver"]}
    await create(jobsets, jobset("any", replicated_job("driver", 1, 1), slow, successPolicy=policy))
    done = await until_jobset(jobsets, "any", has_true("Completed"))
    statuses = {s["name"]: s for s in done["status"]["replicatedJobsStatus"]}
    assert statuses["driver"]["succeeded"] == 1 and statuses["workers"]["succeeded"] == 0
    await wait_for_count(batch.list_namespaced_job, 1, namespace="default",
                         label_selector=f"{JOBSET_NAME}=any")
    assert [j["metadata"]["name"] for j in await children(batch, "any")] == ["any-driver-0"]
