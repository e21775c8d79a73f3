"""Queue status publishing: status writes per queue, CPU per 1,000 Workload events, time to report empty.

Builds a manager (its informers, engine and queue status loop; no scheduler, no job loops) over a
fake API server, and feeds it Workload events as its watches would: each Workload is created,
then reserved and admitted, then finished, the three events interleaved across every queue.
The fake API answers each status PUT after ``--latency`` ms and sends the written object back to
the informer as a watch event. Prometheus is scraped every ``--scrape-every`` events. Prints:

* status writes per ClusterQueue and per LocalQueue (mean / max), and the requests that
  conflicted;
* CPU milliseconds per 1,000 events (the whole process: informer handlers, engine feed, status
  loop, scrapes) and per scrape;
* how long after the last event every ClusterQueue, and every LocalQueue, reports empty
  (pending, reserving and admitted all 0) in the API, or that they never did (no status was
  written for ``--quiet`` seconds, or ``--settle`` seconds passed).

Run: ``python bench/queue_status.py [--workloads N] [--cluster-queues C] [--local-queues L]``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import copy
import sys
import time
from pathlib import Path
from typing import Any

# `python bench/X.py` puts bench/ first on sys.path, where bench/engine.py would shadow the engine
# package: drop bench/ and import kadmit from the repository root.
# ruff: noqa: E402 (so kadmit's imports come after this)
HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

from kadmit.controller.config import Configuration
from kadmit.controller.manager import Manager
from kadmit.controller.metrics import Metrics
from kadmit.kube import Conflict, Informer, NotFound, Resource
from kadmit.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, RESOURCE_FLAVORS, WORKLOADS

Obj = dict[str, Any]
API = "kueue.x-k8s.io/v1beta2"
NAMESPACE = "bench"
WHEN = "2026-01-01T00:00:00Z"


class FakeApi:
    """The objects, their resourceVersions, and the status PUTs the status loop sends."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.manager: Manager | None = None
        self.objects: dict[tuple[str, str | None, str], Obj] = {}
        self.version = 1000
        self.writes: collections.Counter[tuple[str, str | None, str]] = collections.Counter()
        self.conflicts = 0
        self.last_write = 0.0  # perf_counter of the last status write
        self._deliveries: set[asyncio.Task[None]] = set()

    def informer(self, resource: Resource) -> Informer:
        assert self.manager is not None
        return self.manager.informers.get(resource)

    async def apply(self, resource: Resource, obj: Obj) -> Obj:
        """Store ``obj`` as a client's write would, and deliver it to the informer at once."""
        meta = obj["metadata"]
        self.version += 1
        meta["resourceVersion"] = str(self.version)
        self.objects[(resource.plural, meta.get("namespace"), meta["name"])] = obj
        await self.informer(resource).apply(copy.deepcopy(obj))
        return obj

    # -- the Client surface the status loop uses

    async def replace(self, resource: Resource, obj: Obj, *, subresource: str | None = None) -> Obj:
        await asyncio.sleep(self.latency)
        meta = obj["metadata"]
        key = (resource.plural, meta.get("namespace"), meta["name"])
        stored = self.objects.get(key)
        if stored is None:
            raise NotFound(404, "NotFound", f"{key} not found")
        if stored["metadata"]["resourceVersion"] != meta.get("resourceVersion"):
            self.conflicts += 1
            raise Conflict(409, "Conflict", "the object has been modified")
        # The writer sent a copy of its own and nobody edits what the API or the cache hand out, so
        # one object serves as the stored, the returned and the watched copy: the bench's own copies
        # would otherwise cost more than what it measures.
        new = {**stored, "metadata": {**stored["metadata"]}, "status": obj.get("status") or {}}
        self.version += 1
        new["metadata"]["resourceVersion"] = str(self.version)
        self.objects[key] = new
        self.writes[key] += 1
        self.last_write = time.perf_counter()
        task = asyncio.create_task(self.informer(resource).apply(new))  # the watch
        self._deliveries.add(task)
        task.add_done_callback(self._deliveries.discard)
        return new

    async def get(self, resource: Resource, namespace: str | None, name: str) -> Obj:
        stored = self.objects.get((resource.plural, namespace, name))
        if stored is None:
            raise NotFound(404, "NotFound", f"{resource.plural} {namespace}/{name} not found")
        return copy.deepcopy(stored)


def cluster_queue(name: str) -> Obj:
    return {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "generation": 1},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": "100000"}]}
                    ],
                }
            ],
        },
    }


def local_queue(name: str, cq: str) -> Obj:
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": NAMESPACE, "generation": 1},
        "spec": {"clusterQueue": cq},
    }


def workload(name: str, queue: str) -> Obj:
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": name,
            "creationTimestamp": WHEN,
            "generation": 1,
        },
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                    },
                }
            ],
        },
    }


def condition(kind: str, reason: str) -> Obj:
    return {"type": kind, "status": "True", "reason": reason, "message": "", "lastTransitionTime": WHEN}


def admitted(wl: Obj, cq: str) -> Obj:
    wl = copy.deepcopy(wl)
    wl["status"] = {
        "admission": {
            "clusterQueue": cq,
            "podSetAssignments": [
                {"name": "main", "count": 1, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}}
            ],
        },
        "conditions": [condition("QuotaReserved", "QuotaReserved"), condition("Admitted", "Admitted")],
    }
    return wl


def finished(wl: Obj) -> Obj:
    wl = copy.deepcopy(wl)
    wl["status"]["conditions"].append(condition("Finished", "Succeeded"))
    return wl


def empty(status: Obj | None) -> bool:
    status = status or {}
    return all(status.get(k) == 0 for k in ("pendingWorkloads", "reservingWorkloads", "admittedWorkloads"))


async def run(args: argparse.Namespace, *, with_status: bool) -> float:
    """One run; returns its CPU seconds per 1,000 events. Without status: the same events into the
    informers and the engine, with the queue status loop's handlers taken off and no scrapes."""
    api = FakeApi(args.latency / 1000)
    manager = Manager(api, Configuration())  # type: ignore[arg-type]  # the fake's surface suffices
    api.manager = manager
    metrics = Metrics()
    metrics.bind(manager)
    manager.synced = True  # the informers are fed by hand: there is no list to wait for
    if not with_status:
        for informer in manager.informers:
            for handler in list(informer._handlers):
                if getattr(handler, "__self__", None) is manager.queue_status:
                    informer.remove_handler(handler)

    await api.apply(
        RESOURCE_FLAVORS, {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}}
    )
    queues: list[tuple[str, str]] = []  # (LocalQueue, its ClusterQueue)
    for c in range(args.cluster_queues):
        cq = f"cq-{c}"
        await api.apply(CLUSTER_QUEUES, cluster_queue(cq))
        for q in range(args.local_queues):
            lq = f"lq-{c}-{q}"
            await api.apply(LOCAL_QUEUES, local_queue(lq, cq))
            queues.append((lq, cq))
    if with_status:
        await manager.queue_status.start()
        await asyncio.sleep(0.5)  # the first status of every queue
    api.writes.clear()

    # Each Workload: created, then W events later admitted, then W more later finished.
    window = args.window
    stream: list[tuple[int, str]] = []
    for i in range(args.workloads + 2 * window):
        for step, j in (("create", i), ("admit", i - window), ("finish", i - 2 * window)):
            if 0 <= j < args.workloads:
                stream.append((j, step))
    objects: dict[int, Obj] = {}
    scrape_cpu: list[float] = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    pause = args.batch / args.rate
    for n, (j, step) in enumerate(stream, 1):
        lq, cq = queues[j % len(queues)]
        if step == "create":
            objects[j] = workload(f"wl-{j}", lq)
        elif step == "admit":
            objects[j] = admitted(objects[j], cq)
        else:
            objects[j] = finished(objects[j])
        await api.apply(WORKLOADS, objects[j])
        if with_status and n % args.scrape_every == 0:
            started = time.process_time()
            metrics.exposition()
            scrape_cpu.append(time.process_time() - started)
        if n % args.batch == 0:
            await asyncio.sleep(pause)
    fed = time.perf_counter()
    events = len(stream)
    if not with_status:
        cpu = time.process_time() - cpu0
        print(
            f"without queue status: {events} events over {fed - wall0:.2f} s, "
            f"CPU {cpu * 1000 / (events / 1000):.1f} ms per 1,000 events (informers, engine, this bench)"
        )
        return cpu / (events / 1000)
    queue_keys = {
        resource.plural: [key for key in api.objects if key[0] == resource.plural]
        for resource in (CLUSTER_QUEUES, LOCAL_QUEUES)
    }
    empty_after: dict[str, float] = {}
    watching = 0.0  # CPU spent by this loop itself, not counted
    while time.perf_counter() - fed < args.settle:
        await asyncio.sleep(0.02)
        started = time.process_time()
        for plural, keys in queue_keys.items():
            if plural not in empty_after and all(empty(api.objects[key].get("status")) for key in keys):
                empty_after[plural] = time.perf_counter() - fed
        watching += time.process_time() - started
        if len(empty_after) == 2 or time.perf_counter() - max(api.last_write, fed) > args.quiet:
            break
    cpu = time.process_time() - cpu0 - watching
    wall = time.perf_counter() - wall0
    await manager.queue_status.stop()

    cq_writes = [api.writes[(CLUSTER_QUEUES.plural, None, f"cq-{c}")] for c in range(args.cluster_queues)]
    lq_writes = [api.writes[(LOCAL_QUEUES.plural, NAMESPACE, lq)] for lq, _ in queues]
    print(
        f"{args.workloads} workloads, {events} events over {fed - wall0:.2f} s into "
        f"{args.cluster_queues} ClusterQueues / {len(queues)} LocalQueues; PUT latency {args.latency} ms"
    )
    print(
        f"status writes per ClusterQueue: mean {sum(cq_writes) / len(cq_writes):.1f}, max {max(cq_writes)}; "
        f"per LocalQueue: mean {sum(lq_writes) / len(lq_writes):.1f}, max {max(lq_writes)}; "
        f"conflicts {api.conflicts}"
    )
    print(
        f"CPU {cpu * 1000 / (events / 1000):.1f} ms per 1,000 events (wall {wall:.2f} s); "
        f"scrape {1000 * sum(scrape_cpu) / max(len(scrape_cpu), 1):.2f} ms CPU each "
        f"({len(scrape_cpu)} scrapes)"
    )
    for resource, kind in ((CLUSTER_QUEUES, "ClusterQueues"), (LOCAL_QUEUES, "LocalQueues")):
        if resource.plural in empty_after:
            print(f"{kind} report empty {empty_after[resource.plural]:.2f} s after the last event")
            continue
        left = [
            f"{name}: {(o.get('status') or {}).get('pendingWorkloads')} pending, "
            f"{(o.get('status') or {}).get('reservingWorkloads')} reserving"
            for (plural, _, name), o in sorted(api.objects.items(), key=str)
            if plural == resource.plural and not empty(o.get("status"))
        ]
        print(f"{kind} report empty: never ({len(left)} not empty when the writes stopped, e.g. {left[0]})")
    return cpu / (events / 1000)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", type=int, default=5000)
    parser.add_argument("--cluster-queues", type=int, default=100)
    parser.add_argument("--local-queues", type=int, default=2, help="LocalQueues per ClusterQueue")
    parser.add_argument("--latency", type=float, default=2.0, help="ms per status PUT")
    parser.add_argument("--rate", type=float, default=5000.0, help="events per second fed")
    parser.add_argument("--batch", type=int, default=100, help="events fed between pauses")
    parser.add_argument("--window", type=int, default=500, help="events between a Workload's steps")
    parser.add_argument("--scrape-every", type=int, default=1000, help="events between metric scrapes")
    parser.add_argument("--settle", type=float, default=20.0, help="seconds to wait at most for empty queues")
    parser.add_argument(
        "--quiet",
        type=float,
        default=3.0,
        help="stop waiting once no status was written for this many seconds",
    )
    args = parser.parse_args()
    alone = asyncio.run(run(args, with_status=False))
    total = asyncio.run(run(args, with_status=True))
    print(f"queue status and metrics: {1000 * (total - alone):.1f} ms CPU per 1,000 events (the difference)")


if __name__ == "__main__":
    main()
