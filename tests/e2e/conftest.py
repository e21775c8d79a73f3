"""End-to-end fixtures: a local cluster with simulated nodes and a Job controller, Kueue's CRDs,
and kadmit's manager talking to it through kubernetes-asyncio."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient

from kadmit.certs.rotation import RotationPolicy
from kadmit.controller import local_setup
from kadmit.controller.app import KadmitApp
from kadmit.controller.apply import Applier, load_documents
from kadmit.controller.config import Configuration, RequeuingStrategy, WaitForPodsReady
from kadmit.controller.manager import Manager
from kadmit.kube import Client
from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.sim import default_addons, default_config

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"

Obj = dict[str, Any]


def node_config() -> Any:
    """The default pools, labelled as manifests/samples/local-setup.yaml's flavors expect."""
    config = default_config()
    pools = tuple(
        dataclasses.replace(p, labels={**p.labels, "kadmit.dev/pool": p.name}) for p in config.pools
    )
    return dataclasses.replace(config, pools=pools, default_runtime=0.2)


def fast_config(**changes: Any) -> Configuration:
    wfpr = WaitForPodsReady(
        timeout=30,
        recovery_timeout=30,
        requeuing_strategy=RequeuingStrategy(backoff_base_seconds=1, backoff_max_seconds=2),
    )
    return dataclasses.replace(Configuration(wait_for_pods_ready=wfpr), **changes)


async def eventually(check: Callable[[], Awaitable[Any]], within: float = 15.0, what: str = "") -> Any:
    """Poll the API until ``check`` returns something truthy (tests only: the product never polls)."""
    deadline = asyncio.get_running_loop().time() + within
    last: Any = None
    while True:
        last = await check()
        if last:
            return last
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what or check}: last {last!r}")
        await asyncio.sleep(0.05)


@functools.cache
def crd_documents() -> list[Obj]:
    docs = [d for p in sorted((MANIFESTS / "crds").glob("*_*.yaml")) for d in load_documents(p)]
    docs += [d for p in sorted((MANIFESTS / "third-party").glob("*_*.yaml")) for d in load_documents(p)]
    for doc in docs:
        doc.get("spec", {}).pop("conversion", None)  # these tests run no conversion webhook
    return docs


class Env:
    def __init__(self, cluster: LocalCluster, client: ApiClient) -> None:
        self.cluster = cluster
        self.client = client
        self.kube = Client(client)
        self.applier = Applier(self.kube)
        self.managers: list[Manager] = []

    async def install_crds(self) -> None:
        await self.applier.apply_all(copy.deepcopy(crd_documents()))

    async def apply_file(self, path: Path) -> list[Obj]:
        return await self.applier.apply_all(load_documents(path))

    async def start_manager(self, config: Configuration | None = None) -> Manager:
        manager = Manager(self.kube, config or fast_config())
        await manager.start()
        self.managers.append(manager)
        return manager

    async def stop_manager(self, manager: Manager) -> None:
        await manager.stop()
        self.managers.remove(manager)


@pytest.fixture
async def env() -> AsyncIterator[Env]:
    async with LocalCluster(token=True, addons=default_addons(node_config(), seed=7)) as cluster:
        client = await cluster.api_client()
        async with client:
            environment = Env(cluster, client)
            await environment.install_crds()
            try:
                yield environment
            finally:
                for manager in list(environment.managers):
                    await manager.stop()


class WebhookEnv:
    def __init__(self, cluster: LocalCluster, kube: Client, app: KadmitApp | None) -> None:
        self.cluster = cluster
        self.kube = kube
        self.app = app


async def webhook_env(
    rotation: RotationPolicy | None = None, *, run_kadmit: bool = True, config: Configuration | None = None,
    middlewares: Sequence[Any] = (),
) -> AsyncIterator[WebhookEnv]:
    """kadmit run with ``config`` (default: :func:`fast_config`) behind the cluster's webhooks;
    ``middlewares`` in front of the API server (a fault injector's)."""
    app: KadmitApp | None = None

    def port() -> int:
        if app is None:
            raise LookupError("kadmit is not running")
        return app.webhook_port

    config = local_setup.local_configuration(config or fast_config())
    service = (config.namespace, config.webhook_service_name)
    resolver = local_setup.webhook_resolver(service, port)
    async with (
        LocalCluster(
            token=True, addons=default_addons(node_config(), seed=3), service_resolver=resolver,
            middlewares=middlewares,
        ) as cluster,
        await cluster.api_client() as client,
    ):
        kube = Client(client)
        await local_setup.install_crds(kube)
        await local_setup.ensure_namespace(kube, config.namespace)
        await local_setup.ensure_namespace(kube, "kube-system")
        env = WebhookEnv(cluster, kube, None)
        if run_kadmit:
            app = KadmitApp(
                kube,
                config,
                webhook_port=0,
                metrics_address=("127.0.0.1", 0),
                health_address=("127.0.0.1", 0),
                controller_username=local_setup.LOCAL_USERNAME,
                rotation=rotation,
            )
            env.app = app
            await app.start()
        try:
            await local_setup.install_webhooks(kube, *service)
            if app is not None:
                async with asyncio.timeout(20):
                    await local_setup.wait_until(app.ready)
            yield env
        finally:
            if app is not None:
                await app.stop()


@pytest.fixture
async def kadmit() -> AsyncIterator[WebhookEnv]:
    async for env in webhook_env():
        yield env
