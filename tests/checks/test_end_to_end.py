"""The whole product: kadmit schedules, its built-in checks decide, the Jobs run.

kadmit runs as ``kadmit local`` runs it (local API server with simulated nodes, Job controller
and autoscaler; CRDs; kadmit with its webhooks over TLS and every installed check plugin), in
this process so that the API server's record of refused requests can be read. Kueue's
``provisioning-setup.yaml`` sample is applied unchanged.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from kadmit.checks.provisioning import CONSUME_ANNOTATION, ProvisioningCheck
from kadmit.checks.resourcequota import ResourceQuotaCheck
from kadmit.controller import local_setup
from kadmit.controller.app import KadmitApp
from kadmit.controller.config import Configuration
from kadmit.kube import Client, Informers, Resource
from kadmit.kube.informer import Informer
from kadmit.kube.resources import (
    KUEUE,
    KUEUE_VERSION,
    PODS,
    PROVISIONING_REQUESTS,
    RESOURCE_QUOTAS,
    WORKLOADS,
)
from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.sim import RUNTIME_ANNOTATION, JobController, default_addons, default_config
from tests.checks.conftest import JOBS, NAMESPACES, ROOT, has_state

Obj = dict[str, Any]
SAMPLE = ROOT / "manifests" / "samples" / "provisioning__provisioning-setup.yaml"  # Kueue's, unchanged
KINDS = {
    kind: Resource(KUEUE, KUEUE_VERSION, plural, kind, namespaced)
    for kind, plural, namespaced in (
        ("ResourceFlavor", "resourceflavors", False),
        ("ClusterQueue", "clusterqueues", False),
        ("LocalQueue", "localqueues", True),
        ("AdmissionCheck", "admissionchecks", False),
        ("ProvisioningRequestConfig", "provisioningrequestconfigs", False),
    )
}


@dataclass
class Product:
    cluster: LocalCluster
    api: Client
    pool: Informers
    jobs: JobController

    async def synced(self, kind: Resource) -> Informer:
        informer = await self.pool.watch(kind)
        await informer.wait_synced()
        return informer

    async def until(
        self, kind: Resource, namespace: str, done: Callable[[list[Obj]], bool], within: float
    ) -> None:
        """Wait, on the watch, until the objects of ``kind`` in ``namespace`` satisfy ``done``."""
        informer = await self.synced(kind)
        changed = asyncio.Event()
        informer.add_handler(lambda *_: changed.set())
        async with asyncio.timeout(within):
            while not done(informer.list(namespace)):
                changed.clear()
                await changed.wait()


@pytest.fixture
async def product() -> AsyncIterator[Product]:
    config = local_setup.local_configuration(Configuration())
    app: KadmitApp | None = None
    service = (config.namespace, config.webhook_service_name)

    def webhook_port() -> int:
        assert app is not None
        return app.webhook_port

    addons = default_addons(default_config().with_pool_labels(local_setup.POOL_LABEL))
    [jobs] = [a for a in addons if isinstance(a, JobController)]
    resolver = local_setup.webhook_resolver(service, webhook_port)
    async with (
        LocalCluster(addons=addons, service_resolver=resolver) as cluster,
        await cluster.api_client() as kadmit_client,
    ):
        kube = Client(kadmit_client)
        await local_setup.install_crds(kube)
        await local_setup.ensure_namespace(kube, config.namespace)
        app = KadmitApp(
            kube,
            local_setup.on_loopback(config, metrics=False, health=False),
            controller_username=local_setup.LOCAL_USERNAME,
        )
        await app.start()
        try:
            await local_setup.install_webhooks(kube, *service)
            async with asyncio.timeout(60):
                await local_setup.wait_until(app.ready)
            # kadmit runs every installed check plugin itself, while it leads.
            assert app.checks is not None
            assert {p.controller_name for p in app.checks.plugins} >= {
                ProvisioningCheck.controller_name,
                ResourceQuotaCheck.controller_name,
            }
            async with await Client.connect(cluster.kubeconfig) as client:
                pool = Informers(client)
                try:
                    yield Product(cluster, client, pool, jobs)
                finally:
                    await pool.stop()
        finally:
            await app.stop()


def job(name: str, namespace: str, queue: str, resources: Obj, parallelism: int = 1, **spec: Any) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "suspend": True,
            "template": {
                "metadata": {"annotations": {RUNTIME_ANNOTATION: "0.4s"}},
                "spec": {
                    "restartPolicy": "Never",
                    **spec,
                    "containers": [{"name": "main", "image": "busybox", "resources": resources}],
                },
            },
        },
    }


def complete(job: Obj) -> bool:
    return any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


async def test_kueues_provisioning_sample_books_capacity_and_the_job_runs_on_it(product: Product) -> None:
    for doc in yaml.safe_load_all(SAMPLE.read_text()):
        if doc:
            await product.api.create(KINDS[doc["kind"]], doc)
    await product.api.create(
        JOBS,
        job(
            "gpu-job",
            "default",
            "user-queue",
            {
                "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"},
                "limits": {"nvidia.com/gpu": "1"},
            },
            parallelism=2,
            tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        ),
    )
    await product.until(JOBS, "default", lambda jobs: any(complete(j) for j in jobs), within=40.0)
    [wl] = (await product.synced(WORKLOADS)).list("default")
    request = f"{wl['metadata']['name']}-sample-prov-1"
    assert has_state("sample-prov", "Ready")(wl)
    pods = (await product.synced(PODS)).list("default")
    assert len(pods) == 2
    assert all(p["metadata"]["annotations"][CONSUME_ANNOTATION] == request for p in pods)
    # Finished: its request is cleaned up.
    await product.until(PROVISIONING_REQUESTS, "default", lambda requests: not requests, within=20.0)


async def test_a_burst_through_kadmit_never_has_a_pod_refused_by_the_namespace_quota(
    product: Product,
) -> None:
    await product.api.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    )
    await product.api.create(
        RESOURCE_QUOTAS,
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "team-quota", "namespace": "team"},
            "spec": {"hard": {"requests.cpu": "2", "limits.cpu": "2"}},
        },
    )
    for doc in (
        {"kind": "ResourceFlavor", "metadata": {"name": "any"}},
        {
            "kind": "AdmissionCheck",
            "metadata": {"name": "namespace-quota"},
            "spec": {"controllerName": "kadmit.dev/resourcequota"},
        },
        {
            "kind": "ClusterQueue",
            "metadata": {"name": "team-cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "any", "resources": [{"name": "cpu", "nominalQuota": "100"}]}],
                    }
                ],
                "admissionChecksStrategy": {"admissionChecks": [{"name": "namespace-quota"}]},
            },
        },
        {
            "kind": "LocalQueue",
            "metadata": {"name": "team-queue", "namespace": "team"},
            "spec": {"clusterQueue": "team-cq"},
        },
    ):
        await product.api.create(KINDS[doc["kind"]], {"apiVersion": f"{KUEUE}/{KUEUE_VERSION}", **doc})
    one_cpu = {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}
    await asyncio.gather(
        *(product.api.create(JOBS, job(f"burst-{i}", "team", "team-queue", one_cpu)) for i in range(6))
    )
    await product.until(
        JOBS, "team", lambda jobs: len(jobs) == 6 and all(complete(j) for j in jobs), within=60.0
    )
    refused = sum(
        1
        for r in product.cluster.requests
        if r.method == "POST" and r.path.endswith("/namespaces/team/pods") and r.status == 403
    )
    assert refused == 0 and product.jobs.rejected == 0  # without the ledger: 14 refusals
    # The check did hold work back: the quota fits 2 of the 6 at a time.
    retried = [
        w
        for w in (await product.synced(WORKLOADS)).list("team")
        if any((e.get("retryCount") or 0) > 0 for e in (w.get("status") or {}).get("admissionChecks") or [])
    ]
    assert retried
