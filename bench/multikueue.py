"""MultiKueue end to end: Workloads admitted per second across WORKERS worker clusters.

Starts ``kadmit local --workers WORKERS`` as a user does (a manager and the workers, each API
server a process of its own, kadmit on each in the ``kadmit local`` process), then creates COUNT
Jobs on the manager through kadmit's webhook (LocalQueue ``default``, 100m CPU, a long runtime
so they stay running) and times each stage from the manager's Workloads, as watched: the
Workload created for the Job → quota reserved on the manager → dispatched (nominated workers) →
admitted on a worker (the check Ready, ``status.clusterName``) → Admitted on the manager. Prints
the throughput (Workloads Admitted on the manager per second, from the first create to the last
Admitted), the stage latencies, where the Workloads ran, and the CPU seconds of each process
meanwhile. Run:

    python bench/multikueue.py [--workers 3] [--jobs 300] [--concurrency 10] [--kadmit-command CMD]

One Job goes through first (a warm-up, not counted: an API server compiles the Workload schema
at its first Workload). ``--pause`` waits for Enter once ``kadmit local`` is ready, printing its
pid (for ``py-spy record -p PID``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shlex
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

# `python bench/X.py` puts bench/ first on sys.path, where bench/webhook.py would shadow the webhook
# package: drop bench/ and import kadmit from the repository root.
# ruff: noqa: E402 (so kadmit's imports come after this)
HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

from kadmit.controller.commands.local import ENGINE_LINE
from kadmit.kube import Client, Obj
from kadmit.kube.resources import JOBS, WORKLOADS
from kadmit.workload import find_condition, parse_time

NAMESPACE = "default"


WARM_UP = "mk-warm-up"


def job(i: int | str) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": i if isinstance(i, str) else f"mk-{i}",
            "namespace": NAMESPACE,
            "labels": {"kueue.x-k8s.io/queue-name": "default"},
        },
        "spec": {
            "template": {
                "metadata": {"annotations": {"localcluster.kadmit.dev/runtime": "10m"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def cluster_of(pid: int) -> str:
    """Which cluster an API server child serves: its kubeconfig is ``manager.kubeconfig`` or
    ``manager-<worker>.kubeconfig``."""
    for arg in Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0"):
        if arg.startswith("--kubeconfig="):
            stem = Path(arg.split("=", 1)[1]).stem
            return stem.split("-", 1)[1] if "-" in stem else stem
    return f"child {pid}"


class Stages:
    """When each manager Workload reached each stage, as seen on a watch (perf_counter seconds)."""

    NAMES = ("created", "reserved", "dispatched", "admitted on a worker", "Admitted")

    def __init__(self) -> None:
        self.seen: dict[str, dict[str, float]] = collections.defaultdict(dict)
        self.cluster: dict[str, str] = {}

    def observe(self, wl: Obj) -> None:
        name, now = wl["metadata"]["name"], time.perf_counter()
        if WARM_UP in name:
            return
        status = wl.get("status") or {}
        marks = self.seen[name]
        reached = {
            "created": True,  # the Workload the job reconciler made for the Job
            "reserved": (find_condition(wl, "QuotaReserved") or {}).get("status") == "True",
            "dispatched": bool(status.get("nominatedClusterNames") or status.get("clusterName")),
            "admitted on a worker": bool(status.get("clusterName")),
            "Admitted": (find_condition(wl, "Admitted") or {}).get("status") == "True",
        }
        for stage in self.NAMES:
            if reached[stage]:
                marks.setdefault(stage, now)
        if status.get("clusterName"):
            self.cluster[name] = str(status["clusterName"])

    def admitted(self) -> int:
        return sum(1 for marks in self.seen.values() if "Admitted" in marks)


async def follow(kube: Client, stages: Stages, count: int, version: str) -> None:
    while stages.admitted() < count:
        async for event in kube.watch(WORKLOADS, NAMESPACE, resource_version=version):
            obj = event["object"]
            version = obj["metadata"].get("resourceVersion", version)
            if event["type"] in ("ADDED", "MODIFIED"):
                stages.observe(obj)
                if stages.admitted() >= count:
                    return


async def warm_up(kube: Client) -> None:
    """One Job through the whole path before the measurement: what is done once per process (an
    API server compiling the Workload schema at its first Workload, connections) is not counted
    as the Workloads' cost."""
    version = (await kube.list(WORKLOADS, NAMESPACE))["metadata"]["resourceVersion"]
    await kube.create(JOBS, job(WARM_UP))
    async with asyncio.timeout(180):
        while True:
            async for event in kube.watch(WORKLOADS, NAMESPACE, resource_version=version):
                obj = event["object"]
                version = obj["metadata"].get("resourceVersion", version)
                if WARM_UP in obj["metadata"].get("name", "") and (
                    find_condition(obj, "Admitted") or {}
                ).get("status") == "True":
                    return


async def engine_reported(stream: asyncio.StreamReader) -> str:
    """The engine's build, from the line kadmit local prints after its ready line: an editable
    install runs it interpreted, the wheel compiled."""
    try:
        line = (await asyncio.wait_for(stream.readline(), 10)).decode().strip()
    except TimeoutError:
        line = ""
    return line[len(ENGINE_LINE):] if line.startswith(ENGINE_LINE) else "not reported (an older kadmit)"


DEFAULT_KADMIT_COMMAND = f"{shlex.quote(sys.executable)} -m kadmit"


async def measure(workers: int, count: int, concurrency: int, pause: bool,
                  kadmit_command: str = DEFAULT_KADMIT_COMMAND) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="kadmit-bench-mk-"))
    kubeconfig = workdir / "manager.kubeconfig"
    local = await asyncio.create_subprocess_exec(
        *shlex.split(kadmit_command),
        "local",
        "--workers",
        str(workers),
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert local.stdout is not None
        while True:
            line = (await asyncio.wait_for(local.stdout.readline(), 180)).decode()
            assert line, "kadmit local ended before its ready line"
            if line.startswith("kadmit local: ready"):
                break
        engine = await engine_reported(local.stdout)
        servers = children(local.pid)
        names = {pid: cluster_of(pid) for pid in servers}
        if pause:
            print(f"kadmit local pid {local.pid} (API servers {servers}); press Enter to start", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
        async with await Client.connect(kubeconfig) as kube:
            await warm_up(kube)
            stages = Stages()
            version = (await kube.list(WORKLOADS, NAMESPACE))["metadata"]["resourceVersion"]
            watching = asyncio.create_task(follow(kube, stages, count, version))
            pids = [local.pid, *servers]
            before = {pid: cpu_seconds(pid) for pid in pids}
            started = time.perf_counter()
            created_at: dict[str, float] = {}
            numbers = iter(range(count))

            async def creator() -> None:
                for i in numbers:
                    await kube.create(JOBS, job(i))
                    created_at[f"mk-{i}"] = time.perf_counter()

            await asyncio.gather(*(creator() for _ in range(concurrency)))
            created = time.perf_counter() - started
            await asyncio.wait_for(watching, 900)
            wall = time.perf_counter() - started
            used = {pid: cpu_seconds(pid) - before[pid] for pid in pids}
            owners = {
                w["metadata"]["name"]: w["metadata"]["ownerReferences"][0]["name"]
                for w in (await kube.list(WORKLOADS, NAMESPACE))["items"]
            }
            admitted_times = [
                parse_time((find_condition(w, "Admitted") or {}).get("lastTransitionTime"))
                for w in (await kube.list(WORKLOADS, NAMESPACE))["items"]
                if WARM_UP not in w["metadata"]["name"]
            ]
    finally:
        local.send_signal(signal.SIGTERM)
        await local.wait()
    print(f"kadmit's engine: {engine}")
    print(
        f"{count} Jobs on the manager created in {created:.1f} s; all {count} Workloads Admitted on the "
        f"manager after {wall:.1f} s: {count / wall:.1f} Workloads/s end to end across {workers} workers "
        f"({concurrency} creating at once; {os.cpu_count()} CPUs)"
    )
    print("  stage latency after the Job's create, median / p95 (s):")
    previous = None
    for stage in Stages.NAMES:
        delays = sorted(
            marks[stage] - created_at[owners[name]]
            for name, marks in stages.seen.items()
            if stage in marks and owners.get(name) in created_at
        )
        if not delays:
            continue
        p95 = delays[min(len(delays) - 1, int(len(delays) * 0.95))]
        note = f" (+{statistics.median(delays) - previous:.2f} s)" if previous is not None else ""
        print(f"    {stage:22s} {statistics.median(delays):6.2f} / {p95:6.2f}{note}")
        previous = statistics.median(delays)
    spread = collections.Counter(stages.cluster.values())
    print(f"  where they run: {dict(sorted(spread.items()))}")
    stamps = sorted(t for t in admitted_times if t is not None)
    if len(stamps) > 1:
        print(f"  Admitted timestamps span {stamps[-1] - stamps[0]:.1f} s (server clock)")
    print("  CPU of each process meanwhile: CPU s (share of a core), CPU ms per Workload:")
    rows = [("kadmit local (kadmit on the manager and on each worker)", local.pid)]
    rows += [(f"{names[pid]}'s API server + simulated cluster", pid) for pid in servers]
    for label, pid in rows:
        share, per_workload = used[pid] / wall, 1000 * used[pid] / count
        print(f"    {label:56s} {used[pid]:5.1f} ({share:4.0%})  {per_workload:5.1f} ms")
    total = sum(used.values())
    print(f"    {'all ' + str(len(rows)) + ' processes':56s} {total:5.1f} ({total / wall:4.0%})  "
          f"{1000 * total / count:5.1f} ms")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--workers", type=int, default=3, help="worker clusters (default 3)")
    parser.add_argument("--jobs", type=int, default=300, help="how many Jobs (default 300)")
    parser.add_argument("--concurrency", type=int, default=10, help="creates in flight (default 10)")
    parser.add_argument(
        "--pause", action="store_true", help="wait for Enter once ready (to attach a profiler)"
    )
    parser.add_argument(
        "--kadmit-command", default=DEFAULT_KADMIT_COMMAND,
        help="the command that runs kadmit, one string (default: this Python's `-m kadmit`; an "
             "install of the wheel built with KADMIT_COMPILE=1, e.g. its `bin/kadmit`, measures the "
             "compiled engine the image ships)",
    )
    args = parser.parse_args(argv)
    if not args.kadmit_command.strip():
        parser.error("--kadmit-command must name a command")
    asyncio.run(measure(args.workers, args.jobs, args.concurrency, args.pause, args.kadmit_command))


if __name__ == "__main__":
    main()
