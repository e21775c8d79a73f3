"""A JobSet controller just big enough for the end-to-end test: it creates each replicated job's
Jobs while the JobSet runs, deletes them when it is suspended, and reports their progress and
completion in the JobSet's status, as the real controller's API contract does."""

from __future__ import annotations

import asyncio
import contextlib
import copy
from typing import Any

from kubernetes_asyncio.client import ApiClient

from controller.informer import Informer
from controller.kube import JOBS, JOBSETS, ApiError, Kube

Obj = dict[str, Any]
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"


def _complete(job: Obj) -> bool:
    return any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


class JobSetSimulator:
    def __init__(self, client: ApiClient) -> None:
        self.kube = Kube(client)
        self.jobsets = Informer(client, "jobset.x-k8s.io", "v1alpha2", "jobsets")
        self.jobs = Informer(client, "batch", "v1", "jobs")
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        for informer in (self.jobsets, self.jobs):
            informer.add_handler(lambda *_: self._wake.set())

    async def start(self) -> None:
        for informer in (self.jobsets, self.jobs):
            await informer.start()
            await informer.wait_synced()
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for informer in (self.jobsets, self.jobs):
            await informer.stop()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            for jobset in self.jobsets.list():
                with contextlib.suppress(ApiError):
                    await self._sync(jobset)

    async def _sync(self, jobset: Obj) -> None:
        meta = jobset["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        children = [
            j
            for j in self.jobs.list(namespace)
            if (j["metadata"].get("labels") or {}).get(JOBSET_LABEL) == name
        ]
        if jobset["spec"].get("suspend"):
            for child in children:
                await self.kube.delete(
                    JOBS, namespace, child["metadata"]["name"], propagation_policy="Background"
                )
            return
        existing = {j["metadata"]["name"] for j in children}
        owner = {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": name,
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        statuses = []
        for rj in jobset["spec"]["replicatedJobs"]:
            for index in range(int(rj.get("replicas", 1))):
                job_name = f"{name}-{rj['name']}-{index}"
                if job_name in existing:
                    continue
                template = copy.deepcopy(rj["template"])
                labels = {**(template.get("metadata") or {}).get("labels", {}), JOBSET_LABEL: name}
                await self.kube.create(
                    JOBS,
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "metadata": {
                            "name": job_name,
                            "namespace": namespace,
                            "labels": labels,
                            "ownerReferences": [owner],
                        },
                        "spec": template["spec"],
                    },
                )
            mine = [j for j in children if j["metadata"]["name"].startswith(f"{name}-{rj['name']}-")]
            statuses.append(
                {
                    "name": rj["name"],
                    "active": sum(1 for j in mine if int((j.get("status") or {}).get("active") or 0) > 0),
                    "ready": sum(1 for j in mine if int((j.get("status") or {}).get("ready") or 0) > 0),
                    "succeeded": sum(1 for j in mine if _complete(j)),
                    "failed": 0,
                    "suspended": 0,
                }
            )
        replicas = sum(int(rj.get("replicas", 1)) for rj in jobset["spec"]["replicatedJobs"])
        status = dict(jobset.get("status") or {})
        status["replicatedJobsStatus"] = statuses
        if sum(s["succeeded"] for s in statuses) == replicas:
            status["conditions"] = [
                {
                    "type": "Completed",
                    "status": "True",
                    "reason": "AllJobsCompleted",
                    "message": "jobset completed successfully",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        if status != (jobset.get("status") or {}):
            await self.kube.replace_status(JOBSETS, {**jobset, "status": status})
