"""``kadmit local`` end to end: wall time and CPU seconds, per process, to run small Jobs.

Starts ``kadmit local --no-samples`` as a user does, adds one ResourceFlavor, one ClusterQueue
with room for every Job and a LocalQueue in namespace ``bench``, then creates COUNT small Jobs
(one pod, 100m CPU, running 100 ms on the simulated nodes) through kadmit's webhook and waits
until every one is Complete. Prints the wall time and the CPU seconds each process used meanwhile
(``/proc/<pid>/stat``): kadmit local itself, and its API server child when it has one (``python
-m kadmit.localcluster``: the API server and the simulated nodes and controllers); with an
older kadmit local that runs everything in one process there is only the one figure. Run:

    python bench/local_jobs.py [--jobs 200] [--concurrency 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

# `python bench/X.py` puts bench/ first on sys.path, where bench/webhook.py would shadow the webhook
# package (bench/engine.py the engine one): drop bench/ and import kadmit from the repository root.
# ruff: noqa: E402 (so kadmit's imports come after this)
HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

from kadmit.kube import Client, Obj, Resource
from kadmit.kube.resources import CLUSTER_QUEUES, JOBS, LOCAL_QUEUES, NAMESPACES, RESOURCE_FLAVORS

NAMESPACE = "bench"
QUEUE: dict[Resource, Obj] = {
    RESOURCE_FLAVORS: {"metadata": {"name": "bench"}, "spec": {}},
    CLUSTER_QUEUES: {
        "metadata": {"name": "bench"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [{
                "coveredResources": ["cpu", "memory"],
                "flavors": [{"name": "bench", "resources": [{"name": "cpu", "nominalQuota": "1000"},
                                                             {"name": "memory", "nominalQuota": "1000Gi"}]}],
            }],
        },
    },
    LOCAL_QUEUES: {"metadata": {"name": "default", "namespace": NAMESPACE},
                   "spec": {"clusterQueue": "bench"}},
}


def job(i: int) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"job-{i}", "namespace": NAMESPACE,
                     "labels": {"kueue.x-k8s.io/queue-name": "default"}},
        "spec": {
            "template": {
                "metadata": {"annotations": {"localcluster.kadmit.dev/runtime": "100ms"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox", "command": ["true"],
                                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
                },
            },
        },
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def api_server_child(pid: int) -> int | None:
    """kadmit local's ``python -m kadmit.localcluster`` child, if it runs the server in one."""
    for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
        if b"kadmit.localcluster" in Path(f"/proc/{child}/cmdline").read_bytes():
            return int(child)
    return None


def complete(obj: Obj) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Complete" and c.get("status") == "True" for c in conditions)


async def until_active(kube: Client) -> None:
    """Until kadmit reports the LocalQueue active, so the timing starts with a queue ready to admit."""
    while True:
        queue = await kube.get(LOCAL_QUEUES, NAMESPACE, "default")
        conditions = (queue.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Active" and c.get("status") == "True" for c in conditions):
            return
        await asyncio.sleep(0.1)


async def until_complete(kube: Client, count: int, resource_version: str) -> None:
    done: set[str] = set()
    while len(done) < count:
        async for event in kube.watch(JOBS, NAMESPACE, resource_version=resource_version):
            obj = event["object"]
            resource_version = obj["metadata"].get("resourceVersion", resource_version)
            if event["type"] in ("ADDED", "MODIFIED") and complete(obj):
                done.add(obj["metadata"]["name"])
                if len(done) == count:
                    return


async def measure(count: int, concurrency: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="kadmit-bench-"))
    kubeconfig = workdir / "kubeconfig"
    local = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kadmit", "local", "--no-samples", "--kubeconfig", str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert local.stdout is not None
        ready = (await asyncio.wait_for(local.stdout.readline(), 120)).decode()
        assert "ready" in ready, ready
        server = api_server_child(local.pid)
        async with await Client.connect(kubeconfig) as kube:
            await kube.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
            for resource, body in QUEUE.items():
                typed = {"apiVersion": resource.api_version, "kind": resource.kind}
                await kube.create(resource, {**typed, **body})
            await until_active(kube)
            version = (await kube.list(JOBS, NAMESPACE))["metadata"]["resourceVersion"]
            watching = asyncio.create_task(until_complete(kube, count, version))
            pids = [local.pid] + ([server] if server else [])
            before = {pid: cpu_seconds(pid) for pid in pids}
            client_before, started = time.process_time(), time.perf_counter()
            numbers = iter(range(count))

            async def creator() -> None:
                for i in numbers:
                    await kube.create(JOBS, job(i))

            await asyncio.gather(*(creator() for _ in range(concurrency)))
            created = time.perf_counter() - started
            await asyncio.wait_for(watching, 600)
            wall = time.perf_counter() - started
            used = {pid: cpu_seconds(pid) - before[pid] for pid in pids}
            client = time.process_time() - client_before
    finally:
        local.send_signal(signal.SIGTERM)
        await local.wait()
    print(f"{count} Jobs created in {created:.1f} s, all Complete after {wall:.1f} s wall "
          f"({count / wall:.1f} Jobs/s; {concurrency} creating at once; {os.cpu_count()} CPUs)")
    if server is None:
        print(f"  kadmit local (API server, simulated cluster and kadmit in one process): "
              f"{used[local.pid]:.1f} CPU s ({used[local.pid] / wall:.0%} of a core)")
    else:
        print(f"  kadmit (kadmit local):                           {used[local.pid]:.1f} CPU s "
              f"({used[local.pid] / wall:.0%} of a core)")
        print(f"  API server + simulated cluster (its child):      {used[server]:.1f} CPU s "
              f"({used[server] / wall:.0%} of a core)")
    print(f"  this benchmark's client:                         {client:.1f} CPU s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=200, help="how many Jobs (default 200)")
    parser.add_argument("--concurrency", type=int, default=10, help="creates in flight (default 10)")
    args = parser.parse_args(argv)
    asyncio.run(measure(args.jobs, args.concurrency))


if __name__ == "__main__":
    main()
