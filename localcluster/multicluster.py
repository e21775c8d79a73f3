"""Several local clusters at once, for MultiKueue tests: one manager and its workers.

Each cluster is a full :class:`~localcluster.cluster.LocalCluster` with its own port, store,
kubeconfig and add-ons. :func:`put_kubeconfig_secret` stores a worker's kubeconfig in a
Secret of the manager under the key ``kubeconfig``, which is where a MultiKueueCluster with
``clusterSource.kubeConfig.locationType: Secret`` reads it.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from .cluster import LocalCluster
from .errors import ApiError
from .interfaces import ClusterAddon
from .kubeconfig import kubeconfig_dict
from .lifecycle import Lifecycle
from .objects import Obj
from .sim.client import NAMESPACES, SECRETS, RestClient

KUBECONFIG_KEY = "kubeconfig"
DEFAULT_NAMESPACE = "kadmit-system"
AddonFactory = Callable[[str], Sequence[ClusterAddon]]


def worker_kubeconfig(worker: LocalCluster) -> str:
    """The worker's kubeconfig as MultiKueue accepts it: server, inline CA data, a token, no file paths."""
    ca_data = Path(worker.ca_file).read_bytes() if worker.ca_file else None
    config = kubeconfig_dict(worker.url, token=worker.token, ca_data=ca_data, name=worker.name)
    return yaml.safe_dump(config, sort_keys=False)


async def put_kubeconfig_secret(
    manager: LocalCluster,
    worker: LocalCluster,
    namespace: str = DEFAULT_NAMESPACE,
    name: str | None = None,
) -> Obj:
    """Create (or update) Secret ``name`` (default ``<worker>-kubeconfig``) in the manager; return it."""
    secret_name = name or f"{worker.name}-kubeconfig"
    secret: Obj = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": secret_name, "namespace": namespace},
        "data": {KUBECONFIG_KEY: base64.b64encode(worker_kubeconfig(worker).encode()).decode()},
    }
    client = RestClient(manager.endpoint)
    try:
        try:
            await client.create(NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace",
                                                   "metadata": {"name": namespace}})
        except ApiError as exc:
            if exc.code != 409:
                raise
        try:
            return await client.create(SECRETS, namespace, secret)
        except ApiError as exc:
            if exc.code != 409:
                raise
        current = await client.get(SECRETS, namespace, secret_name)
        secret["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return await client.replace(SECRETS, secret)
    finally:
        await client.close()


class MultiCluster(Lifecycle):
    """A manager and workers started together, stopped together::

        async with MultiCluster(workers=["worker1", "worker2"]) as clusters:
            await put_kubeconfig_secret(clusters.manager, clusters.workers["worker1"])
    """

    def __init__(
        self,
        workers: int | Sequence[str] = 2,
        *,
        manager_name: str = "manager",
        addons: AddonFactory | None = None,
        **cluster_options: Any,
    ) -> None:
        """``addons(name)`` gives each cluster its add-ons; ``cluster_options`` go to every LocalCluster."""
        names = [f"worker{i + 1}" for i in range(workers)] if isinstance(workers, int) else list(workers)
        if len(set(names)) != len(names) or manager_name in names:
            raise ValueError("cluster names must be unique")
        if "port" in cluster_options or "kubeconfig" in cluster_options:
            raise ValueError("each cluster chooses its own port and kubeconfig")

        def make(name: str) -> LocalCluster:
            return LocalCluster(name=name, addons=list(addons(name)) if addons else [], **cluster_options)

        self.manager = make(manager_name)
        self.workers: dict[str, LocalCluster] = {name: make(name) for name in names}

    @property
    def clusters(self) -> list[LocalCluster]:
        return [self.manager, *self.workers.values()]

    async def start(self) -> None:
        results = await asyncio.gather(*(c.start() for c in self.clusters), return_exceptions=True)
        failure = next((r for r in results if isinstance(r, BaseException)), None)
        if failure is not None:
            await self.stop()
            raise failure

    async def stop(self) -> None:
        await asyncio.gather(*(c.stop() for c in self.clusters), return_exceptions=True)

    async def connect_workers(self, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Obj]:
        """Put every worker's kubeconfig Secret into the manager; return them by worker name."""
        return {
            name: await put_kubeconfig_secret(self.manager, worker, namespace)
            for name, worker in self.workers.items()
        }
