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


async def eventually(
    check: Callable[[], Awaitable[Any]], within: float = 30.0, what: str = "", every: float = 0.05
) -> Any:
    """Poll the API until ``check`` returns something truthy (tests only: the product never polls).

    ``every``: the pause between polls; checks that run kubectl take a longer one, so as not to
    take the CPU from the cluster they wait for."""
    deadline = asyncio.get_running_loop().time() + within
    last: Any = None
    while True:
        last = await check()
        if last:
            return last
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what or check}: last {last!r}")
        await asyncio.sleep(every)


@functools.cache
def crd_documents() -> list[Obj]:
    docs = [d for p in sorted((MANIFESTS / "crds").glob("*_*.yaml")) for d in load_documents(p)]
    docs += [d for p in sorted((MANIFESTS / "third-party").glob("*_*.yaml")) for d in load_documents(p)]
    for doc in docs:
        doc.get("spec", {}).pop("conversion", None)  # these tests run no conversion webhook
    return docs


def assert_kadmit_never_denied(cluster: LocalCluster, namespace: str = "kadmit-system") -> None:
    """Least privilege, the sufficient half: nothing kadmit asked for was refused by RBAC."""
    denied = cluster.audit.denied(local_setup.controller_username(namespace))
    assert denied == [], f"RBAC refused kadmit (manifests/base/rbac.yaml lacks a rule): {denied}"


async def as_kadmit(cluster: LocalCluster, kube: Client, namespace: str = "kadmit-system") -> Client:
    """A client that authenticates as kadmit's ServiceAccount, bound to exactly the roles of
    ``manifests/base/rbac.yaml`` (the cluster enforces RBAC): what kadmit may do in these tests is
    what it may do when installed. Its token comes from the TokenRequest API, as kadmit local's."""
    await local_setup.ensure_namespace(kube, namespace)
    await local_setup.ensure_service_account(kube, namespace)
    await local_setup.install_rbac(kube, namespace)
    token = await local_setup.service_account_token(kube, namespace)
    return await Client.connect(cluster.kubeconfig_for(token))


class Env:
    def __init__(self, cluster: LocalCluster, client: ApiClient) -> None:
        self.cluster = cluster
        self.client = client
        self.kube = Client(client)  # the cluster admin: what a test does as the user
        self.kadmit_kube: Client | None = None  # kadmit's ServiceAccount: what managers run as
        self.applier = Applier(self.kube)
        self.managers: list[Manager] = []

    async def install_crds(self) -> None:
        await self.applier.apply_all(copy.deepcopy(crd_documents()))

    async def apply_file(self, path: Path) -> list[Obj]:
        return await self.applier.apply_all(load_documents(path))

    async def kadmit_client(self) -> Client:
        """kadmit's client (see :func:`as_kadmit`), made on first use."""
        if self.kadmit_kube is None:
            self.kadmit_kube = await as_kadmit(self.cluster, self.kube)
        return self.kadmit_kube

    async def start_manager(self, config: Configuration | None = None) -> Manager:
        manager = Manager(await self.kadmit_client(), config or fast_config())
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
                if environment.kadmit_kube is not None:
                    await environment.kadmit_kube.close()
            assert_kadmit_never_denied(cluster)


class WebhookEnv:
    def __init__(self, cluster: LocalCluster, kube: Client, app: KadmitApp | None) -> None:
        self.cluster = cluster
        self.kube = kube  # the cluster admin
        self.app = app  # kadmit, on its ServiceAccount's token (see as_kadmit)


async def webhook_env(
    rotation: RotationPolicy | None = None,
    *,
    run_kadmit: bool = True,
    config: Configuration | None = None,
    leader_election: bool = False,
    metrics_secure: bool = False,
    https: bool = False,
    middlewares: Sequence[Any] = (),
) -> AsyncIterator[WebhookEnv]:
    """kadmit run with ``config`` (default: :func:`fast_config`) behind the cluster's webhooks;
    ``leader_election`` keeps the configuration's leader election (kadmit local turns it off);
    ``https`` serves the API on TLS, which kubectl needs to send a user's token; ``middlewares``
    in front of the API server (a fault injector's)."""
    app: KadmitApp | None = None

    def port() -> int:
        try:
            if app is not None:
                return app.webhook_port
        except RuntimeError:  # stopped: its Service has no endpoints, as when its pods are gone
            pass
        raise LookupError("kadmit is not running")

    given = config or fast_config()
    config = local_setup.local_configuration(given)
    if leader_election:
        config = dataclasses.replace(config, leader_election=given.leader_election)
    service = (config.namespace, config.webhook_service_name)
    resolver = local_setup.webhook_resolver(service, port)
    async with (
        LocalCluster(
            https=https,
            token=True,
            addons=default_addons(node_config(), seed=3),
            service_resolver=resolver,
            middlewares=middlewares,
        ) as cluster,
        await cluster.api_client() as client,
    ):
        kube = Client(client)
        await local_setup.install_crds(kube)
        await local_setup.ensure_namespace(kube, config.namespace)
        await local_setup.ensure_namespace(kube, "kube-system")
        env = WebhookEnv(cluster, kube, None)
        kadmit_kube = await as_kadmit(cluster, kube, config.namespace)
        if run_kadmit:
            app = KadmitApp(
                kadmit_kube,
                config,
                controller_username=local_setup.controller_username(config.namespace),
                rotation=rotation,
                metrics_secure=metrics_secure,
            )
            env.app = app
            await app.start()
        try:
            await local_setup.install_webhooks(kube, *service, config.frameworks)
            if app is not None:
                async with asyncio.timeout(20):
                    await local_setup.wait_until(app.ready)
            yield env
        finally:
            if app is not None:
                await app.stop()
            await kadmit_kube.close()
        assert_kadmit_never_denied(cluster, config.namespace)


@pytest.fixture
async def kadmit() -> AsyncIterator[WebhookEnv]:
    async for env in webhook_env():
        yield env
