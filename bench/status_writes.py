"""What keeping every waiting Workload's condition current costs: Workload writes per admission.

A burst of COUNT Workloads (1 CPU each) lands in one ClusterQueue with room for a tenth of them,
through the real path (local API server → kadmit's informers → engine → write pipeline). The
bench plays the Job controller: it marks each admitted Workload Finished at once, so the queue
drains as fast as kadmit admits. It counts, from a watch of the Workloads, every change of each
Workload from its creation up to and including the write that admits it (the bench's own
Finished writes come after and are not counted), and then, with a tenth of the queue left waiting
and nothing changing, every write during a quiet period (there should be none). Run:

    python bench/status_writes.py [COUNT] [--quiet SECONDS]   # default 5000, 5 s
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

# `python bench/X.py` puts bench/ first on sys.path, where bench/webhook.py would shadow the webhook
# package (bench/engine.py the engine one): drop bench/ and import kadmit from the repository root.
# ruff: noqa: E402 (so kadmit's imports come after this)
HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

import yaml

from kadmit import workload as ws
from kadmit.controller.apply import Applier
from kadmit.controller.config import Configuration
from kadmit.controller.local_setup import install_crds
from kadmit.controller.manager import Manager
from kadmit.kube import Client
from kadmit.kube.informer import Informer
from kadmit.kube.resources import CLUSTER_QUEUES, WORKLOADS
from kadmit.localcluster.cluster import LocalCluster

SETUP = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: burst}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: CAPACITY}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: default}
spec: {clusterQueue: burst}
"""


def workload(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "queueName": "q",
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


async def create_all(kube: Client, names: list[str], concurrency: int = 16) -> None:
    pending = iter(names)

    async def creator() -> None:
        for name in pending:
            await kube.create(WORKLOADS, workload(name))

    await asyncio.gather(*(creator() for _ in range(concurrency)))


async def main(count: int, quiet: float) -> None:
    capacity = max(count // 10, 1)
    async with LocalCluster(token=True) as cluster, await cluster.api_client() as client:
        kube = Client(client)
        await install_crds(kube)
        setup = SETUP.replace("CAPACITY", str(capacity))
        await Applier(kube).apply_all([d for d in yaml.safe_load_all(setup) if d])
        manager = Manager(kube, dataclasses.replace(Configuration(), wait_for_pods_ready=None))
        await manager.start()
        changes: collections.Counter[str] = collections.Counter()  # writes until admitted, per Workload
        admitted: set[str] = set()
        finishing: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        finish = {"on": True}
        quiet_writes = {"count": 0, "on": False}
        all_admitted = asyncio.Event()
        burst = [f"burst-{i}" for i in range(count)]
        burst_names = set(burst)

        def on_workload(event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            name = obj["metadata"]["name"]
            if event == "MODIFIED" and quiet_writes["on"]:
                quiet_writes["count"] += 1
            if event != "MODIFIED" or name in admitted:
                return
            changes[name] += 1
            if ws.is_true(obj, ws.ADMITTED):
                admitted.add(name)
                if finish["on"]:
                    finishing.put_nowait(obj)
                if burst_names <= admitted:
                    all_admitted.set()

        async def finisher() -> None:  # the bench's Job controller: done as soon as admitted
            while True:
                obj = await finishing.get()
                for _ in range(5):
                    current = await kube.get(WORKLOADS, "default", obj["metadata"]["name"])
                    status = current.setdefault("status", {})
                    ws.finish(status, "Succeeded", "done", time.time())
                    try:
                        await kube.replace(WORKLOADS, current, subresource="status")
                        break
                    except Exception:  # a conflict with kadmit's own write: read again
                        await asyncio.sleep(0.01)
                finishing.task_done()

        watch = Informer(kube, WORKLOADS)
        watch.add_handler(on_workload)
        await watch.start()
        await watch.wait_synced()
        finishers = [asyncio.create_task(finisher()) for _ in range(8)]
        begin = time.perf_counter()
        await create_all(kube, burst)
        created = time.perf_counter() - begin
        async with asyncio.timeout(1800):
            await all_admitted.wait()
        drained = time.perf_counter() - begin
        finish["on"] = False
        await finishing.join()
        finished_at = time.perf_counter()
        async with asyncio.timeout(600):  # the ClusterQueue reports empty once everything finished
            while True:
                status = (await kube.get(CLUSTER_QUEUES, None, "burst")).get("status") or {}
                if not any(
                    status.get(k) for k in ("pendingWorkloads", "reservingWorkloads", "admittedWorkloads")
                ):
                    break
                await asyncio.sleep(0.05)
        empty_after = time.perf_counter() - finished_at
        # A queue left waiting: a full quota's worth runs (not finished), a tenth more waits.
        rest = [f"rest-{i}" for i in range(capacity + capacity // 10 + 1)]
        await create_all(kube, rest)
        await asyncio.sleep(quiet)  # let the last conditions land
        settled_writes = manager.scheduler.writes.writes
        quiet_writes["on"] = True
        await asyncio.sleep(quiet)
        quiet_writes["on"] = False
        for task in finishers:
            task.cancel()
        waiting = sum(
            1
            for wl in manager.workloads.list()
            if wl["metadata"]["name"].startswith("rest-") and not ws.is_true(wl, ws.QUOTA_RESERVED)
        )
        told = sum(
            1
            for wl in manager.workloads.list()
            if wl["metadata"]["name"].startswith("rest-")
            and (ws.find_condition(wl, ws.QUOTA_RESERVED) or {}).get("reason") == "WaitingForQuota"
        )
        scheduler_writes = manager.scheduler.writes.writes
        await watch.stop()
        await manager.stop()
    per = [changes[name] for name in burst]
    histogram = collections.Counter(per)
    print(
        f"{count} Workloads into a ClusterQueue with room for {capacity}: created in {created:.1f} s, "
        f"all admitted (and finished by the bench) after {drained:.1f} s; the ClusterQueue's status "
        f"reported empty {empty_after:.2f} s after the last finish"
    )
    print(
        f"writes up to and including admission, per Workload: mean {sum(per) / len(per):.2f}, "
        f"max {max(per)}; " + ", ".join(f"{k} writes: {v}" for k, v in sorted(histogram.items()))
    )
    print(
        f"then {waiting} left waiting ({told} told WaitingForQuota): {quiet_writes['count']} Workload writes "
        f"in {quiet:.0f} quiet seconds; scheduler writes {settled_writes} before, {scheduler_writes} after"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "count", type=int, nargs="?", default=5000, help="Workloads in the burst (default 5000)"
    )
    parser.add_argument(
        "--quiet", type=float, default=5.0, help="seconds watched with nothing changing (default 5)"
    )
    args = parser.parse_args()
    if args.count < 1 or args.quiet <= 0:
        parser.error("COUNT must be at least 1 and --quiet positive")
    asyncio.run(main(args.count, args.quiet))
