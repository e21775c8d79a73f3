"""Just enough of Kueue around the checks to run Jobs end to end on the local cluster.

It plays Kueue's job reconciler and workload controller as kueue-contract.md §2 to §4 describe
them, for one ClusterQueue with room for everything: a suspended Job gets a Workload it owns;
a Workload is reserved at once (a burst is a burst) and again when its requeue time has
passed; a check in Retry evicts it (checks reset to Pending, ``retryCount + 1``, requeued after
``requeueAfterSeconds``); Rejected deactivates it; all checks Ready admit it and unsuspend the
Job with the checks' podSetUpdates merged into its pod template; a finished Job finishes its
Workload. The checks under test are the real ones; only this harness is a stand-in, until
kadmit's own controller runs them in ``kadmit local``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from dataclasses import dataclass, field
from typing import Any

from kadmit.kube import ApiError, Conflict
from kadmit.kube.resources import CLUSTER_QUEUES, WORKLOADS
from kadmit.workload import applicable_checks, is_true
from tests.checks.conftest import JOBS, KueueCluster, now

Obj = dict[str, Any]


@dataclass
class History:
    """What happened to each workload, in order, for the assertions."""

    events: list[tuple[float, str, str]] = field(default_factory=list)

    def of(self, workload: str) -> list[str]:
        return [what for _, name, what in self.events if name == workload]


def workload_name(job: str) -> str:
    return f"job-{job}"


class KueueStandIn:
    def __init__(self, kueue: KueueCluster, cluster_queue: str, flavor: str = "default") -> None:
        self.kueue = kueue
        self.cluster_queue = cluster_queue
        self.flavor = flavor
        self.history = History()
        self._requeue_at: dict[str, float] = {}
        self._keys: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.jobs = await self.kueue.pool.watch(JOBS)
        self.workloads = await self.kueue.pool.watch(WORKLOADS)
        self.cluster_queues = await self.kueue.pool.watch(CLUSTER_QUEUES)
        for informer in (self.jobs, self.workloads, self.cluster_queues):
            await informer.wait_synced()
        self.jobs.add_handler(lambda _, job, __: self._keys.put_nowait(self._key_of_job(job)))
        self.workloads.add_handler(self._on_workload)
        for job in self.jobs.list():
            self._keys.put_nowait(self._key_of_job(job))
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _key_of_job(self, job: Obj) -> tuple[str, str]:
        return job["metadata"]["namespace"], job["metadata"]["name"]

    def _on_workload(self, event: str, wl: Obj, old: Obj | None) -> None:
        for ref in wl["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Job":
                self._keys.put_nowait((wl["metadata"]["namespace"], ref["name"]))

    def _log(self, workload: str, what: str) -> None:
        self.history.events.append((asyncio.get_running_loop().time(), workload, what))

    async def _loop(self) -> None:
        while True:
            key = await self._keys.get()
            try:
                await self._sync(*key)
            except ApiError as exc:
                if exc.status not in (404, 409):
                    raise
                self._keys.put_nowait(key)  # the watch is behind: look again

    def _later(self, key: tuple[str, str], delay: float) -> None:
        asyncio.get_running_loop().call_later(delay, self._keys.put_nowait, key)

    async def _sync(self, namespace: str, job_name: str) -> None:
        job = self.jobs.get(namespace, job_name)
        if job is None:
            return
        name = workload_name(job_name)
        wl = self.workloads.get(namespace, name)
        if wl is None:
            await self.kueue.create(
                WORKLOADS,
                {
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "ownerReferences": [
                            {
                                "apiVersion": "batch/v1",
                                "kind": "Job",
                                "name": job_name,
                                "uid": job["metadata"]["uid"],
                                "controller": True,
                                "blockOwnerDeletion": True,
                            }
                        ],
                    },
                    "spec": {
                        "queueName": "user-queue",
                        "podSets": [
                            {
                                "name": "main",
                                "count": job["spec"].get("parallelism", 1),
                                "template": job["spec"]["template"],
                            }
                        ],
                    },
                },
            )
            self._log(name, "created")
            return
        if is_true(wl, "Finished") or wl["spec"].get("active") is False:
            return
        if any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in (job.get("status") or {}).get("conditions") or []
        ):
            await self.kueue.set_condition(
                WORKLOADS, namespace, name, {"type": "Finished", "status": "True", "reason": "Succeeded"}
            )
            self._log(name, "finished")
            return
        if not is_true(wl, "QuotaReserved"):
            wait = self._requeue_at.get(name, 0.0) - asyncio.get_running_loop().time()
            if wait > 0:
                self._later((namespace, job_name), wait)
                return
            await self.kueue.reserve(wl, self.cluster_queue, self.flavor)
            self._log(name, "reserved")
            return
        cq = self.cluster_queues.get(None, self.cluster_queue) or {}
        wanted = applicable_checks(wl, cq)
        states = {e["name"]: e for e in (wl.get("status") or {}).get("admissionChecks") or []}
        if any(states.get(c, {}).get("state") == "Rejected" for c in wanted):
            await self._deactivate(wl)
            return
        if any(states.get(c, {}).get("state") == "Retry" for c in wanted):
            await self._evict(
                wl, job, [states[c] for c in wanted if states.get(c, {}).get("state") == "Retry"]
            )
            return
        if all(states.get(c, {}).get("state") == "Ready" for c in wanted) and not is_true(
            wl, "Admitted"
        ):
            await self._admit(wl, job, [states[c] for c in wanted])

    async def _admit(self, wl: Obj, job: Obj, checks: list[Obj]) -> None:
        namespace, name = wl["metadata"]["namespace"], wl["metadata"]["name"]
        await self.kueue.set_condition(
            WORKLOADS, namespace, name, {"type": "Admitted", "status": "True", "reason": "Admitted"}
        )
        template = copy.deepcopy(job["spec"]["template"])
        for check in checks:
            for update in check.get("podSetUpdates") or []:
                if update.get("name") != "main":
                    continue
                meta = template.setdefault("metadata", {})
                meta.setdefault("labels", {}).update(update.get("labels") or {})
                meta.setdefault("annotations", {}).update(update.get("annotations") or {})
                template["spec"].setdefault("nodeSelector", {}).update(update.get("nodeSelector") or {})
                template["spec"].setdefault("tolerations", []).extend(update.get("tolerations") or [])
        for _ in range(5):  # as Kueue's job reconciler: a conflict is retried on a fresh copy
            body = copy.deepcopy(job)
            body["spec"]["suspend"] = False
            body["spec"]["template"] = template
            try:
                await self.kueue.api.replace(JOBS, body)
                break
            except Conflict:  # the MultiKueue check copied the worker's status into it meanwhile
                job = await self.kueue.get(JOBS, namespace, job["metadata"]["name"])
        self._log(name, "admitted")

    async def _evict(self, wl: Obj, job: Obj, retries: list[Obj]) -> None:
        namespace, name = wl["metadata"]["namespace"], wl["metadata"]["name"]
        fresh = await self.kueue.get(WORKLOADS, namespace, name)
        if not is_true(fresh, "QuotaReserved") or not any(
            e.get("state") == "Retry" for e in (fresh.get("status") or {}).get("admissionChecks") or []
        ):
            return  # our watch was behind: already evicted
        delay = max(float(e.get("requeueAfterSeconds") or 0) for e in retries)

        def change(status: Obj) -> None:
            for entry in status.get("admissionChecks") or []:
                if entry.get("state") == "Retry":
                    entry["retryCount"] = int(entry.get("retryCount") or 0) + 1
                if entry.get("state") != "Pending":
                    entry["message"] = f"Reset to Pending after eviction. Previously: {entry['state']}"
                    entry["state"] = "Pending"
                    entry["lastTransitionTime"] = now()
                    entry.pop("podSetUpdates", None)
            status.pop("admission", None)
            status["conditions"] = [
                c for c in status.get("conditions") or [] if c["type"] not in ("QuotaReserved", "Admitted")
            ]
            status["conditions"].append(
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "evicted due to AdmissionCheck",
                    "lastTransitionTime": now(),
                }
            )

        await self.kueue.update_status(WORKLOADS, namespace, name, change)
        self._requeue_at[name] = asyncio.get_running_loop().time() + delay
        self._later((namespace, job["metadata"]["name"]), delay)
        self._log(name, f"evicted after {delay:g}s")

    async def _deactivate(self, wl: Obj) -> None:
        namespace, name = wl["metadata"]["namespace"], wl["metadata"]["name"]
        fresh = await self.kueue.get(WORKLOADS, namespace, name)
        fresh["spec"]["active"] = False
        await self.kueue.api.replace(WORKLOADS, fresh)

        def change(status: Obj) -> None:
            status.pop("admission", None)
            status["conditions"] = [c for c in status.get("conditions") or [] if c["type"] != "QuotaReserved"]
            status["conditions"].append(
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "deactivated",
                    "lastTransitionTime": now(),
                }
            )

        await self.kueue.update_status(WORKLOADS, namespace, name, change)
        self._log(name, "deactivated")


def suspended_job(
    name: str, cpu: str = "1", runtime: str = "0.5s", parallelism: int = 1, extra_spec: Obj | None = None
) -> Obj:
    from kadmit.localcluster.sim import RUNTIME_ANNOTATION

    return {
        "metadata": {
            "name": name,
            "namespace": "team",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {
            "suspend": True,
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {
                "metadata": {"annotations": {RUNTIME_ANNOTATION: runtime}},
                "spec": {
                    "restartPolicy": "Never",
                    **(extra_spec or {}),
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}},
                        }
                    ],
                },
            },
        },
    }
