"""MultiKueue partition-and-heal trials: the manager's links to its workers cut and restored while
Jobs run, each Job counted in every worker where it was started.

A :class:`Partition` is a TCP proxy in front of a worker's API server, and the worker's kubeconfig
Secret in the manager points at it: :meth:`Partition.cut` resets every connection through it and
holds new ones unanswered (packets dropped, as a partition drops them) until :meth:`Partition.heal`,
which resets those held so the clients dial again. The worker itself runs on, its Jobs too.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from kadmit.checks.multikueue_remote import PREBUILT_WORKLOAD
from kadmit.kube.resources import SECRETS
from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.kubeconfig import kubeconfig_dict
from kadmit.localcluster.store import Event

Obj = dict[str, Any]


class Partition:
    """A TCP proxy to ``127.0.0.1:target`` that can be cut and healed."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = 0
        self.cuts = 0
        self._cut = asyncio.Event()
        self._healed = asyncio.Event()
        self._healed.set()
        self._links: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self.heal()
        if self._server is not None:
            self._server.close()
            self._abort_all()
            await self._server.wait_closed()

    def cut(self) -> None:
        self.cuts += 1
        self._healed.clear()
        self._abort_all()

    def heal(self) -> None:
        self._healed.set()
        self._abort_all()  # the connections held meanwhile: their clients dial again

    def _abort_all(self) -> None:
        for writer in list(self._links):
            writer.transport.abort()
        self._links.clear()

    async def _accept(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        self._links.add(client_writer)
        if not self._healed.is_set():
            await self._healed.wait()  # held unanswered; heal() resets it
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            client_writer.transport.abort()
            return
        self._links.add(upstream_writer)

        async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            writer.transport.abort()

        await asyncio.gather(pump(client_reader, upstream_writer), pump(upstream_reader, client_writer))
        self._links.discard(client_writer)
        self._links.discard(upstream_writer)


@dataclass
class Runs:
    """Where each MultiKueue Job was started: a store listener on every worker."""

    started: dict[str, set[str]] = field(default_factory=dict)  # manager workload -> workers
    kind: tuple[str, str] = ("batch", "jobs")  # (group, plural) of the job objects to follow

    def watch(self, name: str, worker: LocalCluster) -> None:
        def on_event(event: Event) -> None:
            if event.key != self.kind or event.type == "DELETED":
                return
            workload = (event.object["metadata"].get("annotations") or {}).get(PREBUILT_WORKLOAD)
            if workload and (event.object.get("spec") or {}).get("suspend") is False:
                self.started.setdefault(workload, set()).add(name)

        worker.store.add_listener(on_event)

    def twice(self) -> dict[str, set[str]]:
        return {w: sorted(ws) for w, ws in self.started.items() if len(ws) > 1}  # type: ignore[misc]


async def route_through(env: Any, worker: str, partition: Partition, secret: str) -> None:
    """Point the manager's kubeconfig Secret for ``worker`` at the partition's proxy."""
    cluster: LocalCluster = env.clusters.workers[worker]
    scheme = cluster.url.split("://", 1)[0]
    config = kubeconfig_dict(f"{scheme}://127.0.0.1:{partition.port}", token=cluster.token,
                             ca_data=cluster.ca_pem, name=cluster.name)
    current = await env.manager.get(SECRETS, "kadmit-system", secret)
    current["data"] = {"kubeconfig": base64.b64encode(yaml.safe_dump(config).encode()).decode()}
    await env.manager.api.replace(SECRETS, current)


@dataclass
class PartitionReport:
    trials: int
    jobs: int
    completed: int
    twice: dict[str, Any]
    lost: list[str]
    wall: float


async def run_partitions(env: Any, *, trials: int, seed: int, longest: float,
                         progress: Callable[[str], None] | None = None) -> PartitionReport:
    """``trials`` times: a Job submitted, then one worker's link cut for 0.3 s to ``longest``
    (shorter than the workers' lost timeout) at a random moment of its run, and healed."""
    from kadmit.kube.resources import JOBS, MULTIKUEUE_CLUSTERS
    from tests.checks.multikueue_fixtures import CLUSTER_NAME, NAMESPACE

    rng = random.Random(seed)
    loop = asyncio.get_running_loop()
    started = loop.time()
    runs = Runs()
    partitions: dict[str, Partition] = {}
    await env.add_worker("worker2")
    for worker in ("worker1", "worker2"):
        runs.watch(worker, env.clusters.workers[worker])
        partitions[worker] = Partition(env.clusters.workers[worker].port)
        await partitions[worker].start()
        await route_through(env, worker, partitions[worker], f"{worker}-secret")

    async def active(worker: str) -> None:
        def is_active(mkc: Obj) -> bool:
            conditions = (mkc.get("status") or {}).get("conditions") or []
            return any(c.get("type") == "Active" and c.get("status") == "True" for c in conditions)

        await env.manager.wait_for(MULTIKUEUE_CLUSTERS, None, CLUSTER_NAME[worker], is_active, within=20)

    names = [f"part-{i}" for i in range(trials)]
    try:
        for i, name in enumerate(names):
            await env.submit(name, runtime=f"{rng.uniform(0.5, 2.0):.1f}s")
            await asyncio.sleep(rng.uniform(0.0, 1.5))
            worker = rng.choice(sorted(partitions))
            partitions[worker].cut()
            await asyncio.sleep(rng.uniform(0.3, longest))
            partitions[worker].heal()
            await active(worker)
            if progress is not None and (i + 1) % 5 == 0:
                progress(f"{i + 1} partitions healed, {len(runs.twice())} Jobs started twice so far")
        lost: list[str] = []
        for name in names:
            try:
                await env.manager.wait_for(JOBS, NAMESPACE, name, _complete, within=60)
            except AssertionError:
                lost.append(name)
    finally:
        for partition in partitions.values():
            await partition.stop()
    return PartitionReport(trials=trials, jobs=len(names), completed=len(names) - len(lost),
                           twice=runs.twice(), lost=lost, wall=loop.time() - started)


def _complete(job: Obj) -> bool:
    return any(c.get("type") == "Complete" and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])
