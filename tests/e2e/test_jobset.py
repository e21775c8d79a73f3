"""A JobSet goes the way a Job does: one Workload with a pod set per replicated job, admitted as a
gang, started with every template injected, finished when the JobSet completes."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controller.kube import JOBS, JOBSETS, WORKLOADS, ApiError, Resource
from tests.e2e.conftest import Env, eventually, fast_config
from tests.e2e.helpers import apply_small_setup
from tests.e2e.jobset_sim import JobSetSimulator

Obj = dict[str, Any]


def replicated_job(name: str, replicas: int, parallelism: int) -> Obj:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": parallelism,
                "completions": parallelism,
                "template": {
                    "metadata": {"annotations": {"localcluster.kadmit.dev/runtime": "200ms"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "resources": {"requests": {"cpu": "500m", "memory": "100Mi"}},
                            }
                        ],
                    },
                },
            }
        },
    }


@pytest.fixture
async def simulator(env: Env) -> AsyncIterator[JobSetSimulator]:
    sim = JobSetSimulator(env.client)
    await sim.start()
    yield sim
    await sim.stop()


async def test_jobset_is_admitted_as_one_gang_and_finishes(env: Env, simulator: JobSetSimulator) -> None:
    config = dataclasses.replace(fast_config(), frameworks=("batch/job", "jobset.x-k8s.io/jobset"))
    await env.start_manager(config)
    await apply_small_setup(env)
    await env.kube.create(
        JOBSETS,
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {
                "name": "training",
                "namespace": "default",
                "labels": {"kueue.x-k8s.io/queue-name": "small"},
            },
            "spec": {
                "suspend": True,
                "replicatedJobs": [replicated_job("driver", 1, 1), replicated_job("workers", 2, 2)],
            },
        },
    )

    async def workload() -> Obj | None:
        for wl in (await env.kube.list(WORKLOADS, "default"))["items"]:
            if wl["metadata"]["name"].startswith("jobset-training-"):
                return wl  # type: ignore[no-any-return]
        return None

    wl = await eventually(workload, what="the JobSet's Workload")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("driver", 1), ("workers", 4)]

    async def started() -> Obj | None:
        js = await env.kube.get(JOBSETS, "default", "training")
        return js if js["spec"].get("suspend") is False else None

    js = await eventually(started, what="the JobSet started")
    for rj in js["spec"]["replicatedJobs"]:
        template = rj["template"]["spec"]["template"]
        assert template["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}
        assert template["metadata"]["labels"]["kueue.x-k8s.io/podset"] == rj["name"]
    admitted = await workload()
    assert admitted is not None
    usage = {
        p["name"]: p["resourceUsage"]["cpu"] for p in admitted["status"]["admission"]["podSetAssignments"]
    }
    assert usage == {"driver": "500m", "workers": "2"}

    async def finished() -> Obj | None:
        current = await workload()
        done = current and any(
            c["type"] == "Finished" and c["status"] == "True" for c in current["status"].get("conditions", [])
        )
        return current if done else None

    await eventually(finished, what="the Workload Finished with the JobSet")
    children = [
        j
        for j in (await env.kube.list(JOBS, "default"))["items"]
        if j["metadata"]["name"].startswith("training-")
    ]
    assert len(children) == 3
    # the child Jobs are the JobSet's: kadmit made no Workload of their own
    assert len((await env.kube.list(WORKLOADS, "default"))["items"]) == 1


async def test_without_the_jobset_crd_the_integration_is_left_out(env: Env) -> None:
    crds = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
    await env.kube.delete(crds, None, "jobsets.jobset.x-k8s.io")

    async def gone() -> bool:
        try:
            await env.kube.request("GET", JOBSETS.path(), query={"limit": 1})
        except ApiError as exc:
            return exc.not_found
        return False

    await eventually(gone, what="the JobSet API gone")
    config = dataclasses.replace(fast_config(), frameworks=("batch/job", "jobset.x-k8s.io/jobset"))
    manager = await env.start_manager(config)  # returns: it does not wait for a list that cannot work
    assert [i.kind for i in manager.integrations] == ["Job"]
    assert [r.integration.kind for r in manager.job_reconcilers] == ["Job"]
