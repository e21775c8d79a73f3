"""``kadmit simulate`` and the job reconciler make the same Workload for the same Job.

The Jobs go, as YAML, both to ``kadmit simulate``'s loader and to a local API server watched by
kadmit's manager; the spec of each Workload the reconciler writes must be byte for byte the spec
simulate built, once both went through the Workload CRD's defaulting (simulate's is sent as a
server-side dry run, so the comparison includes nothing the test computes itself).
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kadmit.controller.apply import Applier, load_documents
from kadmit.controller.commands.simulate import load
from kadmit.controller.config import Configuration
from kadmit.controller.manager import Manager
from kadmit.engine import Engine
from kadmit.kube import Client
from kadmit.kube.resources import JOBS, PRIORITY_CLASSES, WORKLOAD_PRIORITY_CLASSES, WORKLOADS
from kadmit.localcluster.cluster import LocalCluster
from tests.e2e.conftest import crd_documents, eventually

Obj = dict[str, Any]

CLASSES = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: urgent}
value: 5000
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: pods-high}
value: 700
"""


def job(name: str, spec: Obj, labels: Obj | None = None, annotations: Obj | None = None) -> Obj:
    template = {"metadata": {"labels": {"app": name}},
                "spec": {"restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "busybox:1.36",
                                         "resources": {"requests": {"cpu": "500m", "memory": "64Mi"}}}]}}
    meta: Obj = {"name": name, "namespace": "default",
                 "labels": {"kueue.x-k8s.io/queue-name": "user-queue", **(labels or {})}}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"suspend": True, "template": template, **spec}}


def jobs() -> list[Obj]:
    indexed = job("indexed", {"completionMode": "Indexed", "completions": 4, "parallelism": 2})
    pod_priority = job("pod-priority", {"parallelism": 2})
    pod_priority["spec"]["template"]["spec"]["priorityClassName"] = "pods-high"
    return [
        job("plain", {"parallelism": 3, "completions": 5}),
        job("defaults", {}),
        indexed,
        job("urgent", {"parallelism": 2, "completions": 2},
            labels={"kueue.x-k8s.io/priority-class": "urgent"}),
        job("elastic", {"parallelism": 4, "completions": 4},
            annotations={"kueue.x-k8s.io/job-min-parallelism": "2",
                         "provreq.kueue.x-k8s.io/maxRunDurationSeconds": "600"}),
        job("bounded", {"parallelism": 1}, labels={"kueue.x-k8s.io/max-exec-time-seconds": "120"}),
        pod_priority,
    ]


@pytest.fixture
async def kube() -> AsyncIterator[Client]:
    async with LocalCluster(token=True) as cluster, await cluster.api_client() as client:
        kube = Client(client)
        await Applier(kube).apply_all(copy.deepcopy(crd_documents()))
        manager = Manager(kube, Configuration())
        await manager.start()
        try:
            yield kube
        finally:
            await manager.stop()


async def test_simulate_builds_the_workload_the_reconciler_writes(kube: Client, tmp_path: Path) -> None:
    manifest = tmp_path / "jobs.yaml"
    manifest.write_text(CLASSES + "---\n" + yaml.safe_dump_all(jobs()))
    simulated = {made.job: made.workload for made in load(Engine(), [str(manifest)]).values()}
    assert sorted(simulated) == sorted(j["metadata"]["name"] for j in jobs())

    await Applier(kube).apply_all(load_documents(manifest))
    for resource, name in ((WORKLOAD_PRIORITY_CLASSES, "urgent"), (PRIORITY_CLASSES, "pods-high")):
        await kube.get(resource, None, name)
    assert len((await kube.list(JOBS, "default"))["items"]) == len(jobs())

    async def written() -> dict[str, Obj] | None:
        items = (await kube.list(WORKLOADS, "default"))["items"]
        by_job = {wl["metadata"]["ownerReferences"][0]["name"]: wl for wl in items}
        return by_job if len(by_job) == len(jobs()) else None

    by_job: dict[str, Obj] = await eventually(written, within=20, what="a Workload for every Job")
    for name, workload in simulated.items():
        dry_run = await kube.request("POST", WORKLOADS.path("default"), query={"dryRun": "All"},
                                     body=workload)
        mine = json.dumps(dry_run["spec"], sort_keys=True)
        theirs = json.dumps(by_job[name]["spec"], sort_keys=True)
        assert mine == theirs, name
    # What the cases are there to cover really reached the specs.
    assert by_job["urgent"]["spec"]["priority"] == 5000
    assert by_job["pod-priority"]["spec"]["priorityClassRef"]["kind"] == "PriorityClass"
    assert by_job["elastic"]["spec"]["podSets"][0]["minCount"] == 2
    assert by_job["indexed"]["spec"]["podSets"][0]["count"] == 2
    assert by_job["bounded"]["spec"]["maximumExecutionTimeSeconds"] == 120
