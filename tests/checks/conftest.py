"""Fixtures: a local API server serving Kueue's CRDs, clients for it, and what a Kueue scheduler writes.

The runner does not need kadmit's scheduler: a test reserves quota for a Workload by writing
``status.admission`` and ``QuotaReserved=True`` itself, exactly as any Kueue scheduler does.
"""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from kadmit.checks.plugin import AnyPlugin
from kadmit.checks.runner import CheckRunner
from kadmit.kube import ApiError, Client, Informers, Resource
from kadmit.kube.resources import ADMISSION_CHECKS, CLUSTER_QUEUES, WORKLOADS
from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.interfaces import ClusterAddon
from kadmit.localcluster.server import Middleware

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
JOBS = Resource("batch", "v1", "jobs", "Job")
NAMESPACE = "team"
NEEDED_CRDS = (
    "workloads",
    "clusterqueues",
    "admissionchecks",
    "resourceflavors",
    "provisioningrequestconfigs",
)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@functools.cache
def _crd_documents() -> tuple[Obj, ...]:
    docs: list[Obj] = []
    for plural in NEEDED_CRDS:
        path = ROOT / "manifests" / "crds" / f"kueue.x-k8s.io_{plural}.yaml"
        docs.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return tuple(docs)


def crd_documents() -> list[Obj]:
    """Kueue's CRDs the checks read, parsed once per test session."""
    return copy.deepcopy(list(_crd_documents()))


class KueueCluster:
    """A running local cluster with Kueue's API, and the writes a test plays Kueue with."""

    def __init__(self, cluster: LocalCluster, api_client: ApiClient) -> None:
        self.cluster = cluster
        self.api_client = api_client
        self.api = Client(api_client)
        self.pool = Informers(self.api)

    async def install_crds(self) -> None:
        # Only the kinds the checks read: every CRD costs the server a schema compile.
        await asyncio.gather(*(self.api.create(CRDS, doc) for doc in crd_documents()))
        await self.api.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )

    async def create(self, kind: Resource, obj: Obj) -> Obj:
        body = copy.deepcopy(obj)
        body.setdefault("apiVersion", kind.api_version)
        body.setdefault("kind", kind.kind)
        return await self.api.create(kind, body)

    async def get(self, kind: Resource, namespace: str | None, name: str) -> Obj:
        return await self.api.get(kind, namespace, name)

    async def cluster_queue(
        self, name: str, checks: list[Obj], flavors: tuple[str, ...] = ("default",)
    ) -> Obj:
        return await self.create(
            CLUSTER_QUEUES,
            {
                "metadata": {"name": name},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {"name": f, "resources": [{"name": "cpu", "nominalQuota": "100"}]}
                                for f in flavors
                            ],
                        }
                    ],
                    "admissionChecksStrategy": {"admissionChecks": checks},
                },
            },
        )

    async def admission_check(self, name: str, controller: str, parameters: Obj | None = None) -> Obj:
        spec: Obj = {"controllerName": controller}
        if parameters is not None:
            spec["parameters"] = parameters
        return await self.create(ADMISSION_CHECKS, {"metadata": {"name": name}, "spec": spec})

    async def workload(
        self, name: str, pods: int = 1, cpu: str = "1", owner: Obj | None = None, template: Obj | None = None
    ) -> Obj:
        metadata: Obj = {"name": name, "namespace": NAMESPACE}
        if owner is not None:
            metadata["ownerReferences"] = [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        pod_template = template or {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "c",
                        "image": "busybox",
                        "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}},
                    }
                ],
            }
        }
        return await self.create(
            WORKLOADS,
            {
                "metadata": metadata,
                "spec": {
                    "queueName": "user-queue",
                    "podSets": [{"name": "main", "count": pods, "template": pod_template}],
                },
            },
        )

    async def listed(self, kind: Resource, namespace: str | None = None) -> list[Obj]:
        """The objects of a kind as a synced watch has them."""
        informer = await self.pool.watch(kind)
        await informer.wait_synced()
        return informer.list(namespace)

    async def update_status(
        self, kind: Resource, namespace: str | None, name: str, change: Callable[[Obj], None]
    ) -> Obj:
        """Read, change, write ``status`` with conflict retries (what any well-behaved controller does)."""
        for _ in range(20):
            obj = await self.get(kind, namespace, name)
            change(obj.setdefault("status", {}))
            try:
                return await self.api.replace(kind, obj, subresource="status")
            except ApiError as exc:
                if not exc.conflict:
                    raise
        raise AssertionError(f"{name}: status write kept conflicting")

    async def reserve(self, wl: Obj, cluster_queue: str, flavor: str = "default") -> Obj:
        """Play Kueue's scheduler: quota reserved in ``cluster_queue`` with ``flavor``."""

        def change(status: Obj) -> None:
            pods = wl["spec"]["podSets"]
            status["admission"] = {
                "clusterQueue": cluster_queue,
                "podSetAssignments": [
                    {
                        "name": ps["name"],
                        "count": ps.get("count", 1),
                        "flavors": {"cpu": flavor},
                        "resourceUsage": {},
                    }
                    for ps in pods
                ],
            }
            conditions = [
                c for c in status.get("conditions") or [] if c["type"] not in ("QuotaReserved", "Evicted")
            ]
            conditions.append(
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": f"Quota reserved in ClusterQueue {cluster_queue}",
                    "lastTransitionTime": now(),
                }
            )
            status["conditions"] = conditions

        return await self.update_status(
            WORKLOADS, wl["metadata"]["namespace"], wl["metadata"]["name"], change
        )

    async def set_condition(self, kind: Resource, namespace: str | None, name: str, cond: Obj) -> Obj:
        def change(status: Obj) -> None:
            conditions = [c for c in status.get("conditions") or [] if c["type"] != cond["type"]]
            conditions.append({"reason": cond["type"], "message": "", "lastTransitionTime": now(), **cond})
            status["conditions"] = conditions

        return await self.update_status(kind, namespace, name, change)

    async def wait_gone(self, kind: Resource, namespace: str | None, name: str, within: float = 20.0) -> None:
        """Wait, on a watch, until the object no longer exists."""
        informer = await self.pool.watch(kind)
        await informer.wait_synced()
        gone = asyncio.Event()
        informer.add_handler(lambda event, obj, _: gone.set() if event == "DELETED" else None)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while informer.get(namespace, name) is not None:
            remaining = deadline - loop.time()
            if remaining <= 0:
                left = informer.get(namespace, name) or {}
                raise AssertionError(f"{kind.kind} {namespace}/{name} still exists: metadata "
                                     f"{left.get('metadata')}, status {left.get('status')}")
            gone.clear()
            with suppress(TimeoutError):
                await asyncio.wait_for(gone.wait(), timeout=min(remaining, 1.0))

    async def wait_for(
        self,
        kind: Resource,
        namespace: str | None,
        name: str | None,
        predicate: Callable[[Obj], bool],
        within: float = 20.0,
    ) -> Obj:
        """Wait, on a watch, until the object (any in the namespace if ``name`` is None) matches."""
        informer = await self.pool.watch(kind)
        await informer.wait_synced()
        changed = asyncio.Event()
        informer.add_handler(lambda *_: changed.set())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            if name is None:  # any object of the namespace
                obj = next((o for o in informer.list(namespace) if predicate(o)), None)
            else:
                obj = informer.get(namespace, name)
            if obj is not None and predicate(obj):
                return obj
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"{kind.kind} {namespace}/{name} never matched; last seen: {obj}")
            changed.clear()
            with suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout=min(remaining, 1.0))

    @asynccontextmanager
    async def running(self, plugins: list[AnyPlugin], **options: Any) -> AsyncIterator[CheckRunner]:
        runner = CheckRunner(self.api, plugins, watches=self.pool.watch, **options)
        await runner.start()
        try:
            yield runner
        finally:
            await runner.stop()


@asynccontextmanager
async def kueue_cluster(
    addons: list[ClusterAddon] | None = None, middlewares: Sequence[Middleware] = ()
) -> AsyncIterator[KueueCluster]:
    async with LocalCluster(addons=addons or [], bookmark_interval=0.5, middlewares=middlewares) as cluster:
        api_client = await cluster.api_client()
        async with api_client:
            kueue = KueueCluster(cluster, api_client)
            await kueue.install_crds()
            try:
                yield kueue
            finally:
                await kueue.pool.stop()


@pytest.fixture
async def kueue() -> AsyncIterator[KueueCluster]:
    async with kueue_cluster() as running:
        yield running


def state_of(wl: Obj, check: str) -> Obj | None:
    for entry in (wl.get("status") or {}).get("admissionChecks") or []:
        if entry.get("name") == check:
            return dict(entry)
    return None


def has_state(check: str, state: str) -> Callable[[Obj], bool]:
    return lambda wl: (state_of(wl, check) or {}).get("state") == state


def active_is(status: str) -> Callable[[Obj], bool]:
    def check(ac: Obj) -> bool:
        return any(
            c.get("type") == "Active" and c.get("status") == status
            for c in (ac.get("status") or {}).get("conditions") or []
        )

    return check


Waiter = Callable[[], Awaitable[None]]
