"""A manager and two workers for the MultiKueue check, each with Kueue's CRDs and a Kueue stand-in.

The manager runs the check under the real runner and :class:`KueueStandIn` (the manager's Kueue:
Job → Workload, quota reserved, Admitted once the checks are Ready, Job unsuspended), or, with
``kadmit_on_manager=True``, under kadmit's own manager exactly as ``kadmit run`` runs plugins. Each worker
runs the simulated Nodes, scheduler, kubelet and Job controller, and :class:`WorkerKueue`, which
plays the worker's Kueue for MultiKueue copies: a copy is admitted when the worker's
ClusterQueue has room for it (``nominalQuota`` of cpu), its prebuilt Job is unsuspended, and
the copy is marked Finished when the Job ends. With ``kadmit_on_workers=True`` kadmit's own
manager is the worker's Kueue instead: it admits the copies, adopts them as the prebuilt
Workloads of the remote Jobs and runs them. The stand-in stays where a test changes a worker's
quota mid-test (``cpu_quota``) or needs only the CRDs: it starts in well under a second, while
kadmit's manager needs every Kueue CRD installed on the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kadmit.checks.multikueue import MultiKueueCheck, MultiKueueSettings
from kadmit.checks.multikueue_remote import ORIGIN_LABEL, PREBUILT_WORKLOAD
from kadmit.checks.runner import CheckRunner
from kadmit.kube import ApiError, Client, Resource
from kadmit.kube.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    MULTIKUEUE_CLUSTERS,
    MULTIKUEUE_CONFIGS,
    RESOURCE_FLAVORS,
    WORKLOADS,
)
from kadmit.localcluster.multicluster import MultiCluster, put_kubeconfig_secret
from kadmit.localcluster.sim import default_addons, default_config
from kadmit.workload import is_true
from tests.checks.conftest import CRDS, JOBS, NAMESPACES, KueueCluster, now
from tests.checks.kueue_standin import KueueStandIn

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = Path("/work/shared/kueue-examples/multikueue__multikueue-setup.yaml")
LOCAL_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")
KINDS = {
    k.kind: k
    for k in (
        RESOURCE_FLAVORS,
        CLUSTER_QUEUES,
        LOCAL_QUEUES,
        ADMISSION_CHECKS,
        MULTIKUEUE_CONFIGS,
        MULTIKUEUE_CLUSTERS,
    )
}
CHECK = "sample-multikueue"
NAMESPACE = "default"
CLUSTER_NAME = {"worker1": "multikueue-test-worker1", "worker2": "multikueue-test-worker2"}


WORKER_CRDS = ("workloads", "clusterqueues", "localqueues", "resourceflavors")
MANAGER_CRDS = (*WORKER_CRDS, "admissionchecks", "multikueueconfigs", "multikueueclusters")


@functools.cache
def _crd_documents(plural: str) -> tuple[Obj, ...]:
    path = ROOT / "manifests" / "crds" / f"kueue.x-k8s.io_{plural}.yaml"
    docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    for doc in docs:
        doc.get("spec", {}).pop("conversion", None)  # no conversion webhook here
    return tuple(docs)


async def install(kueue: KueueCluster, plurals: tuple[str, ...]) -> None:
    """Only the CRDs this cluster's part needs: every CRD costs the server a schema compile."""
    docs = [copy.deepcopy(doc) for plural in plurals for doc in _crd_documents(plural)]
    await asyncio.gather(*(kueue.api.create(CRDS, doc) for doc in docs))
    for namespace in (NAMESPACE, "team"):
        with contextlib.suppress(ApiError):
            await kueue.api.create(
                NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )


async def apply(kueue: KueueCluster, documents: list[Obj]) -> None:
    for doc in documents:
        await kueue.api.create(KINDS[doc["kind"]], doc)


def cpu_of(wl: Obj) -> float:
    total = 0.0
    for ps in (wl.get("spec") or {}).get("podSets") or []:
        for c in ps["template"]["spec"].get("containers") or []:
            total += float(((c.get("resources") or {}).get("requests") or {}).get("cpu", 0)) * ps.get(
                "count", 1
            )
    return total


class WorkerKueue:
    """The worker's Kueue, for MultiKueue copies only: admit what fits, run the prebuilt Job, finish."""

    def __init__(self, kueue: KueueCluster, cpu_quota: float) -> None:
        self.kueue = kueue
        self.cpu_quota = cpu_quota
        self.admitted: list[str] = []
        self._keys: asyncio.Queue[None] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.workloads = await self.kueue.pool.watch(WORKLOADS)
        self.jobs = await self.kueue.pool.watch(JOBS)
        for informer in (self.workloads, self.jobs):
            await informer.wait_synced()
            informer.add_handler(lambda *_: self._keys.put_nowait(None))
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        while True:
            await self._keys.get()
            try:
                await self._sync()
            except ApiError as exc:
                if exc.status not in (404, 409):
                    raise
                self._keys.put_nowait(None)

    async def _sync(self) -> None:
        ours = [wl for wl in self.workloads.list() if (wl["metadata"].get("labels") or {}).get(ORIGIN_LABEL)]
        used = sum(
            cpu_of(wl)
            for wl in ours
            if is_true(wl, "QuotaReserved") and not is_true(wl, "Finished")
        )
        for wl in ours:
            if is_true(wl, "QuotaReserved") or used + cpu_of(wl) > self.cpu_quota:
                continue
            used += cpu_of(wl)
            await self._admit(wl)
        for job in self.jobs.list():
            name = (job["metadata"].get("annotations") or {}).get(PREBUILT_WORKLOAD)
            copy_ = self.workloads.get(job["metadata"]["namespace"], name or "")
            if copy_ is None:
                continue
            wl = copy_
            if is_true(wl, "Admitted") and job["spec"].get("suspend"):
                body = dict(job, spec={**job["spec"], "suspend": False})
                await self.kueue.api.replace(JOBS, body)
            finished = next(
                (
                    c
                    for c in (job.get("status") or {}).get("conditions") or []
                    if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                ),
                None,
            )
            if finished is not None and not is_true(wl, "Finished"):
                reason = "Succeeded" if finished["type"] == "Complete" else "Failed"
                await self.kueue.set_condition(
                    WORKLOADS,
                    wl["metadata"]["namespace"],
                    wl["metadata"]["name"],
                    {
                        "type": "Finished",
                        "status": "True",
                        "reason": reason,
                        "message": "Job finished successfully" if reason == "Succeeded" else "Job failed",
                    },
                )

    async def _admit(self, wl: Obj) -> None:
        await self.kueue.reserve(wl, "cluster-queue", "default-flavor")

        def admitted(status: Obj) -> None:
            status["conditions"] = [c for c in status.get("conditions") or [] if c["type"] != "Admitted"]
            status["conditions"].append(
                {
                    "type": "Admitted",
                    "status": "True",
                    "reason": "Admitted",
                    "message": "The workload is admitted",
                    "lastTransitionTime": now(),
                }
            )

        await self.kueue.update_status(
            WORKLOADS, wl["metadata"]["namespace"], wl["metadata"]["name"], admitted
        )
        self.admitted.append(wl["metadata"]["name"])


@dataclass
class MultiKueueEnv:
    clusters: MultiCluster
    manager: KueueCluster
    workers: dict[str, KueueCluster]
    worker_kueues: dict[str, WorkerKueue]
    plugin: MultiKueueCheck
    runner: CheckRunner | None
    standin: KueueStandIn | None
    restart: Any = None  # kadmit_on_manager: an async callable restarting kadmit on the manager

    async def restart_manager(self) -> None:
        """kadmit on the manager stopped and started afresh: a new process would start with
        nothing in memory, only what the API holds."""
        assert self.restart is not None, "only with kadmit_on_manager=True"
        await self.restart()

    async def add_worker(self, worker: str) -> None:
        """A user adding a second worker: its Secret, its MultiKueueCluster, the config listing it."""
        await put_kubeconfig_secret(
            self.clusters.manager, self.clusters.workers[worker], name=f"{worker}-secret"
        )
        await self.manager.create(
            MULTIKUEUE_CLUSTERS,
            {
                "metadata": {"name": CLUSTER_NAME[worker]},
                "spec": {
                    "clusterSource": {
                        "kubeConfig": {"locationType": "Secret", "location": f"{worker}-secret"}
                    }
                },
            },
        )
        config = await self.manager.get(MULTIKUEUE_CONFIGS, None, "multikueue-test")
        config["spec"]["clusters"].append(CLUSTER_NAME[worker])
        await self.manager.api.replace(MULTIKUEUE_CONFIGS, config)
        await self.manager.wait_for(
            MULTIKUEUE_CLUSTERS,
            None,
            CLUSTER_NAME[worker],
            lambda mkc: any(
                c.get("type") == "Active" and c.get("status") == "True"
                for c in (mkc.get("status") or {}).get("conditions") or []
            ),
            within=10,
        )

    async def submit(
        self,
        name: str,
        cpu: str = "1",
        managed_by: str | None = "kueue.x-k8s.io/multikueue",
        runtime: str = "0.3s",
    ) -> Obj:
        from tests.checks.kueue_standin import suspended_job

        job = suspended_job(name, cpu=cpu, runtime=runtime)
        job["metadata"]["namespace"] = NAMESPACE
        if managed_by is not None:
            job["spec"]["managedBy"] = managed_by
        return await self.manager.create(JOBS, job)


def worker_node_config() -> Any:
    config = default_config()
    return dataclasses.replace(config, default_runtime=0.2)


async def install_everything(kueue: KueueCluster) -> None:
    """Every CRD kadmit's manager watches (it runs on the workers in one test)."""
    from tests.e2e.conftest import crd_documents as all_crds

    await asyncio.gather(*(kueue.api.create(CRDS, copy.deepcopy(doc)) for doc in all_crds()))
    for namespace in (NAMESPACE, "team"):
        with contextlib.suppress(ApiError):
            await kueue.api.create(
                NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )


@asynccontextmanager
async def multikueue_env(
    quotas: dict[str, float],
    *,
    kadmit_on_workers: bool = False,
    kadmit_on_manager: bool = False,
    frameworks: tuple[str, ...] = ("batch/job",),
    manager_controllers: bool = False,
    kadmit_rbac: bool = False,
    **settings: Any,
) -> AsyncIterator[MultiKueueEnv]:
    """The manager with Kueue's example applied unchanged (worker1's Secret as the example asks).

    ``frameworks``: the integrations kadmit manages on each side, and whose MultiKueue adapters run.
    ``manager_controllers``: the manager runs Nodes and the simulated job controllers too, as
    ``kadmit local --workers`` does (they must leave objects managed by MultiKueue alone).
    ``kadmit_rbac`` (with ``kadmit_on_manager``): kadmit on the manager authenticates as its
    ServiceAccount bound to exactly ``manifests/base/rbac.yaml``, and the manager enforces RBAC
    (the test checks ``assert_kadmit_never_denied(env.clusters.manager)``).
    """

    def addons(name: str) -> list[Any]:
        if name == "manager" and not manager_controllers:
            return []
        return default_addons(worker_node_config(), seed=3)

    auth: dict[str, Any] = {"token": True} if kadmit_rbac else {}
    async with MultiCluster(
        workers=["worker1", "worker2"], addons=addons, bookmark_interval=0.5, **auth
    ) as clusters:
        clients = {c.name: await c.api_client() for c in clusters.clusters}
        kadmit_clients: list[Client] = []

        async def kadmit_client() -> Client:
            """kadmit's client on the manager: the admin's, or its ServiceAccount's (``kadmit_rbac``)."""
            if not kadmit_rbac:
                return Client(clients["manager"])
            from tests.e2e.conftest import as_kadmit

            kube = await as_kadmit(clusters.manager, Client(clients["manager"]))
            kadmit_clients.append(kube)
            return kube
        kueues = {
            name: KueueCluster(cluster, clients[name])
            for name, cluster in [("manager", clusters.manager), *clusters.workers.items()]
        }
        started: list[Any] = []
        try:
            await asyncio.gather(
                *(
                    install_everything(kueue)
                    if (name != "manager" and kadmit_on_workers) or (name == "manager" and kadmit_on_manager)
                    else install(kueue, MANAGER_CRDS if name == "manager" else WORKER_CRDS)
                    for name, kueue in kueues.items()
                )
            )
            manager = kueues["manager"]
            example = await asyncio.to_thread(EXAMPLE.read_text)
            await apply(manager, [d for d in yaml.safe_load_all(example) if d])
            await put_kubeconfig_secret(clusters.manager, clusters.workers["worker1"], name="worker1-secret")
            worker_kueues: dict[str, WorkerKueue] = {}
            for name in clusters.workers:
                kueue = kueues[name]
                await apply(
                    kueue,
                    [
                        {
                            "apiVersion": "kueue.x-k8s.io/v1beta2",
                            "kind": "ResourceFlavor",
                            "metadata": {"name": "default-flavor"},
                        },
                        {
                            "apiVersion": "kueue.x-k8s.io/v1beta2",
                            "kind": "ClusterQueue",
                            "metadata": {"name": "cluster-queue"},
                            "spec": {
                                "namespaceSelector": {},
                                "resourceGroups": [
                                    {
                                        "coveredResources": ["cpu"],
                                        "flavors": [
                                            {
                                                "name": "default-flavor",
                                                "resources": [
                                                    {"name": "cpu", "nominalQuota": str(quotas.get(name, 0))}
                                                ],
                                            }
                                        ],
                                    }
                                ],
                            },
                        },
                        {
                            "apiVersion": "kueue.x-k8s.io/v1beta2",
                            "kind": "LocalQueue",
                            "metadata": {"name": "user-queue", "namespace": NAMESPACE},
                            "spec": {"clusterQueue": "cluster-queue"},
                        },
                    ],
                )
                if kadmit_on_workers:  # kadmit's own manager plays the worker's Kueue
                    from kadmit.controller.manager import Manager
                    from tests.e2e.conftest import fast_config

                    manager_on_worker = Manager(Client(clients[name]), fast_config(frameworks=frameworks))
                    await manager_on_worker.start()
                    started.append(manager_on_worker)
                    continue
                worker_kueues[name] = WorkerKueue(kueue, quotas.get(name, 0))
                await worker_kueues[name].start()
                started.append(worker_kueues[name])
            options = {
                "namespace": "kadmit-system",
                "gc_interval": 0.0,
                "reconnect_base": 0.2,
                "kubeconfig_root": None,
                "frameworks": frameworks,
                **settings,
            }
            plugin = MultiKueueCheck(MultiKueueSettings(**options))
            runner: CheckRunner | None = None
            standin: KueueStandIn | None = None
            if kadmit_on_manager:  # kadmit's manager, running the plugin as `kadmit run` does
                from kadmit.controller.admission_checks import AdmissionChecksLoop
                from kadmit.controller.manager import Manager
                from tests.e2e.conftest import fast_config

                kadmit = Manager(await kadmit_client(), fast_config(frameworks=frameworks))
                await kadmit.start()
                started.append(kadmit)
                checks_loop = AdmissionChecksLoop(kadmit, [plugin])
                await checks_loop.start()
                started.insert(0, checks_loop)
                runner = checks_loop.runner
                assert runner is not None and runner.events.pace is kadmit.events.pace  # one budget

                async def restart() -> None:
                    nonlocal kadmit, checks_loop, plugin
                    await checks_loop.stop()
                    await plugin.close()
                    await kadmit.stop()
                    started.remove(checks_loop)
                    started.remove(kadmit)
                    kadmit = Manager(await kadmit_client(), fast_config(frameworks=frameworks))
                    await kadmit.start()
                    started.append(kadmit)
                    plugin = MultiKueueCheck(MultiKueueSettings(**options))
                    checks_loop = AdmissionChecksLoop(kadmit, [plugin])
                    await checks_loop.start()
                    started.insert(0, checks_loop)
                    env.plugin, env.runner = plugin, checks_loop.runner
            else:
                runner = CheckRunner(manager.api, [plugin], watches=manager.pool.watch)
                await runner.start()
                standin = KueueStandIn(manager, "cluster-queue", "default-flavor")
                await standin.start()
            env = MultiKueueEnv(
                clusters,
                manager,
                {n: kueues[n] for n in clusters.workers},
                worker_kueues,
                plugin,
                runner,
                standin,
                restart if kadmit_on_manager else None,
            )
            try:
                yield env
            finally:
                if standin is not None:
                    await standin.stop()
                if runner is not None and not kadmit_on_manager:
                    await runner.stop()
                await env.plugin.close()
        finally:
            for item in started:
                await item.stop()
            for kueue in kueues.values():
                await kueue.pool.stop()
            for kube in kadmit_clients:
                await kube.close()
            for api_client in clients.values():
                await api_client.close()
