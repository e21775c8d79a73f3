"""kadmit end to end on the local cluster: how fast Jobs go from created to admitted to started.

Creates COUNT Jobs (each 1 CPU x 2 pods, pods running 0 s) against one ClusterQueue with room
for all of them, through the real path: kubernetes-asyncio → local API server → kadmit's
informers → engine → status writes → Job start. Prints Jobs per second and the latency
percentiles from a Job's creation to its Workload's admission and to the Job's start. Run:

    python bench/controller_throughput.py [COUNT]   # default 300
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
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

from kadmit.controller.apply import Applier
from kadmit.controller.config import Configuration
from kadmit.controller.local_setup import install_crds
from kadmit.controller.manager import Manager
from kadmit.kube import Client
from kadmit.kube.informer import Informer
from kadmit.kube.resources import JOBS
from kadmit.localcluster.cluster import LocalCluster

SETUP = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: big}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 100000}, {name: memory, nominalQuota: 100000Gi}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: default}
spec: {clusterQueue: big}
"""


def job(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"bench-{i}",
            "namespace": "default",
            "labels": {"kueue.x-k8s.io/queue-name": "q"},
        },
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
                }
            },
        },
    }


def percentiles(values: list[float]) -> str:
    if not values:
        return "n/a"
    cuts = statistics.quantiles(values, n=100) if len(values) > 1 else values * 99
    return f"p50 {cuts[49] * 1000:.0f} ms, p95 {cuts[94] * 1000:.0f} ms, max {max(values) * 1000:.0f} ms"


async def main(count: int) -> None:
    async with LocalCluster(token=True) as cluster, await cluster.api_client() as client:
        kube = Client(client)
        await install_crds(kube)
        await Applier(kube).apply_all([d for d in yaml.safe_load_all(SETUP) if d])
        manager = Manager(kube, dataclasses.replace(Configuration(), wait_for_pods_ready=None))
        await manager.start()
        created: dict[str, float] = {}
        admitted: dict[str, float] = {}
        started: dict[str, float] = {}
        done = asyncio.Event()

        def on_job(event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            name = obj["metadata"]["name"]
            if obj["spec"].get("suspend") is False and name not in started:
                started[name] = time.perf_counter()
                if len(started) == count:
                    done.set()

        def on_workload(event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            owner = (obj["metadata"].get("ownerReferences") or [{}])[0].get("name", "")
            if owner not in admitted and any(
                c["type"] == "Admitted" and c["status"] == "True"
                for c in (obj.get("status") or {}).get("conditions", [])
            ):
                admitted[owner] = time.perf_counter()

        watch_jobs = Informer(kube, JOBS)
        watch_jobs.add_handler(on_job)
        manager.workloads.add_handler(on_workload)
        await watch_jobs.start()
        await watch_jobs.wait_synced()
        begin = time.perf_counter()
        for i in range(count):
            created[f"bench-{i}"] = time.perf_counter()
            await kube.create(JOBS, job(i))
        created_all = time.perf_counter() - begin
        async with asyncio.timeout(600):
            await done.wait()
        total = time.perf_counter() - begin
        await watch_jobs.stop()
        await manager.stop()
    to_admitted = [admitted[n] - created[n] for n in created if n in admitted]
    to_started = [started[n] - created[n] for n in created if n in started]
    print(
        f"{count} Jobs created in {created_all:.2f} s; all started after {total:.2f} s "
        f"({count / total:.1f} Jobs/s end to end)"
    )
    print(f"created -> admitted: {percentiles(to_admitted)}")
    print(f"created -> started:  {percentiles(to_started)}")
    print(f"scheduling cycles: {manager.scheduler.cycles}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("count", type=int, nargs="?", default=300, help="Jobs to create (default 300)")
    count = parser.parse_args().count
    if count < 1:
        parser.error("COUNT must be at least 1")
    asyncio.run(main(count))
