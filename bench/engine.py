"""Scheduler throughput on Kueue's large-scale scalability shape, with simulated completion.

10 cohorts x 100 ClusterQueues (nominalQuota 20 cpu, borrowingLimit 100, preemption
reclaimWithinCohort Any / withinClusterQueue LowerPriority) and single-pod workloads in three
classes — small 1 cpu / priority 50, medium 5 cpu / 100, large 20 cpu / 200 — spread evenly over
the queues. Virtual time advances from one completion to the next; preempted workloads stop at
once. For 5,000 and 50,000 workloads (so the growth is visible) it prints:

* ``reserved/s``: quota reservations ÷ CPU seconds spent in ``schedule``;
* ``loop res/s``: reservations ÷ CPU seconds of the whole simulation loop — ``schedule`` plus the
  bench's own bookkeeping (completions, ``release``, ``finish``) and every garbage collection,
  including those the engine defers to after its cycles; the honest lower bound;
* ``wall res/s``: reservations ÷ wall-clock seconds of the loop (the machine is shared, so this
  also measures the neighbours);
* ``decisions/s``: admission attempts (every head evaluated: reserved, preempting — a head that
  issues preemptions counts once, however many victims — or left pending) per CPU second in
  ``schedule``, which is what Kueue's ``kueue_admission_attempts_total`` counts;
* p50/p99 cycle CPU time, the cost of an idle cycle (nothing changed, everything pending and
  parked), and peak RSS.

    python bench/engine.py                 # both sizes
    python bench/engine.py --workloads 50000
    python bench/engine.py --repeat 3      # best of three runs per size
"""

from __future__ import annotations

import argparse
import gc
import heapq
import resource
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

from kadmit.engine import Engine

API = "kueue.x-k8s.io/v1beta2"
COHORTS = 10
QUEUES_PER_COHORT = 100
CLASSES = (("small", "1", 50, 200.0), ("medium", "5", 100, 500.0), ("large", "20", 200, 1000.0))
"""(name, cpu, priority, run time in virtual seconds)."""


def setup(engine: Engine) -> list[str]:
    engine.upsert({"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}})
    queues = []
    for c in range(COHORTS):
        for q in range(QUEUES_PER_COHORT):
            name = f"cq-{c}-{q}"
            engine.upsert(
                {
                    "apiVersion": API,
                    "kind": "ClusterQueue",
                    "metadata": {"name": name},
                    "spec": {
                        "cohortName": f"cohort-{c}",
                        "namespaceSelector": {},
                        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                        "resourceGroups": [
                            {
                                "coveredResources": ["cpu"],
                                "flavors": [
                                    {
                                        "name": "default",
                                        "resources": [
                                            {"name": "cpu", "nominalQuota": 20, "borrowingLimit": 100}
                                        ],
                                    }
                                ],
                            }
                        ],
                    },
                }
            )
            engine.upsert(
                {
                    "apiVersion": API,
                    "kind": "LocalQueue",
                    "metadata": {"name": f"lq-{c}-{q}", "namespace": "bench"},
                    "spec": {"clusterQueue": name},
                }
            )
            queues.append(f"lq-{c}-{q}")
    return queues


def workload(index: int, queue: str, cls: tuple[str, str, int, float]) -> dict[str, Any]:
    name, cpu, priority, _ = cls
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {
            "name": f"{name}-{index}",
            "namespace": "bench",
            "uid": f"uid-{index:06}",
            "creationTimestamp": index * 0.001,
        },
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}
                    },
                }
            ],
        },
    }


def run(total: int) -> dict[str, float]:
    engine = Engine()
    queues = setup(engine)
    runtime: dict[tuple[str, str], float] = {}
    for i in range(total):
        cls = CLASSES[i % len(CLASSES)]
        wl = workload(i, queues[(i // len(CLASSES)) % len(queues)], cls)
        engine.upsert_workload(wl)
        runtime[("bench", wl["metadata"]["name"])] = cls[3]
    engine.sync()  # the queues' setup and routing, once, outside the timed cycles
    gc.collect()
    now = 0.0
    completions: list[tuple[float, tuple[str, str]]] = []
    cycles: list[float] = []
    admitted = preempted = attempts = 0
    finished = 0
    loop_cpu = time.process_time()
    loop_wall = time.perf_counter()
    while finished < total:
        start = time.process_time()
        decisions = engine.schedule(now)
        cycles.append(time.process_time() - start)
        admitted += len(decisions.reservations)
        attempts += decisions.attempts_success + decisions.attempts_inadmissible
        for reservation in decisions.reservations:
            heapq.heappush(completions, (now + runtime[reservation.workload], reservation.workload))
        for preemption in decisions.preemptions:
            preempted += 1
            engine.release(*preemption.victim)
        if not completions:
            break
        now = completions[0][0]
        while completions and completions[0][0] <= now:
            _, key = heapq.heappop(completions)
            if engine.status(*key).state == "Admitted":
                engine.finish(*key)
                finished += 1
    gc.collect()  # what the cycles left for the collector is part of their cost
    loop_cpu = time.process_time() - loop_cpu
    loop_wall = time.perf_counter() - loop_wall
    # Idle cycle cost with every workload pending and parked (nothing changed).
    idle_engine = Engine()
    idle_queues = setup(idle_engine)
    for i in range(total):
        idle_engine.upsert_workload(workload(i, idle_queues[(i // 3) % len(idle_queues)], CLASSES[i % 3]))
    idle_engine.sync()
    idle_engine.schedule(0.0)
    start = time.process_time()
    for tick in range(100):
        idle_engine.schedule(1.0 + tick)
    idle_cycle = (time.process_time() - start) / 100
    spent = sum(cycles)
    ordered = sorted(cycles)
    return {
        "workloads": total,
        "admissions": admitted,
        "preemptions": preempted,
        "cycles": len(cycles),
        "schedule_seconds": spent,
        "reserved_per_second": admitted / spent if spent else 0.0,
        "loop_per_second": admitted / loop_cpu if loop_cpu else 0.0,
        "wall_per_second": admitted / loop_wall if loop_wall else 0.0,
        "attempts_per_second": attempts / spent if spent else 0.0,
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "idle_cycle_ms": idle_cycle * 1000,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workloads", type=int, action="append", help="workload count (repeatable)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per size; the fastest is shown")
    args = parser.parse_args()
    if args.repeat < 1 or any(size < 1 for size in args.workloads or ()):
        parser.error("--workloads and --repeat must be positive")
    sizes = args.workloads or [5_000, 50_000]
    columns = (
        "workloads",
        "reserved",
        "preempted",
        "cycles",
        "reserved/s",
        "loop res/s",
        "wall res/s",
        "decisions/s",
        "p50 ms",
        "p99 ms",
        "idle ms",
        "peak RSS MB",
    )
    print(" ".join(f"{c:>11}" for c in columns))
    for size in sizes:
        r = max((run(size) for _ in range(args.repeat)), key=lambda r: r["reserved_per_second"])
        values = (
            f"{r['workloads']:,.0f}",
            f"{r['admissions']:,.0f}",
            f"{r['preemptions']:,.0f}",
            f"{r['cycles']:,.0f}",
            f"{r['reserved_per_second']:,.0f}",
            f"{r['loop_per_second']:,.0f}",
            f"{r['wall_per_second']:,.0f}",
            f"{r['attempts_per_second']:,.0f}",
            f"{r['p50_ms']:.2f}",
            f"{r['p99_ms']:.2f}",
            f"{r['idle_cycle_ms']:.3f}",
            f"{r['peak_rss_mb']:.0f}",
        )
        print(" ".join(f"{v:>11}" for v in values))


if __name__ == "__main__":
    main()
