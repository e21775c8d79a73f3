"""kadmit end to end on the local cluster: how fast Jobs go from created to admitted to started.

Creates COUNT Jobs (each 1 CPU x 2 pods, pods running 0 s) against one ClusterQueue with room
for all of them, through the real path: kubernetes-asyncio → local API server → kadmit's
informers → engine → status writes → Job start. Prints Jobs per second and the latency
percentiles from a Job's creation to its Workload's admission and to the Job's start. Run:

    python bench/controller_throughput.py [COUNT]           # default 300
    python bench/controller_throughput.py --pod [COUNT]     # the same Jobs, the pod integration on
    python bench/controller_throughput.py --pod-groups 300  # 300 pod groups of 4 Pods (--group-size)

A pod group's Pods are created as the Pod webhook leaves them (gated, labelled managed, with the
finalizer and role hash); the group counts as started once kadmit has ungated all its Pods.
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
from kadmit.kube.resources import JOBS, PODS
from kadmit.localcluster.cluster import LocalCluster
from kadmit.webhook.pods import (
    GROUP_NAME_LABEL,
    GROUP_TOTAL_COUNT_ANNOTATION,
    MANAGED_LABEL,
    POD_FINALIZER,
    ROLE_HASH_ANNOTATION,
    SCHEDULING_GATE,
    role_hash_of_spec,
)

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


def group_pod(group: int, index: int, size: int) -> dict[str, Any]:
    """One Pod of a group, as the Pod webhook mpod.kb.io leaves it."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"bench-{group}-{index}",
            "namespace": "default",
            "labels": {
                "kueue.x-k8s.io/queue-name": "q",
                MANAGED_LABEL: "true",
                GROUP_NAME_LABEL: f"bench-{group}",
            },
            "annotations": {
                GROUP_TOTAL_COUNT_ANNOTATION: str(size),
                ROLE_HASH_ANNOTATION: role_hash_of_spec(spec),
            },
            "finalizers": [POD_FINALIZER],
        },
        "spec": {**spec, "schedulingGates": [{"name": SCHEDULING_GATE}]},
    }


def percentiles(values: list[float]) -> str:
    if not values:
        return "n/a"
    cuts = statistics.quantiles(values, n=100) if len(values) > 1 else values * 99
    return f"p50 {cuts[49] * 1000:.0f} ms, p95 {cuts[94] * 1000:.0f} ms, max {max(values) * 1000:.0f} ms"


async def main(count: int, pod: bool, groups: int, group_size: int) -> None:
    frameworks = ("batch/job", "pod") if pod or groups else ("batch/job",)
    config = dataclasses.replace(Configuration(), wait_for_pods_ready=None, frameworks=frameworks)
    async with LocalCluster(token=True) as cluster, await cluster.api_client() as client:
        kube = Client(client)
        await install_crds(kube)
        await Applier(kube).apply_all([d for d in yaml.safe_load_all(SETUP) if d])
        manager = Manager(kube, config)
        await manager.start()
        created: dict[str, float] = {}
        admitted: dict[str, float] = {}
        started: dict[str, float] = {}
        ungated: dict[str, set[str]] = {}
        total_items = groups or count
        done = asyncio.Event()

        def start(name: str) -> None:
            if name not in started:
                started[name] = time.perf_counter()
                if len(started) == total_items:
                    done.set()

        def on_job(event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            if obj["spec"].get("suspend") is False:
                start(obj["metadata"]["name"])

        def on_pod(event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            group = (obj["metadata"].get("labels") or {}).get(GROUP_NAME_LABEL)
            if group and not obj["spec"].get("schedulingGates"):
                members = ungated.setdefault(group, set())
                members.add(obj["metadata"]["name"])
                if len(members) == group_size:
                    start(group)

        def on_workload(event: str, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
            refs = obj["metadata"].get("ownerReferences") or [{}]
            owner = obj["metadata"]["name"] if groups else refs[0].get("name", "")
            if owner not in admitted and any(
                c["type"] == "Admitted" and c["status"] == "True"
                for c in (obj.get("status") or {}).get("conditions", [])
            ):
                admitted[owner] = time.perf_counter()

        watch = Informer(kube, PODS) if groups else Informer(kube, JOBS)
        watch.add_handler(on_pod if groups else on_job)
        manager.workloads.add_handler(on_workload)
        await watch.start()
        await watch.wait_synced()
        begin = time.perf_counter()
        for i in range(total_items):
            if groups:
                created[f"bench-{i}"] = time.perf_counter()
                for index in range(group_size):
                    await kube.create(PODS, group_pod(i, index, group_size))
            else:
                created[f"bench-{i}"] = time.perf_counter()
                await kube.create(JOBS, job(i))
        created_all = time.perf_counter() - begin
        async with asyncio.timeout(600):
            await done.wait()
        total = time.perf_counter() - begin
        await watch.stop()
        await manager.stop()
    to_admitted = [admitted[n] - created[n] for n in created if n in admitted]
    to_started = [started[n] - created[n] for n in created if n in started]
    what = f"pod groups of {group_size}" if groups else "Jobs"
    unit = "groups" if groups else "Jobs"
    print(f"frameworks: {', '.join(frameworks)}")
    print(
        f"{total_items} {what} created in {created_all:.2f} s; all started after {total:.2f} s "
        f"({total_items / total:.1f} {unit}/s end to end)"
    )
    print(f"created -> admitted: {percentiles(to_admitted)}")
    print(f"created -> started:  {percentiles(to_started)}")
    print(f"scheduling cycles: {manager.scheduler.cycles}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("count", type=int, nargs="?", default=300, help="Jobs to create (default 300)")
    parser.add_argument("--pod", action="store_true", help="run with the pod integration on")
    parser.add_argument(
        "--pod-groups",
        type=int,
        default=0,
        metavar="N",
        help="create N pod groups instead of Jobs (the pod integration on)",
    )
    parser.add_argument("--group-size", type=int, default=4, metavar="K", help="Pods per group (default 4)")
    args = parser.parse_args()
    if args.count < 1 or args.pod_groups < 0 or args.group_size < 1:
        parser.error("COUNT and --group-size must be at least 1, --pod-groups at least 0")
    asyncio.run(main(args.count, args.pod, args.pod_groups, args.group_size))
