"""Kueue's scheduler scalability test (``test/performance/scheduler``) against ``kadmit local``.

    python bench/scalability.py                          # Kueue's baseline config
    python bench/scalability.py --config large-scale --timeout 1500
    python bench/scalability.py --scale 0.05             # 5% of the workloads, for a quick run
    python bench/scalability.py --floor                  # the wall Kueue's rules allow, no cluster
    python bench/scalability.py --floor --runner-write-ms 3   # ... with the runner's writes 3 ms each

It reproduces Kueue's three parts in Python, so kadmit's figures sit beside Kueue's published ones:

* the **generator** (``runner/generator``): one ResourceFlavor ``rf``; per ClusterQueue a
  Namespace and a LocalQueue of the same name; then every workloads set of every queue at once,
  each one Workload at a time, each create preceded by the set's ``creationIntervalMs``. Kueue's
  generator makes no Cohort objects (the ClusterQueues name their cohort) and no
  WorkloadPriorityClasses (a Workload carries ``spec.priority``), so neither does this one;
* the **runner** (``runner/controller``): 5 workers; a Workload seen Admitted is marked
  ``Finished`` (reason ``ByTest``) once its ``performance-scheduler-running-ms`` have passed since
  the runner saw it admitted; an Admitted Workload that is ``Evicted`` gets its quota reservation
  taken back (QuotaReserved=False, reason ``Pending``, no admission, Admitted=False), as a job
  controller would once the job stopped. No pods run;
* the **recorder** (``runner/recorder``) with the **checker** (``checker/checker_test.go``):
  ClusterQueue usage per class, average time to admission per workload class, the wall time, and
  whether each threshold of Kueue's ``rangespec.yaml`` held.

After the run, and alone with ``--floor``, the same plan goes through kadmit's engine in virtual
time with no latency anywhere (:func:`zero_latency_floor`): the wall Kueue's admission rules
leave for this config, which no implementation can beat; the report puts each class's last
finish beside it. It works the plan out once more with the runner's five workers taking the
run's mean write time for each write: in baseline, most of the smalls finish after the mediums,
ten thousand of them in a few seconds, and each is one Finished write by one of five workers.

``kadmit local --no-samples`` runs as a subprocess; the processes measured (CPU seconds and peak
RSS from ``/proc``) are it and its descendants, so the script works whether the API server runs
inside it or as its child (``python -m kadmit.localcluster``). The run ends, as Kueue's recorder
ends it, when generation is done and no active ClusterQueue reports pending or reserving
Workloads -- here also only once every Workload was seen Finished. It exits 0 whatever the
figures (a benchmark, not a test); a run that could not start exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import heapq
import itertools
import json
import math
import multiprocessing
import os
import resource
import shlex
import shutil
import signal
import ssl
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, TextIO

# `python bench/X.py` puts bench/ first on sys.path, where bench/webhook.py would shadow the webhook
# package (bench/engine.py the engine one): drop bench/ and import kadmit from the repository root.
# ruff: noqa: E402 (so kadmit's imports come after this)
HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

import aiohttp
import yaml

from kadmit import workload as ws
from kadmit.controller import collector
from kadmit.controller.cli import CommandError, run_async
from kadmit.controller.commands.local import ENGINE_LINE
from kadmit.engine import Engine
from kadmit.engine.quantity import to_milli
from kadmit.kube import DELETED, MODIFIED, ApiError, Client, Informer, Obj, Workers
from kadmit.kube.resources import (
    CLUSTER_QUEUES,
    ENDPOINTS,
    KUEUE,
    KUEUE_VERSION,
    LOCAL_QUEUES,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    NAMESPACES,
    RESOURCE_FLAVORS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    WORKLOADS,
)
from kadmit.kube.writes import update_status

# -- Kueue's configs: configs/<name>/generator.yaml (copied to bench/kueue-configs/<name>/) and
# rangespec.yaml, and its published figures

KUEUE_CONFIGS = Path(__file__).resolve().parent / "kueue-configs"


CLASS_LABEL = "kueue.x-k8s.io/performance-scheduler-class"
RUNNING_TIME_LABEL = "kueue.x-k8s.io/performance-scheduler-running-ms"
CLEANUP_LABEL = "kueue.x-k8s.io/performance-scheduler-cleanup"
RESOURCE_FLAVOR = "rf"
RUNNER_WORKERS = 5
"""The runner's concurrent reconciles (``GroupKindConcurrency`` for Workload in its ``main.go``)."""
KUEUE_API = f"{KUEUE}/{KUEUE_VERSION}"


@dataclass(frozen=True)
class RangeSpec:
    """Kueue's checker thresholds: a maximum wall time, a minimum ClusterQueue usage per class (% of
    nominal quota), a maximum average time to admission per workload class."""

    max_wall_ms: int
    min_usage_percent: dict[str, float]
    max_avg_time_to_admission_ms: dict[str, int]


@dataclass(frozen=True)
class Published:
    """Kueue's own figures for a config (the means its rangespec was calibrated from)."""

    wall_s: float
    usage_percent: dict[str, float]
    avg_time_to_admission_s: dict[str, float]
    source: str


@dataclass(frozen=True)
class Scenario:
    name: str
    generator: str
    rangespec: RangeSpec
    published: Published
    timeout_s: float  # Kueue's recorder timeout for this config (hack/make/test.mk)


SCENARIOS = {
    "baseline": Scenario(
        "baseline",
        (KUEUE_CONFIGS / "baseline" / "generator.yaml").read_text(),
        RangeSpec(425_000, {"cq": 50.0}, {"large": 23_000, "medium": 90_000, "small": 260_000}),
        Published(351.1, {"cq": 55.9}, {"large": 16.5, "medium": 76.8, "small": 215.5},
                  "Kueue CI: configs/baseline/rangespec.yaml, the mean of 5 runs"),
        600.0,
    ),
    "large-scale": Scenario(
        "large-scale",
        (KUEUE_CONFIGS / "large-scale" / "generator.yaml").read_text(),
        RangeSpec(1_416_000, {"cq": 31.6}, {"large": 128_000, "medium": 308_000, "small": 841_000}),
        Published(1179.4, {"cq": 38.64}, {"large": 105.6, "medium": 256.4, "small": 700.4},
                  "Kueue CI: configs/large-scale/rangespec.yaml, the mean of 19 runs"),
        1800.0,
    ),
}

# -- the generator's config (runner/generator: Config, CohortSet, QueuesSet, WorkloadsSet)


@dataclass(frozen=True)
class WorkloadTemplate:
    class_name: str
    runtime_ms: int
    priority: int
    request: str  # cpu, as a quantity


@dataclass(frozen=True)
class WorkloadsSet:
    count: int
    creation_interval_ms: int
    workloads: tuple[WorkloadTemplate, ...]


@dataclass(frozen=True)
class QueuesSet:
    class_name: str
    count: int
    nominal_quota: str
    borrowing_limit: str
    reclaim_within_cohort: str
    within_cluster_queue: str
    workloads_sets: tuple[WorkloadsSet, ...]


@dataclass(frozen=True)
class CohortSet:
    class_name: str
    count: int
    queues_sets: tuple[QueuesSet, ...]


def parse_generator(text: str) -> tuple[CohortSet, ...]:
    """Kueue's generator.yaml (the fields of its standard, non-TAS mode)."""
    doc = yaml.safe_load(text)
    cohorts = tuple(
        CohortSet(
            str(c["className"]),
            int(c["count"]),
            tuple(
                QueuesSet(
                    str(q["className"]),
                    int(q["count"]),
                    str(q["nominalQuota"]),
                    str(q["borrowingLimit"]),
                    str(q["reclaimWithinCohort"]),
                    str(q["withinClusterQueue"]),
                    tuple(
                        WorkloadsSet(
                            int(s["count"]),
                            int(s["creationIntervalMs"]),
                            tuple(
                                WorkloadTemplate(str(w["className"]), int(w["runtimeMs"]),
                                                 int(w["priority"]), str(w["request"]))
                                for w in s["workloads"]
                            ),
                        )
                        for s in q["workloadsSets"]
                    ),
                )
                for q in c["queuesSets"]
            ),
        )
        for c in doc.get("cohorts") or []
    )
    if not cohorts:
        raise ValueError("config must contain at least one cohort")  # Kueue's LoadConfig says so too
    return cohorts


def scaled(cohorts: tuple[CohortSet, ...], scale: float) -> tuple[CohortSet, ...]:
    """The same queues and pacing with ``scale`` of each workloads set's count (at least one)."""
    if scale == 1:
        return cohorts
    return tuple(
        replace(c, queues_sets=tuple(
            replace(q, workloads_sets=tuple(
                replace(s, count=max(1, round(s.count * scale))) for s in q.workloads_sets))
            for q in c.queues_sets))
        for c in cohorts
    )


# -- the generator's objects (the shapes of Kueue's utiltesting wrappers)


@dataclass(frozen=True)
class WorkloadSetPlan:
    """One workloads set of one queue: created in order, each after ``interval_s``."""

    interval_s: float
    workloads: tuple[Obj, ...]


@dataclass(frozen=True)
class QueuePlan:
    cohort: str
    cluster_queue: Obj
    namespace: Obj
    local_queue: Obj
    workload_sets: tuple[WorkloadSetPlan, ...]

    @property
    def name(self) -> str:
        return str(self.cluster_queue["metadata"]["name"])


@dataclass(frozen=True)
class Plan:
    resource_flavor: Obj
    queues: tuple[QueuePlan, ...]

    def workloads(self) -> Iterator[Obj]:
        for queue in self.queues:
            for workload_set in queue.workload_sets:
                yield from workload_set.workloads

    @property
    def workload_count(self) -> int:
        return sum(len(s.workloads) for q in self.queues for s in q.workload_sets)

    def class_counts(self) -> Counter[str]:
        return Counter(str(w["metadata"]["labels"][CLASS_LABEL]) for w in self.workloads())


def resource_flavor_object(name: str = RESOURCE_FLAVOR) -> Obj:
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor",
            "metadata": {"name": name, "labels": {CLEANUP_LABEL: "true"}}, "spec": {}}


def cluster_queue_object(name: str, cohort: str, queues_set: QueuesSet, flavor: str = RESOURCE_FLAVOR) -> Obj:
    """``MakeClusterQueue(name).Cohort(..).ResourceGroup(rf: cpu nominal, borrowingLimit).Preemption(..)``."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {CLASS_LABEL: queues_set.class_name, CLEANUP_LABEL: "true"}},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
            "resourceGroups": [{
                "coveredResources": ["cpu"],
                "flavors": [{"name": flavor, "resources": [{
                    "name": "cpu",
                    "nominalQuota": queues_set.nominal_quota,
                    "borrowingLimit": queues_set.borrowing_limit,
                }]}],
            }],
            "preemption": {
                "reclaimWithinCohort": queues_set.reclaim_within_cohort,
                "withinClusterQueue": queues_set.within_cluster_queue,
            },
        },
    }


def workload_object(name: str, namespace: str, local_queue: str, template: WorkloadTemplate) -> Obj:
    """``MakeWorkload(name, ns).Queue(lq).Label(running-ms).Label(class).Priority(p).Request(cpu, r)``:
    one pod set ``main`` of one pod, one container ``c`` requesting the cpu."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {RUNNING_TIME_LABEL: str(template.runtime_ms), CLASS_LABEL: template.class_name},
        },
        "spec": {
            "queueName": local_queue,
            "priority": template.priority,
            "podSets": [{
                "name": "main",
                "count": 1,
                "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": template.request}}}],
                }},
            }],
        },
    }


def build_plan(cohorts: tuple[CohortSet, ...]) -> Plan:
    """Every object Kueue's generator creates, with its names: cohort ``<class>-<i>``, ClusterQueue
    (and its Namespace and LocalQueue) ``<class>-<queueSet>-<i>-<cohort>``, Workload
    ``<class>-<workloadsSet>-<n>-<template>``."""
    queues: list[QueuePlan] = []
    for cohort_set in cohorts:
        for cohort_index in range(cohort_set.count):
            cohort = f"{cohort_set.class_name}-{cohort_index}"
            for set_index, queues_set in enumerate(cohort_set.queues_sets):
                for queue_index in range(queues_set.count):
                    name = f"{queues_set.class_name}-{set_index}-{queue_index}-{cohort}"
                    sets = tuple(
                        WorkloadSetPlan(
                            workloads_set.creation_interval_ms / 1000,
                            tuple(
                                workload_object(f"{template.class_name}-{wl_set_index}-{n}-{t}", name, name,
                                                template)
                                for n in range(workloads_set.count)
                                for t, template in enumerate(workloads_set.workloads)
                            ),
                        )
                        for wl_set_index, workloads_set in enumerate(queues_set.workloads_sets)
                    )
                    queues.append(QueuePlan(
                        cohort,
                        cluster_queue_object(name, cohort, queues_set),
                        {"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": name, "labels": {CLEANUP_LABEL: "true"}}},
                        {"apiVersion": KUEUE_API, "kind": "LocalQueue",
                         "metadata": {"name": name, "namespace": name}, "spec": {"clusterQueue": name}},
                        sets,
                    ))
    return Plan(resource_flavor_object(), tuple(queues))


async def generate(client: Client, plan: Plan, on_created: Any = None) -> None:
    """Create everything with Kueue's pacing: every queue at once; in a queue its ClusterQueue,
    Namespace and LocalQueue, then all its workloads sets at once, each set sleeping its interval
    before every create (so a slow create stretches the set, as in Kueue's generator)."""
    await client.create(RESOURCE_FLAVORS, plan.resource_flavor)

    async def workload_set(workload_set: WorkloadSetPlan) -> None:
        for wl in workload_set.workloads:
            await asyncio.sleep(workload_set.interval_s)
            await client.create(WORKLOADS, wl)
            if on_created is not None:
                on_created()

    async def queue(queue: QueuePlan) -> None:
        await client.create(CLUSTER_QUEUES, queue.cluster_queue)
        await client.create(NAMESPACES, queue.namespace)
        await client.create(LOCAL_QUEUES, queue.local_queue)
        async with asyncio.TaskGroup() as group:
            for workload_set_plan in queue.workload_sets:
                group.create_task(workload_set(workload_set_plan))

    async with asyncio.TaskGroup() as group:
        for queue_plan in plan.queues:
            group.create_task(queue(queue_plan))


# -- the floor: the same plan through kadmit's engine alone, with no latency anywhere


FLOOR_EPOCH = 1_800_000_000.0
"""Where the floor's virtual clock starts (POSIX seconds): its timestamps are whole seconds on the
wire, as the API server's are."""


@dataclass(frozen=True)
class Floor:
    """What the plan allows under Kueue's admission rules alone (kadmit's engine, which follows
    them): every create at its planned moment, every admission, eviction and finish at once."""

    wall_s: float
    finished: int  # fewer than the plan's Workloads only if some never fit their ClusterQueue
    admissions: int
    evictions: int
    last_done_s: dict[str, float]  # per workload class: its last finish, after the start
    cpu_s: float  # the simulation's own CPU time


def zero_latency_floor(plan: Plan, runner_write_s: float = 0.0,
                       runner_workers: int = RUNNER_WORKERS) -> Floor:
    """The wall time Kueue's rules leave when nothing takes time: Workloads are created on the
    generator's schedule (each set's ``k``-th after ``k`` intervals), the engine decides at each
    create and finish, a reservation runs its ``runtimeMs`` from that moment, and a preempted
    Workload's quota is free at once (the runner completing its eviction) and it queues again.

    The measured wall minus this floor is what latency and CPU cost; a target below it cannot be
    met by any implementation of these rules.

    ``runner_write_s`` > 0 gives Kueue's runner its cost, and nothing else any: its
    ``runner_workers`` take the Finished writes and the evictions' completions first come, first
    served, each write ``runner_write_s`` long, and a Workload's quota is free when its write ends.
    That is the floor of any admission layer measured with Kueue's harness against an API server
    answering a status write in that time."""
    started_cpu = time.process_time()
    engine = Engine()
    engine.upsert(plan.resource_flavor)
    arrivals: list[tuple[float, int, Obj]] = []
    for queue in plan.queues:
        for obj in (queue.namespace, queue.cluster_queue, queue.local_queue):
            engine.upsert(obj)
        for workload_set in queue.workload_sets:
            for k, wl in enumerate(workload_set.workloads, start=1):
                arrivals.append((k * workload_set.interval_s, len(arrivals), wl))
    arrivals.sort(key=lambda a: (a[0], a[1]))
    runtime_s: dict[tuple[str, str], float] = {}
    class_of: dict[tuple[str, str], str] = {}
    running: dict[tuple[str, str], int] = {}  # the admission number each running Workload is on
    evicting: dict[tuple[str, str], int] = {}  # preempted, holding its quota until the runner's write
    # (when, order, admission number, key, what happens): a running time's end, or a runner write's
    events: list[tuple[float, int, int, tuple[str, str], str]] = []
    workers_free = [0.0] * runner_workers  # when each of the runner's workers is free again
    order = itertools.count()
    last_done: dict[str, float] = {}
    admissions = evictions = finished = next_arrival = 0
    now = 0.0

    def runner_write(key: tuple[str, str], number: int, what: str) -> None:
        """Queue a write for the runner's workers (FIFO: each takes the earliest free worker)."""
        if runner_write_s <= 0:
            heapq.heappush(events, (now, next(order), number, key, what))
            return
        start = max(now, heapq.heappop(workers_free))
        heapq.heappush(workers_free, start + runner_write_s)
        heapq.heappush(events, (start + runner_write_s, next(order), number, key, what))

    while True:
        while next_arrival < len(arrivals) and arrivals[next_arrival][0] <= now:
            _, _, template = arrivals[next_arrival]
            next_arrival += 1
            meta = template["metadata"]
            key = (str(meta["namespace"]), str(meta["name"]))
            labels = meta["labels"]
            runtime_s[key] = running_seconds(template)
            class_of[key] = str(labels[CLASS_LABEL])
            engine.upsert_workload({**template, "metadata": {
                **meta, "uid": f"{key[0]}/{key[1]}", "creationTimestamp": ws.format_time(FLOOR_EPOCH + now)}})
        while events and events[0][0] <= now:
            _, _, number, key, what = heapq.heappop(events)
            if what == "ran" and running.get(key) == number:  # not a run cut short by a preemption
                runner_write(key, number, "finished")
            elif what == "finished" and running.get(key) == number:
                del running[key]
                engine.finish(*key)
                finished += 1
                last_done[class_of[key]] = now
            elif what == "unreserved" and evicting.get(key) == number:
                del evicting[key]
                engine.release(*key)
        decided = True
        while decided:  # what the engine decides now, and again once its victims are gone
            decisions = engine.schedule(FLOOR_EPOCH + now)
            for reservation in decisions.reservations:
                admissions += 1
                running[reservation.workload] = admissions
                heapq.heappush(events, (now + runtime_s[reservation.workload], next(order), admissions,
                                        reservation.workload, "ran"))
            released = 0
            for preemption in decisions.preemptions:
                number = running.pop(preemption.victim, None)
                if number is None:
                    continue
                evictions += 1
                if runner_write_s > 0:
                    evicting[preemption.victim] = number
                    runner_write(preemption.victim, number, "unreserved")
                else:
                    engine.release(*preemption.victim)
                    released += 1
            decided = decisions.more or released > 0
        upcoming = [t for t in (arrivals[next_arrival][0] if next_arrival < len(arrivals) else None,
                                events[0][0] if events else None) if t is not None]
        if not upcoming:
            break
        now = min(upcoming)
    return Floor(now, finished, admissions, evictions, last_done, time.process_time() - started_cpu)


# -- the recorder (runner/recorder) and the bench's own view of what fits

PENDING, HOLDING, EVICTING, DONE = "pending", "holding", "evicting", "done"
"""A Workload's state for the fit tracker; EVICTING: Evicted=True and still admitted (it holds
its quota until the runner, as a job controller, completes the eviction)."""


def request_milli(wl: Obj) -> int:
    """The cpu the Workload asks for, in milli-cpu (all pods of all pod sets)."""
    total = 0
    for pod_set in (wl.get("spec") or {}).get("podSets") or []:
        per_pod = 0
        for container in ((pod_set.get("template") or {}).get("spec") or {}).get("containers") or []:
            cpu = ((container.get("resources") or {}).get("requests") or {}).get("cpu")
            if cpu is not None:
                per_pod += to_milli("cpu", cpu)
        total += per_pod * int(pod_set.get("count") or 1)
    return total


def running_seconds(wl: Obj) -> float:
    """The running time the generator gave the Workload (its label, in ms); 0 if unreadable."""
    try:
        return int((wl["metadata"].get("labels") or {}).get(RUNNING_TIME_LABEL, "0")) / 1000
    except ValueError:
        return 0.0


def condition_time(obj: Obj, kind: str) -> float | None:
    condition = ws.find_condition(obj, kind)
    if condition is None:
        return None
    try:
        return ws.parse_time(condition.get("lastTransitionTime"))
    except ValueError:
        return None


@dataclass
class WorkloadRecord:
    """Kueue's WLState, plus what the bench needs to know about fitting and precise timing."""

    class_name: str
    cluster_queue: str
    name: str
    request_milli: int
    first_event: float
    admitted: bool = False
    evicted: bool = False
    finished: bool = False
    time_to_admit_ms: int = 0  # Kueue's formula (API timestamps, whole seconds, when sane)
    watched_time_to_admit: float | None = None  # the same from watch events (this clock, not rounded)
    time_to_finish_ms: int = 0
    evictions: int = 0
    admissions: int = 0
    state: str = PENDING
    state_since: float = 0.0  # when the bench saw it enter that state
    running_s: float = 0.0


@dataclass
class ClusterQueueRecord:
    """Kueue's CQState: usage integrated over time between the ClusterQueue's events."""

    class_name: str
    cohort: str
    quota_milli: int
    first_event: float
    last_event: float
    usage_milli: int = 0
    cpu_used: int = 0  # milli-cpu x ms
    max_usage_milli: int = 0
    pending: int = 0
    reserving: int = 0
    admitted: int = 0
    active: bool = False


class Gap:
    """Time with no admission while something holds: when the one going on began, the longest."""

    def __init__(self) -> None:
        self.holds_since: float | None = None
        self.longest = 0.0
        self.longest_start = 0.0

    def hold(self, holds: bool, now: float) -> None:
        if holds and self.holds_since is None:
            self.holds_since = now
        elif not holds:
            self.holds_since = None

    def start(self, last_admission: float | None) -> float | None:
        """When the gap going on now began (it holds and nothing was admitted since), or None."""
        if self.holds_since is None:
            return None
        return max(self.holds_since, last_admission or self.holds_since)

    def close(self, now: float, last_admission: float | None) -> None:
        start = self.start(last_admission)
        if start is not None and now - start > self.longest:
            self.longest, self.longest_start = now - start, start


class QuotaTime:
    """Where the cohorts' quota went once generation was done, in milli-CPU seconds per second of
    the run, from the watched states: held within a Workload's running time (the only useful
    part), held past it until the Finished was seen (the runner's queue and write), held while
    evicted until the runner took the reservation back, free while a pending Workload fitted there
    (the admission layer's latency), and free with nothing that fits. The five add up to the
    cohorts' nominal quota times the window."""

    PARTS = ("running", "past its running time", "evicted", "free while a workload fitted",
             "free, nothing fitted")

    def __init__(self) -> None:
        self.start: float | None = None
        self.end: float | None = None
        self.seconds: list[dict[str, float]] = []  # second k after the start: milli-CPU s per part

    def open(self, now: float) -> None:
        self.start = now

    def close(self, now: float) -> None:
        if self.start is not None and self.end is None:
            self.end = now

    def _add(self, part: str, milli: int, since: float, until: float) -> None:
        if self.start is None:
            return
        since = max(since, self.start) - self.start
        until = (min(until, self.end) if self.end is not None else until) - self.start
        while until > since:
            second = int(since)
            while len(self.seconds) <= second:
                self.seconds.append(dict.fromkeys(self.PARTS, 0.0))
            step = min(until, second + 1) - since
            self.seconds[second][part] += milli * step
            since += step

    def held(self, milli: int, since: float, until: float, running_s: float) -> None:
        self._add("running", milli, since, min(until, since + running_s))
        self._add("past its running time", milli, since + running_s, until)

    def evicted(self, milli: int, since: float, until: float) -> None:
        self._add("evicted", milli, since, until)

    def free(self, milli: int, fitted: bool, since: float, until: float) -> None:
        self._add("free while a workload fitted" if fitted else "free, nothing fitted", milli, since, until)

    def milli_s(self, since: float | None = None, until: float | None = None) -> dict[str, float]:
        """Each part's total between two moments (whole seconds of the window; all of it by default)."""
        total = dict.fromkeys(self.PARTS, 0.0)
        if self.start is None:
            return total
        first = 0 if since is None else max(round(since - self.start), 0)
        last = len(self.seconds) if until is None else round(until - self.start)
        for second in self.seconds[first:last]:
            for part, value in second.items():
                total[part] += value
        return total

    def shares(self, since: float | None = None, until: float | None = None) -> dict[str, float]:
        parts = self.milli_s(since, until)
        total = sum(parts.values())
        return {part: value / total for part, value in parts.items()} if total else {}


class FitTracker:
    """Whether some pending Workload fits in free quota now (no preemption), from the watched
    states: a stall is time with no admission while that holds.

    A cohort's capacity is the sum of its ClusterQueues' nominal quotas; a ClusterQueue may use
    up to its nominal quota plus its borrowing limit. Kept incrementally: a change re-evaluates
    one ClusterQueue and its cohort.

    A second measure leaves out the cohorts with an eviction in flight: there a preemptor's
    quota is reserved in each cycle until its victims give theirs back (Kueue's scheduler does
    the same: the preemptor keeps finding its evicted victims as targets and adds its usage to the
    cycle's snapshot), which this quota-only view cannot see.
    """

    def __init__(self, queues: tuple[QueuePlan, ...]) -> None:
        self.cohort_of: dict[str, str] = {}
        self.limit: dict[str, int] = {}
        self.capacity: Counter[str] = Counter()
        for queue in queues:
            quota = queue.cluster_queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
            nominal = to_milli("cpu", quota["nominalQuota"])
            self.cohort_of[queue.name] = queue.cohort
            self.limit[queue.name] = nominal + to_milli("cpu", quota.get("borrowingLimit", "0"))
            self.capacity[queue.cohort] += nominal
        self.used: Counter[str] = Counter()
        self.cohort_used: Counter[str] = Counter()
        self.pending: dict[str, Counter[int]] = {name: Counter() for name in self.cohort_of}
        self.eligible: dict[str, Counter[int]] = {cohort: Counter() for cohort in self.capacity}
        self._eligible_of: dict[str, set[int]] = {name: set() for name in self.cohort_of}
        self._fitting: set[str] = set()
        self.last_admission: float | None = None
        self.gap = Gap()  # something fits
        self.evicting: Counter[str] = Counter()  # per cohort
        self._settled: set[str] = set()  # fitting cohorts without an eviction in flight
        self.settled_gap = Gap()  # something fits in a cohort with no eviction in flight
        self.quota_time = QuotaTime()
        self._accounted: dict[str, float] = {}  # per cohort: its free quota is accounted up to then

    def move(self, cluster_queue: str, request: int, old: str | None, new: str, now: float) -> None:
        if cluster_queue not in self.cohort_of or old == new:
            return
        cohort = self.cohort_of[cluster_queue]
        self._account(cohort, now)
        for state, sign in ((old, -1), (new, 1)):
            if state == PENDING:
                self.pending[cluster_queue][request] += sign
            elif state in (HOLDING, EVICTING):
                self.used[cluster_queue] += sign * request
                self.cohort_used[cohort] += sign * request
                if state == EVICTING:
                    self.evicting[cohort] += sign
        self._refresh(cluster_queue, cohort, now)

    def _refresh(self, cluster_queue: str, cohort: str, now: float) -> None:
        headroom = self.limit[cluster_queue] - self.used[cluster_queue]
        eligible = {r for r, n in self.pending[cluster_queue].items() if n > 0 and r <= headroom}
        before = self._eligible_of[cluster_queue]
        for r in before - eligible:
            self.eligible[cohort][r] -= 1
        for r in eligible - before:
            self.eligible[cohort][r] += 1
        self._eligible_of[cluster_queue] = eligible
        free = self.capacity[cohort] - self.cohort_used[cohort]
        if any(n > 0 and r <= free for r, n in self.eligible[cohort].items()):
            self._fitting.add(cohort)
        else:
            self._fitting.discard(cohort)
        self.gap.hold(bool(self._fitting), now)
        if cohort in self._fitting and not self.evicting[cohort]:
            self._settled.add(cohort)
        else:
            self._settled.discard(cohort)
        self.settled_gap.hold(bool(self._settled), now)

    def _account(self, cohort: str, now: float) -> None:
        """The cohort's free quota since its last change, as it was then."""
        since = self._accounted.get(cohort, self.quota_time.start or now)  # untouched: as it began
        free = self.capacity[cohort] - self.cohort_used[cohort]
        if free > 0:
            self.quota_time.free(free, cohort in self._fitting, since, now)
        self._accounted[cohort] = now

    def admission(self, now: float) -> None:
        """Called before the admitted Workload's state moves: the gap that ends here counts if
        something fitted all along since it began."""
        self._close_gap(now)
        self.last_admission = now

    def _close_gap(self, now: float) -> None:
        self.gap.close(now, self.last_admission)
        self.settled_gap.close(now, self.last_admission)

    def end(self, now: float) -> None:
        self._close_gap(now)
        for cohort in self.capacity:
            self._account(cohort, now)
        self.quota_time.close(now)

    def gap_start(self) -> float | None:
        """When the stall going on now began, or None."""
        return self.gap.start(self.last_admission)

    def fitting(self) -> list[tuple[str, int, str, int]]:
        """What fits now: (cohort, its free milli-cpu, a ClusterQueue, a request that fits there)."""
        found = []
        for cohort in sorted(self._fitting):
            free = self.capacity[cohort] - self.cohort_used[cohort]
            for cluster_queue in sorted(q for q, c in self.cohort_of.items() if c == cohort):
                for request in sorted(self._eligible_of[cluster_queue]):
                    if request <= free:
                        found.append((cohort, free, cluster_queue, request))
        return found


class Recorder:
    """Kueue's recorder: a record per Workload and per ClusterQueue from the watches, and the end
    condition (generation done, every Workload finished, every active ClusterQueue reporting
    ``pendingWorkloads == 0 and reservingWorkloads == 0``)."""

    def __init__(self, plan: Plan, clock: Any = time.time) -> None:
        self.plan = plan
        self.clock = clock
        self.expected = plan.workload_count
        self.workloads: dict[str, WorkloadRecord] = {}
        self.cluster_queues: dict[str, ClusterQueueRecord] = {}
        self._unseen_queues = {q.name for q in plan.queues}
        """The plan's ClusterQueues no event has shown yet."""
        self._busy_queues: set[str] = set()
        """The active ClusterQueues whose last status counts pending or reserving Workloads."""
        self.fits = FitTracker(plan.queues)
        self.admission_times: list[float] = []
        self.created = 0
        self.finished = 0
        self.generation_done: float | None = None
        self.last_finish: float | None = None
        self.empty_while_unfinished = 0  # times the ClusterQueues said empty before all had finished
        self.ended = asyncio.Event()
        self.ended_at: float | None = None

    # Workloads (RecordWorkloadState / recordWLEvent)

    def on_workload(self, event: str, wl: Obj, old: Obj | None) -> None:
        if event == DELETED:
            return
        now = self.clock()
        meta = wl["metadata"]
        uid = str(meta.get("uid") or f"{meta.get('namespace')}/{meta['name']}")
        record = self.workloads.get(uid)
        if record is None:
            record = self.workloads[uid] = WorkloadRecord(
                str((meta.get("labels") or {}).get(CLASS_LABEL, "")), str(meta.get("namespace", "")),
                str(meta["name"]), request_milli(wl), now, running_s=running_seconds(wl))
            previous_state: str | None = None
        else:
            previous_state = record.state
        admitted, evicted, finished = (ws.is_true(wl, ws.ADMITTED), ws.is_true(wl, ws.EVICTED),
                                       ws.is_true(wl, ws.FINISHED))
        if admitted and not record.admitted:
            created = _time_or_none(meta.get("creationTimestamp"))
            admitted_at = condition_time(wl, ws.ADMITTED)
            if created is not None and admitted_at is not None and admitted_at >= created:
                record.time_to_admit_ms = round((admitted_at - created) * 1000)
            else:
                record.time_to_admit_ms = round((now - record.first_event) * 1000)
            record.watched_time_to_admit = now - record.first_event
            record.admissions += 1
            self.admission_times.append(now)
            self.fits.admission(now)
        if evicted and not record.evicted:
            record.evictions += 1
        if finished and not record.finished:
            record.time_to_finish_ms = round((now - record.first_event) * 1000)
            self.finished += 1
            self.last_finish = now
        record.admitted, record.evicted, record.finished = admitted, evicted, finished
        record.state = DONE if finished else (EVICTING if evicted else HOLDING) if admitted else PENDING
        if record.state != previous_state:
            self._left(record, previous_state, now)
            record.state_since = now
        self.fits.move(record.cluster_queue, record.request_milli, previous_state, record.state, now)
        if finished and self.finished == self.expected:
            self.check_end()

    def _left(self, record: WorkloadRecord, state: str | None, now: float) -> None:
        """Account the quota the Workload held in the state it leaves."""
        if state == HOLDING:
            self.fits.quota_time.held(record.request_milli, record.state_since, now, record.running_s)
        elif state == EVICTING:
            self.fits.quota_time.evicted(record.request_milli, record.state_since, now)

    def end(self, now: float) -> None:
        """Close the stall and quota figures; what still holds quota counts up to now."""
        self.fits.end(now)
        for record in self.workloads.values():
            self._left(record, record.state, now)
            record.state_since = now

    # ClusterQueues (RecordCQState / recordCQEvent)

    def on_cluster_queue(self, event: str, cq: Obj, old: Obj | None) -> None:
        if event == DELETED:
            return
        now = self.clock()
        name = cq["metadata"]["name"]
        status = cq.get("status") or {}
        usage = _first_total(status.get("flavorsUsage"))
        quota = _first_nominal_quota(cq)
        record = self.cluster_queues.get(name)
        if record is None:
            record = self.cluster_queues[name] = ClusterQueueRecord(
                str((cq["metadata"].get("labels") or {}).get(CLASS_LABEL, "")),
                str((cq.get("spec") or {}).get("cohortName", "")), quota, now, now)
        elif record.usage_milli > 0:
            record.cpu_used += record.usage_milli * int((now - record.last_event) * 1000)
        record.last_event, record.usage_milli, record.quota_milli = now, usage, quota
        record.max_usage_milli = max(record.max_usage_milli, usage)
        record.pending = int(status.get("pendingWorkloads") or 0)
        record.reserving = int(status.get("reservingWorkloads") or 0)
        record.admitted = int(status.get("admittedWorkloads") or 0)
        record.active = ws.is_true(cq, ws.ACTIVE)
        self._unseen_queues.discard(name)
        if (record.pending > 0 or record.reserving > 0) and record.active:
            self._busy_queues.add(name)
        else:
            self._busy_queues.discard(name)
        self.check_end()

    def expect_more_events(self) -> bool:
        """Kueue's ``expectMoreEvents``: some active ClusterQueue still has pending or reserving
        Workloads (kept as a set on each ClusterQueue event: asked on every one, a walk over the
        1,000 ClusterQueues of large-scale took 8 % of this bench's CPU)."""
        return bool(self._unseen_queues or self._busy_queues)

    def check_end(self) -> None:
        if self.ended.is_set() or self.generation_done is None or self.expect_more_events():
            return
        if self.finished < self.expected:
            self.empty_while_unfinished += 1
            return
        self.ended_at = self.clock()
        self.ended.set()


def _time_or_none(value: Any) -> float | None:
    try:
        return ws.parse_time(value)
    except ValueError:
        return None


def _first_nominal_quota(cq: Obj) -> int:
    """``spec.resourceGroups[0].flavors[0].resources[0].nominalQuota`` in milli-cpu."""
    try:
        return to_milli("cpu", cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"])
    except (KeyError, IndexError, TypeError, ValueError):
        return 0


def _first_total(flavors: Any) -> int:
    """``status.flavorsUsage[0].resources[0].total`` in milli-cpu, as Kueue's recorder reads it."""
    try:
        return to_milli("cpu", flavors[0]["resources"][0]["total"])
    except (KeyError, IndexError, TypeError, ValueError):
        return 0


# -- the runner (runner/controller): 5 workers finishing and un-reserving Workloads


class Runner:
    """Kueue's test reconciler: finish an Admitted Workload after its running time, and complete
    an eviction by taking the quota reservation back."""

    def __init__(self, client: Client, workloads: Informer, workers: int = RUNNER_WORKERS) -> None:
        self.client = client
        self.workloads = workloads
        self.admitted_at: dict[str, float] = {}
        self.workers: Workers[tuple[str, str]] = Workers("scalability-runner", self.reconcile, count=workers)
        self.finishes = 0
        self.unreservations = 0
        self.write_seconds: list[float] = []  # each status write, conflict retries included
        self.finish_written: dict[tuple[str, str], str] = {}  # the resourceVersion each Finished got
        self.late_seconds: dict[str, list[float]] = {}
        """Per workload class: from the end of each running time to its Finished write starting
        (the wait for one of the workers, and the timer's slack)."""
        workloads.add_handler(self.on_workload)

    def on_workload(self, event: str, wl: Obj, old: Obj | None) -> None:
        """The predicate: remember when each Workload was first seen admitted (on updates), and
        reconcile the admitted, unfinished ones."""
        if event == DELETED:
            return
        meta = wl["metadata"]
        admitted = ws.is_true(wl, ws.ADMITTED)
        if event == MODIFIED:
            uid = str(meta.get("uid"))
            if admitted and uid not in self.admitted_at:
                self.admitted_at[uid] = time.time()
            elif not admitted:
                self.admitted_at.pop(uid, None)
        if admitted and not ws.is_true(wl, ws.FINISHED):
            self.workers.queue.add((str(meta.get("namespace")), str(meta["name"])))

    async def reconcile(self, key: tuple[str, str]) -> None:
        wl = self.workloads.get(*key)
        if wl is None:
            return
        generation = wl["metadata"].get("generation")
        if ws.is_true(wl, ws.EVICTED):
            if await self._write(wl, lambda s: unset_quota_reservation(
                    s, "Pending", "Evicted by the test runner", time.time(), generation)):
                self.unreservations += 1
            return
        admitted = ws.find_condition(wl, ws.ADMITTED)
        if admitted is None or admitted.get("status") != "True":
            return
        since = self.admitted_at.get(str(wl["metadata"].get("uid"))) or condition_time(wl, ws.ADMITTED)
        remaining = running_seconds(wl) - (time.time() - (since or 0.0))
        if remaining > 0:
            self.workers.queue.add_after(key, remaining)
            return
        class_name = str((wl["metadata"].get("labels") or {}).get(CLASS_LABEL, ""))
        self.late_seconds.setdefault(class_name, []).append(-remaining)
        written = await self._write(wl, lambda s: ws.set_condition(
            s, ws.FINISHED, "True", "ByTest", "By test runner", time.time(), observed_generation=generation))
        if written is not None:
            self.finishes += 1
            self.finish_written[key] = str(written["metadata"].get("resourceVersion"))

    async def _write(self, wl: Obj, mutate: Callable[[Obj], bool]) -> Obj | None:
        started = time.perf_counter()
        try:
            return await update_status(self.client, WORKLOADS, wl, mutate)
        finally:
            self.write_seconds.append(time.perf_counter() - started)


def unset_quota_reservation(status: Obj, reason: str, message: str, now: float,
                            generation: int | None = None) -> bool:
    """Kueue's ``UnsetQuotaReservationWithCondition``: QuotaReserved=False, no admission, and
    Admitted=False (NoReservation) if it was true (``SyncAdmittedCondition``)."""
    changed = ws.set_condition(status, ws.QUOTA_RESERVED, "False", reason, message, now,
                               observed_generation=generation)
    if status.pop("admission", None) is not None:
        changed = True
    if ws.is_true(status, ws.ADMITTED):
        ws.set_condition(status, ws.ADMITTED, "False", "NoReservation", "The workload has no reservation",
                         now, observed_generation=generation)
        changed = True
    return changed


# -- the processes measured, from /proc

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
API_SERVER_MARK = "kadmit.localcluster"


@dataclass
class ProcessRecord:
    pid: int
    cmdline: list[str]
    cpu_s: float = 0.0
    cpu_at_ready: float = 0.0
    peak_rss_kb: int = 0
    alive: bool = True

    @property
    def is_api_server(self) -> bool:
        return any(API_SERVER_MARK in part for part in self.cmdline)


class ProcessWatcher:
    """The ``kadmit local`` process and its descendants: CPU seconds (utime + stime) and peak RSS
    (VmHWM), sampled until each ends (a process's counters vanish with it)."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.processes: dict[int, ProcessRecord] = {}

    def descendants(self) -> list[int]:
        children: dict[int, list[int]] = {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            stat = _stat_fields(int(entry.name))
            if stat is not None:
                children.setdefault(int(stat[1]), []).append(int(entry.name))
        found, todo = [], [self.root]
        while todo:
            pid = todo.pop()
            found.append(pid)
            todo.extend(children.get(pid, []))
        return found

    def sample(self) -> None:
        seen = set()
        for pid in self.descendants():
            stat = _stat_fields(pid)
            if stat is None:
                continue
            record = self.processes.get(pid)
            if record is None:
                record = self.processes[pid] = ProcessRecord(pid, _cmdline(pid))
            record.cpu_s = (int(stat[11]) + int(stat[12])) / CLOCK_TICKS
            record.peak_rss_kb = max(record.peak_rss_kb, _peak_rss_kb(pid))
            seen.add(pid)
        for pid, record in self.processes.items():
            if pid not in seen:
                record.alive = False

    def mark_ready(self) -> None:
        self.sample()
        for record in self.processes.values():
            record.cpu_at_ready = record.cpu_s

    def role(self, record: ProcessRecord) -> str:
        if record.is_api_server:
            return "API server"
        if record.pid == self.root:
            separate = any(r.is_api_server for r in self.processes.values())
            return "kadmit" if separate else "kadmit + API server (one process)"
        return " ".join(Path(part).name for part in record.cmdline[:3]) or str(record.pid)

    def measured(self) -> list[ProcessRecord]:
        """The root and every descendant that ran Python (a helper shell is not worth a line)."""
        return [r for r in self.processes.values()
                if r.pid == self.root or r.is_api_server or "python" in " ".join(r.cmdline[:1])]

    def alive_pids(self) -> list[int]:
        return [pid for pid in self.descendants() if pid in self.processes]


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command name: [0] state, [1] ppid, [11] utime, [12] stime."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def _peak_rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        return [part for part in raw.decode(errors="replace").split("\0") if part]
    except OSError:
        return []


# -- py-spy, optionally, on every measured process


@dataclass
class Profile:
    role: str
    path: Path
    process: asyncio.subprocess.Process


async def start_profiles(
    watcher: ProcessWatcher, duration: int, directory: Path, gil: bool = False
) -> list[Profile]:
    py_spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if py_spy is None:
        print("--py-spy: py-spy is not installed (pip install py-spy); no profile taken", flush=True)
        return []
    watcher.sample()
    profiles = []
    for record in watcher.measured():
        role = watcher.role(record)
        path = directory / f"{_slug(role)}-{record.pid}.speedscope.json"
        process = await asyncio.create_subprocess_exec(
            py_spy, "record", "--pid", str(record.pid), "--duration", str(duration), "--rate", "100",
            "--format", "speedscope", "--output", str(path), *(["--gil"] if gil else []),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        profiles.append(Profile(role, path, process))
    return profiles


def _slug(text: str) -> str:
    return "-".join("".join(c if c.isalnum() else " " for c in text.lower()).split())


_AREAS = (
    ("/localcluster/", "API server"), ("/webhook/", "kadmit webhook"), ("/engine/", "kadmit engine"),
    ("/controller/", "kadmit controller"), ("/kube/", "kadmit kube client"), ("/checks/", "kadmit checks"),
    ("/certs/", "kadmit certs"), ("kadmit/workload.py", "kadmit controller"),
)
_ENTRY = ("commands/local.py", "controller/cli.py", "kadmit/__main__.py")  # on every stack: not news


def summarize_speedscope(path: Path, top: int = 12) -> list[str]:
    """Lines for a py-spy profile: busy seconds per thread, the share of busy time per part of the
    process (the innermost kadmit package on the stack: the API server's, the webhook's, ...), the
    functions on top of the stack (self) and kadmit's functions anywhere on it (inclusive).

    py-spy leaves idle threads out, but counts a ThreadPoolExecutor worker waiting for work as
    busy; those samples are dropped here.
    """
    doc = json.loads(path.read_text())
    frames = doc["shared"]["frames"]
    self_seconds: Counter[int] = Counter()
    total_seconds: Counter[int] = Counter()
    areas: Counter[str] = Counter()
    threads: list[str] = []
    busy = 0.0
    for profile in doc["profiles"]:
        thread_busy = 0.0
        for stack, weight in zip(profile["samples"], profile["weights"], strict=False):
            if not stack or _waiting_for_work(frames[stack[-1]]):
                continue
            thread_busy += weight
            self_seconds[stack[-1]] += weight
            for index in set(stack):
                total_seconds[index] += weight
            areas[_area(frames, stack)] += weight
        busy += thread_busy
        if thread_busy >= 0.5:  # py-spy names them 'Thread <id> "<name>"'
            name = str(profile["name"]).split('"')
            threads.append(f"{name[1] if len(name) > 1 else name[0]} {thread_busy:.1f} s")
    if not busy:
        return ["  (no busy samples)"]

    def label(index: int) -> str:
        frame = frames[index]
        where = str(frame.get("file") or "")
        for marker in ("site-packages/", "/work/", "lib/python3"):
            if marker in where:
                where = where.split(marker, 1)[1]
                break
        return f"{frame.get('name')} ({where}:{frame.get('line', '')})"

    lines = [f"  busy: {', '.join(threads)}; by part (innermost kadmit package on the stack): "
             + ", ".join(f"{area} {100 * n / busy:.0f}%" for area, n in areas.most_common())]
    lines.append("  self (on top of the stack):")
    lines += [f"    {100 * n / busy:5.1f}%  {label(i)}" for i, n in self_seconds.most_common(top)]
    lines.append("  inclusive (anywhere on the stack), kadmit's own functions:")
    own = [(i, n) for i, n in total_seconds.most_common()
           if not _area(frames, [i]).startswith("other")]
    lines += [f"    {100 * n / busy:5.1f}%  {label(i)}" for i, n in own[:top]]
    return lines


def _waiting_for_work(frame: Any) -> bool:
    where = str(frame.get("file", ""))
    return bool(frame.get("name") == "_worker" and where.endswith("concurrent/futures/thread.py"))


def _area(frames: list[Any], stack: list[int]) -> str:
    for index in reversed(stack):
        where = str(frames[index].get("file") or "")
        if any(entry in where for entry in _ENTRY):
            continue
        for marker, area in _AREAS:
            if marker in where:
                return area
    return "other (event loop, sockets, TLS)"


# -- the run


@dataclass
class Outcome:
    scenario: Scenario
    scale: float
    plan: Plan
    recorder: Recorder
    runner: Runner
    watcher: ProcessWatcher
    started: float
    ready: float
    generation_started: float
    timed_out: bool
    bench_cpu_s: float
    loop_lag: LoopLag
    webhook: WebhookProbe
    machine_busy_s: float  # CPU seconds the whole machine spent busy while recording
    diagnosis: list[str]
    profile_lines: dict[str, list[str]] = field(default_factory=dict)
    error: str | None = None
    engine: str = ""  # as kadmit local reports its build: "compiled by mypyc" or "interpreted (...)"
    floor: Floor | None = None  # the plan with no latency, worked out once kadmit local stopped
    runner_floor: Floor | None = None  # the same, with the runner's writes as long as this run's (mean)

    @property
    def end(self) -> float:
        return self.recorder.ended_at or self.recorder.clock()


async def run(args: argparse.Namespace) -> int:
    scenario = SCENARIOS[args.config]
    plan = build_plan(scaled(parse_generator(scenario.generator), args.scale))
    if args.floor:
        runner_write_s = args.runner_write_ms / 1000
        report_floor(scenario, args.scale, plan, zero_latency_floor(plan, runner_write_s), runner_write_s,
                     sys.stdout)
        return 0
    timeout = args.timeout if args.timeout is not None else scenario.timeout_s
    workdir = Path(tempfile.mkdtemp(prefix="kadmit-scalability-"))
    kubeconfig = workdir / "kubeconfig"
    print(f"Kueue's scheduler scalability test, config {scenario.name}"
          f"{f', scale {args.scale:g}' if args.scale != 1 else ''}: {len(plan.queues)} ClusterQueues in "
          f"{len({q.cohort for q in plan.queues})} cohorts, {plan.workload_count:,} workloads "
          f"({', '.join(f'{c} {n:,}' for c, n in sorted(plan.class_counts().items()))}); "
          f"timeout {timeout:.0f} s", flush=True)
    log_path = workdir / "kadmit-local.log"
    # Kueue's runner is Go; this one is Python and holds every Workload it watches: without
    # kadmit's collector policy it spent about 30 % of its CPU in garbage collection in
    # large-scale, with pauses over a second that delayed its Finished writes.
    collector.configure()
    collector.freeze()
    started = time.time()
    with log_path.open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            *shlex.split(args.kadmit_command), "local", "--no-samples", "--kubeconfig", str(kubeconfig),
            *shlex.split(args.kadmit_args or ""),
            # In the work directory: `python -m` puts the current directory first on sys.path, so
            # started from a checkout it would import that checkout's kadmit, not the command's.
            stdout=asyncio.subprocess.PIPE, stderr=log, start_new_session=True, cwd=workdir)
    watcher = ProcessWatcher(process.pid)
    outcome: Outcome | None = None
    try:
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), 180)
        except TimeoutError:
            line = b""
        if b"ready" not in line:
            print(f"kadmit local did not start: {line.decode().strip() or 'no ready line'}; its log:\n"
                  + _tail(log_path), flush=True)
            return 1
        ready = time.time()
        watcher.mark_ready()
        engine = await _engine_reported(process.stdout)
        stdout_drain = asyncio.create_task(_drain(process.stdout))
        outcome = await measure(args, scenario, plan, kubeconfig, watcher, started, ready, timeout, workdir)
        outcome.engine = engine
        stdout_drain.cancel()
    finally:
        await stop(process, watcher)
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if outcome is not None:
        outcome.floor = zero_latency_floor(plan)  # after the run: its CPU takes nothing from it
        if outcome.runner.write_seconds:
            outcome.runner_floor = zero_latency_floor(plan, statistics.fmean(outcome.runner.write_seconds))
        report(outcome, sys.stdout)
    if args.keep:
        print(f"\nkept {workdir} (kubeconfig, kadmit-local.log, profiles)", flush=True)
    return 0


async def measure(args: argparse.Namespace, scenario: Scenario, plan: Plan, kubeconfig: Path,
                  watcher: ProcessWatcher, started: float, ready: float, recording_s: float,
                  workdir: Path) -> Outcome:
    recorder = Recorder(plan)
    bench_cpu_start = time.process_time()
    machine_busy_start = machine_busy_seconds()
    # Kueue's clients have no deadline: a create that waits its turn on a busy server is slow, not
    # failed. Here the recording timeout bounds every call instead.
    async with await Client.connect(kubeconfig, request_timeout=recording_s) as generator_client, \
            await Client.connect(kubeconfig, request_timeout=recording_s) as runner_client:
        workloads = Informer(runner_client, WORKLOADS)
        cluster_queues = Informer(runner_client, CLUSTER_QUEUES)
        workloads.add_handler(recorder.on_workload)
        runner = Runner(runner_client, workloads)
        cluster_queues.add_handler(recorder.on_cluster_queue)
        for informer in (workloads, cluster_queues):
            await informer.start()
        async with asyncio.timeout(60):
            await asyncio.gather(workloads.wait_synced(), cluster_queues.wait_synced())
        await runner.workers.start()
        sampler = asyncio.create_task(_sample_every(watcher, 1.0))
        progress = asyncio.create_task(_progress(recorder, runner, started, args.progress))
        stalls = asyncio.create_task(_describe_stalls(recorder, workloads, started))
        loop_lag = LoopLag()
        lag_probe = asyncio.create_task(loop_lag.run())
        webhook_probe = WebhookProbe(args.webhook_probe)
        workloads.add_handler(webhook_probe.on_workload)
        await webhook_probe.start(runner_client)
        if args.without_webhooks:
            removed = await remove_webhooks(runner_client)
            print(f"without webhooks, as Kueue's harness: kadmit's {removed} webhooks deleted from the "
                  "API server's configuration", flush=True)

        def created() -> None:
            recorder.created += 1

        generation_started = time.time()
        generation = asyncio.create_task(generate(generator_client, plan, created))
        generation.add_done_callback(lambda _: _generation_done(recorder))
        profiles_task = asyncio.create_task(_profile_later(watcher, args, workdir)) if args.py_spy else None
        ended = asyncio.create_task(recorder.ended.wait())
        error = None
        timed_out = False
        try:
            async with asyncio.timeout(recording_s):
                await asyncio.wait({ended, generation}, return_when=asyncio.FIRST_COMPLETED)
                if generation.done() and not generation.cancelled() and generation.exception() is not None:
                    raise generation.exception()  # type: ignore[misc]
                await ended
        except TimeoutError:
            timed_out = True
        except Exception as exc:  # the generator's create failed: report what was measured
            leaves = _leaves(exc)
            error = f"generation failed ({len(leaves)} creates), first: {leaves[0]!r}"
        recorder.end(recorder.ended_at or time.time())
        watcher.sample()
        bench_cpu = time.process_time() - bench_cpu_start
        machine_busy = machine_busy_seconds() - machine_busy_start
        for task in (sampler, progress, stalls, lag_probe, generation, ended):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await webhook_probe.stop()
        profile_lines = await _finish_profiles(profiles_task)
        await runner.workers.stop()
        for informer in (workloads, cluster_queues):
            await informer.stop()
        diagnosis = [f"watches: Workloads {workloads.events_seen:,} events, {workloads.relists} lists; "
                     f"ClusterQueues {cluster_queues.events_seen:,} events, {cluster_queues.relists} lists"]
        diagnosis += await diagnose_unfinished(runner_client, recorder, runner, workloads)
    return Outcome(scenario, args.scale, plan, recorder, runner, watcher, started, ready, generation_started,
                   timed_out, bench_cpu, loop_lag, webhook_probe, machine_busy, diagnosis, profile_lines,
                   error)


async def remove_webhooks(client: Client) -> int:
    """Kueue's harness: its ``minimalkueue`` registers no webhook, so the API server of Kueue's run
    calls none. kadmit's configurations are deleted once the probe has read its own (the probe
    still times kadmit's webhook server directly); nothing of kadmit's installs them again.
    Returns how many webhooks the API server no longer calls."""
    removed = 0
    for kind in (MUTATING_WEBHOOK_CONFIGURATIONS, VALIDATING_WEBHOOK_CONFIGURATIONS):
        for config in (await client.list_all(kind))["items"]:
            await client.delete(kind, None, config["metadata"]["name"], missing_ok=True)
            removed += len(config.get("webhooks") or [])
    return removed


async def diagnose_unfinished(client: Client, recorder: Recorder, runner: Runner, workloads: Informer,
                              limit: int = 5) -> list[str]:
    """For a few Workloads never seen Finished: their state in the API beside the watched one, and
    whether the runner's Finished write was accepted, to tell a lost event from a lost write."""
    lines = []
    unfinished = [r for r in recorder.workloads.values() if not r.finished]
    for record in unfinished[:limit]:
        key = (record.cluster_queue, record.name)
        try:
            current = await client.get_or_none(WORKLOADS, *key)
        except ApiError as exc:
            current, error = None, f"GET failed: {exc}"
        else:
            error = "" if current is not None else "not found"
        written = runner.finish_written.get(key)
        lines.append(f"not seen finished: {key[0]}/{key[1]}: runner's Finished write "
                     f"{'none' if written is None else 'accepted at rv ' + written}; "
                     f"API {error or describe(current)}; watched {describe(workloads.get(*key))}")
    if len(unfinished) > limit:
        lines.append(f"... and {len(unfinished) - limit} more")
    busy = [(name, cq) for name, cq in sorted(recorder.cluster_queues.items()) if cq.pending or cq.reserving]
    for name, cq in busy[:limit]:
        # Kueue's cache drops a Finished Workload whatever else it says; an odd one here is a suspect.
        odd = [wl for wl in workloads.list(name) if _odd(wl)]
        lines.append(f"ClusterQueue {name} reports pending {cq.pending}, reserving {cq.reserving}; "
                     f"its Workloads not plainly finished: {len(odd)}")
        lines += [f"  {wl['metadata']['name']} {describe(wl)}" for wl in odd[:limit]]
    return lines


def _odd(wl: Obj) -> bool:
    return (not ws.is_true(wl, ws.FINISHED) or ws.is_true(wl, ws.EVICTED)
            or ws.is_true(wl, ws.QUOTA_RESERVED) is not ws.is_true(wl, ws.ADMITTED))


def describe(wl: Obj | None) -> str:
    """``rv N: Type=Status(Reason) ...`` of a Workload, for the diagnosis."""
    if wl is None:
        return "-"
    conditions = " ".join(f"{c.get('type')}={c.get('status')}({c.get('reason')})"
                          for c in (wl.get("status") or {}).get("conditions") or [])
    admission = (wl.get("status") or {}).get("admission")
    return (f"rv {wl['metadata'].get('resourceVersion')}: {conditions}"
            f"{'; admission in ' + str(admission.get('clusterQueue')) if admission else ''}")


async def _finish_profiles(task: asyncio.Task[list[Profile]] | None) -> dict[str, list[str]]:
    """Stop the profiles still recording (py-spy writes its file on SIGINT) and summarize them."""
    if task is None:
        return {}
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return {}
    lines: dict[str, list[str]] = {}
    for profile in task.result():
        if profile.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                profile.process.send_signal(signal.SIGINT)
        _, err = await profile.process.communicate()
        if profile.path.exists():
            lines[f"{profile.role} ({profile.path})"] = summarize_speedscope(profile.path)
        else:
            lines[profile.role] = [f"  py-spy failed: {err.decode().strip()[-300:]}"]
    return lines


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups: a TaskGroup wraps each failed create."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _generation_done(recorder: Recorder) -> None:
    recorder.generation_done = time.time()
    recorder.fits.quota_time.open(recorder.generation_done)
    recorder.check_end()


async def _profile_later(watcher: ProcessWatcher, args: argparse.Namespace, workdir: Path) -> list[Profile]:
    await asyncio.sleep(args.py_spy_delay)
    args.keep = True  # the profiles are files worth keeping
    return await start_profiles(watcher, args.py_spy, workdir, gil=args.py_spy_gil)


async def _sample_every(watcher: ProcessWatcher, period: float) -> None:
    while True:
        watcher.sample()
        await asyncio.sleep(period)


def machine_busy_seconds() -> float:
    """CPU seconds all CPUs of the machine have been busy (``/proc/stat``: all but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    guest = sum(fields[8:10])  # already counted in user and nice
    return (sum(fields) - idle - guest) / CLOCK_TICKS


class WebhookProbe:
    """kadmit's webhook as the API server sees it while the scheduler works: every ``period`` an
    AdmissionReview of a Workload status UPDATE (the review every status write causes, the
    runner's Finished writes included; old and new the first Workload this bench saw) is POSTed
    to the ``vworkload.kb.io`` webhook over HTTPS, found as the API server finds it (its
    configuration's Service, caBundle and path, and the Service's Endpoints), and the round trip
    is timed: TLS, the wait for kadmit's event loop, and the handler. The probe runs in a process
    of its own, so that this bench's busy event loop does not add its own lateness."""

    WEBHOOK = "vworkload.kb.io"

    def __init__(self, period: float) -> None:
        self.period = period
        self.seconds: list[float] = []
        self.failures = 0
        self.last_failure = ""
        self._conn: Connection | None = None
        self._process: BaseProcess | None = None
        self._sent = False

    async def start(self, client: Client) -> None:
        if not self.period:
            return
        try:
            webhook = next(w for c in (await client.list_all(VALIDATING_WEBHOOK_CONFIGURATIONS))["items"]
                           for w in c.get("webhooks") or [] if w.get("name") == self.WEBHOOK)
            config = webhook["clientConfig"]
            service = config["service"]
            endpoints = await client.get(ENDPOINTS, service["namespace"], service["name"])
            subset = endpoints["subsets"][0]
            port = subset["ports"][0]["port"]
            url = f"https://{subset['addresses'][0]['ip']}:{port}{service['path']}?timeout=10s"
            ca_pem = base64.b64decode(config["caBundle"]).decode()
        except (StopIteration, KeyError, IndexError, ValueError, ApiError) as exc:
            self.failures, self.last_failure = 1, f"no {self.WEBHOOK} webhook to probe: {exc!r}"
            return
        hostname = f"{service['name']}.{service['namespace']}.svc"
        context = multiprocessing.get_context("spawn")
        self._conn, theirs = context.Pipe()
        self._process = context.Process(target=probe_webhook, name="webhook-probe", daemon=True,
                                        args=(url, hostname, ca_pem, self.period, theirs))
        self._process.start()

    def on_workload(self, kind: str, new: Obj, old: Obj | None) -> None:
        if self._conn is not None and not self._sent and kind != DELETED:
            self._conn.send(new)
            self._sent = True

    async def stop(self) -> None:
        if self._conn is None or self._process is None:
            return
        self._conn.send(STOP_PROBING)
        conn = self._conn
        try:
            async with asyncio.timeout(30):
                self.seconds, self.failures, self.last_failure = await asyncio.to_thread(conn.recv)
        except (TimeoutError, EOFError) as exc:
            self.failures += 1
            self.last_failure = f"the probe's process gave no figures: {exc!r}"
        self._process.join(5)
        if self._process.is_alive():
            self._process.kill()


STOP_PROBING = "stop"


def probe_webhook(url: str, hostname: str, ca_pem: str, period: float, conn: Connection) -> None:
    """:class:`WebhookProbe`'s process: waits for the Workload to review (or :data:`STOP_PROBING`),
    probes until told to stop, then sends back the round trips (seconds), the failures and the
    last failure."""
    asyncio.run(_probe_webhook(url, hostname, ca_pem, period, conn))


async def _probe_webhook(url: str, hostname: str, ca_pem: str, period: float, conn: Connection) -> None:
    seconds: list[float] = []
    failures = 0
    last_failure = ""
    wl = await asyncio.to_thread(conn.recv)
    if wl == STOP_PROBING:  # the run ended before any Workload was seen
        conn.send((seconds, failures, last_failure))
        return
    kind = {"group": KUEUE, "version": KUEUE_VERSION, "kind": "Workload"}
    target = {"group": KUEUE, "version": KUEUE_VERSION, "resource": "workloads"}
    context = ssl.create_default_context(cadata=ca_pem)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
        while not conn.poll():
            await asyncio.sleep(period)
            review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": str(uuid.uuid4()), "kind": kind, "resource": target, "subResource": "status",
                "requestKind": kind, "requestResource": target, "requestSubResource": "status",
                "name": wl["metadata"]["name"], "namespace": wl["metadata"]["namespace"],
                "operation": "UPDATE", "userInfo": {"username": "bench"}, "object": wl, "oldObject": wl,
                "dryRun": False, "options": {"kind": "UpdateOptions", "apiVersion": "meta.k8s.io/v1"}}}
            body = json.dumps(review).encode()  # encoded before the clock starts
            sent = time.perf_counter()
            try:
                async with session.post(url, data=body, server_hostname=hostname,
                                        headers={"Content-Type": "application/json"}) as response:
                    answer = await response.json()
                took = time.perf_counter() - sent
                if response.status != 200 or not answer["response"]["allowed"]:
                    raise ValueError(f"HTTP {response.status}: {str(answer)[:200]}")
            except (aiohttp.ClientError, OSError, ValueError, KeyError) as exc:
                failures += 1
                last_failure = repr(exc)
                continue
            seconds.append(took)
    conn.recv()
    conn.send((seconds, failures, last_failure))


class LoopLag:
    """How late this process's event loop runs a timer: were the bench itself late, its
    runner's finishes (and so everything) would be late too."""

    def __init__(self) -> None:
        self.worst = 0.0

    async def run(self, period: float = 0.05) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(period)
            self.worst = max(self.worst, loop.time() - before - period)


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def _progress(recorder: Recorder, runner: Runner, started: float, period: float) -> None:
    """A line every ``period`` seconds, so a long run shows where it is (and a stall shows)."""
    if period <= 0:
        return
    while True:
        await asyncio.sleep(period)
        admitted = sum(1 for r in recorder.workloads.values() if r.admitted and not r.finished)
        print(f"  {time.time() - started:7.0f} s: created {recorder.created:,}, admissions "
              f"{len(recorder.admission_times):,}, running {admitted:,}, finished {recorder.finished:,} "
              f"(runner: {runner.finishes:,} finished, {runner.unreservations:,} evictions completed, "
              f"{len(runner.workers.queue):,} queued, writes p50 "
              f"{1000 * percentile(runner.write_seconds[-500:], 0.5):.0f} ms)", flush=True)


STALL_REPORT_S = 2.0  # a stall this long is described as it happens


async def _describe_stalls(recorder: Recorder, workloads: Informer, started: float) -> None:
    """While a stall goes on past ``STALL_REPORT_S``, say once what fits in the bench's view and
    what kadmit told one such pending Workload (its QuotaReserved condition): the bench's fit
    rule knows quota, not a preemptor's claim or a check, so the line says which it was."""
    described: float | None = None
    while True:
        await asyncio.sleep(0.5)
        start = recorder.fits.gap_start()
        if start is None or start == described or time.time() - start < STALL_REPORT_S:
            continue
        described = start
        fitting = recorder.fits.fitting()
        print(f"  stall since {start - started:.1f} s: {len(fitting)} fitting (cohort, ClusterQueue, "
              f"request) in the bench's view", flush=True)
        for cohort, free, cluster_queue, request in fitting[:3]:
            told = "no pending Workload of that request in the watch"
            for wl in workloads.list(cluster_queue):  # each ClusterQueue's Workloads have its namespace
                held = ws.is_true(wl, ws.QUOTA_RESERVED) or ws.is_true(wl, ws.FINISHED)
                if held or request_milli(wl) != request:
                    continue
                cond = ws.find_condition(wl, ws.QUOTA_RESERVED) or {}
                told = (f"{wl['metadata']['name']}: QuotaReserved={cond.get('status')} "
                        f"({cond.get('reason')}) {str(cond.get('message') or '')[:200]!r}")
                break
            print(f"    {cohort} free {free}m, {cluster_queue} fits {request}m; {told}", flush=True)


async def _engine_reported(stream: asyncio.StreamReader) -> str:
    """The engine's build, from the line kadmit local prints after its ready line: an editable
    install runs it interpreted, the wheel compiled, and large-scale's figures differ with it."""
    try:
        async with asyncio.timeout(10):
            while line := await stream.readline():
                text = line.decode().strip()
                if text.startswith(ENGINE_LINE):
                    return text.removeprefix(ENGINE_LINE)
    except TimeoutError:
        pass
    return "not reported (a kadmit older than this bench)"


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.readline():
        pass


async def stop(process: asyncio.subprocess.Process, watcher: ProcessWatcher) -> None:
    """SIGTERM ``kadmit local``; after 30 s, SIGKILL whatever of its tree is left (by pid)."""
    if process.returncode is None:
        pids = watcher.alive_pids()
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 30)
        for pid in pids:
            if _stat_fields(pid) is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 10)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# -- the report


def class_usage(recorder: Recorder) -> dict[str, tuple[float, float, int]]:
    """Per ClusterQueue class, as Kueue's summary and checker compute it: (average usage in cpu,
    usage in % of the nominal quota, monitoring time in ms) -- the usage integrated between
    each queue's events, summed over the class, over the class's first to last event."""
    groups: dict[str, list[ClusterQueueRecord]] = {}
    for record in recorder.cluster_queues.values():
        groups.setdefault(record.class_name, []).append(record)
    result = {}
    for name, records in groups.items():
        used = sum(r.cpu_used for r in records)
        quota = sum(r.quota_milli for r in records)
        elapsed_ms = int((max(r.last_event for r in records) - min(r.first_event for r in records)) * 1000)
        average = used / elapsed_ms / 1000 if elapsed_ms > 0 else 0.0
        percent = used * 100 / (quota * elapsed_ms) if quota and elapsed_ms > 0 else 0.0
        result[name] = (average, percent, elapsed_ms)
    return result


@dataclass
class ClassFigures:
    count: int
    admitted: int
    finished: int
    evictions: int
    avg_time_to_admission_ms: int  # Kueue's: total over every record of the class / count
    avg_watched_time_to_admission_s: float  # the admitted ones, from this bench's watch events
    avg_time_to_finish_ms: int
    last_finish: float  # when the class's last Finished was seen (this clock), nan if none


def workload_classes(recorder: Recorder) -> dict[str, ClassFigures]:
    groups: dict[str, list[WorkloadRecord]] = {}
    for record in recorder.workloads.values():
        groups.setdefault(record.class_name, []).append(record)
    result = {}
    for name, records in groups.items():
        watched = [r.watched_time_to_admit for r in records if r.watched_time_to_admit is not None]
        result[name] = ClassFigures(
            len(records),
            sum(1 for r in records if r.admissions),
            sum(1 for r in records if r.finished),
            sum(r.evictions for r in records),
            sum(r.time_to_admit_ms for r in records) // len(records),
            sum(watched) / len(watched) if watched else math.nan,
            sum(r.time_to_finish_ms for r in records) // len(records),
            max((r.first_event + r.time_to_finish_ms / 1000 for r in records if r.finished),
                default=math.nan),
        )
    return result


def busiest_rate(times: list[float], window: float = 10.0) -> float:
    """The most admissions in any ``window`` seconds, per second."""
    best, start = 0, 0
    ordered = sorted(times)
    for end, moment in enumerate(ordered):
        while ordered[start] < moment - window:
            start += 1
        best = max(best, end - start + 1)
    return best / window


CLASS_ORDER = ("large", "medium", "small")


def report(o: Outcome, out: TextIO) -> None:
    r = o.recorder
    end = o.end
    wall_s = end - o.started
    published = o.scenario.published
    spec = o.scenario.rangespec
    full = o.scale == 1
    complete = not (o.timed_out or o.error)

    def p(text: str = "") -> None:
        print(text, file=out)

    p()
    if o.error:
        p(f"ERROR: {o.error}")
    gen_end = (r.generation_done or end) - o.generation_started
    p(f"kadmit local ready after {o.ready - o.started:.1f} s; generation took {gen_end:.1f} s "
      f"({r.created:,} created, {r.created / max(gen_end, 1e-9):.0f}/s)")
    if o.engine:
        p(f"kadmit's engine: {o.engine}")
    if o.timed_out or o.error:
        p(f"{'TIMED OUT' if o.timed_out else 'STOPPED'} after {end - o.generation_started:.0f} s of "
          f"recording: finished {r.finished:,} of {r.expected:,}; "
          f"{sum(1 for w in r.workloads.values() if w.admitted and not w.finished):,} running, "
          f"{sum(1 for w in r.workloads.values() if w.state == PENDING):,} pending")
    else:
        lag = (r.ended_at or end) - (r.last_finish or end)
        p(f"ended: every workload finished ({r.finished:,}) and the ClusterQueues reported empty "
          f"{lag:.2f} s after the last finish")
    if r.empty_while_unfinished:
        p(f"note: the ClusterQueues reported empty {r.empty_while_unfinished} times while workloads were "
          "still unfinished (Kueue's recorder would have ended there)")
    cq_states = list(r.cluster_queues.values())
    busy = [name for name, c in r.cluster_queues.items() if (c.pending or c.reserving) and c.active]
    if busy:
        p(f"ClusterQueues still reporting work at the end: {len(busy)} (e.g. {busy[0]}: pending "
          f"{r.cluster_queues[busy[0]].pending}, reserving {r.cluster_queues[busy[0]].reserving})")
    inactive = sum(1 for c in cq_states if not c.active)
    if inactive:
        p(f"ClusterQueues not Active at the end: {inactive}")

    p()
    header = f"{'':<36}{'kadmit':>12}{'Kueue (CI)':>12}   {'rangespec':<12}{'held':>6}"
    p(header)
    wall_ms = round(wall_s * 1000)
    p(_row("wall (s)", f"{wall_s:.1f}", f"{published.wall_s:.1f}", f"<= {spec.max_wall_ms / 1000:.0f}",
           complete and wall_ms <= spec.max_wall_ms, full))
    if o.floor is not None:
        p(f"{'wall from generation start (s)':<36}{end - o.generation_started:>12.1f}   "
          f"(with no latency anywhere: {o.floor.wall_s:.1f}, see --floor)")
    if o.runner_floor is not None:  # set only when the runner wrote
        p(f"{'':<36}{'':>12}   (with only the runner's writes taking time, "
          f"{1000 * statistics.fmean(o.runner.write_seconds):.1f} ms each as this run's on average: "
          f"{o.runner_floor.wall_s:.1f})")
    for name, (_, percent, _) in sorted(class_usage(r).items()):
        minimum = spec.min_usage_percent.get(name)
        p(_row(f"ClusterQueue usage, class {name} (%)", f"{percent:.1f}",
               _fmt(published.usage_percent.get(name), ".1f"),
               "" if minimum is None else f">= {minimum:g}",
               minimum is not None and percent >= minimum, full))
    classes = workload_classes(r)
    ordered = [c for c in CLASS_ORDER if c in classes] + sorted(set(classes) - set(CLASS_ORDER))
    for name in ordered:
        figures = classes[name]
        maximum = spec.max_avg_time_to_admission_ms.get(name)
        p(_row(f"avg time to admission, {name} (s)", f"{figures.avg_time_to_admission_ms / 1000:.1f}",
               _fmt(published.avg_time_to_admission_s.get(name), ".1f"),
               "" if maximum is None else f"<= {maximum / 1000:g}",
               maximum is not None and complete and figures.avg_time_to_admission_ms <= maximum, full))
    admissions = len(r.admission_times)
    kueue_rate = o.plan.workload_count / published.wall_s if full else math.nan
    p(f"{'admissions/s (over the wall time)':<36}{admissions / max(wall_s, 1e-9):>12.1f}"
      f"{_fmt(kueue_rate, '.1f'):>12}   (Kueue: workloads / wall)")
    p(f"{'admissions/s (busiest 10 s)':<36}{busiest_rate(r.admission_times):>12.1f}")
    if not full:
        p(f"(a run at scale {o.scale:g}: Kueue's figures and thresholds are for the full config, "
          "so 'held' is not judged)")
    else:
        p(f"(Kueue's figures: {published.source})")

    p()
    p("workload classes: count, admitted, finished, evictions; average time to admission by Kueue's formula")
    p("(API timestamps, whole seconds: creation to the last Admitted; every workload of the class counted)")
    p("and the same from this bench's watch events (admitted ones only); average time from the first event")
    p("to Finished seen; when the class's last Finished was seen (s after start); how late the runner")
    p("began writing Finished after a running time ended, on average (its five workers were busy)")
    p(f"  {'class':<8}{'count':>8}{'admitted':>10}{'finished':>10}{'evictions':>10}{'TTA Kueue s':>13}"
      f"{'TTA watch s':>13}{'to finish s':>13}{'last done s':>13}{'runner late s':>15}")
    for name in ordered:
        f = classes[name]
        late = o.runner.late_seconds.get(name, [])
        p(f"  {name:<8}{f.count:>8,}{f.admitted:>10,}{f.finished:>10,}{f.evictions:>10,}"
          f"{f.avg_time_to_admission_ms / 1000:>13.1f}{f.avg_watched_time_to_admission_s:>13.1f}"
          f"{f.avg_time_to_finish_ms / 1000:>13.1f}{f.last_finish - o.started:>13.1f}"
          f"{(sum(late) / len(late) if late else math.nan):>15.2f}")
    if o.floor is not None:
        both = [(name, classes[name].last_finish - o.generation_started, o.floor.last_done_s[name])
                for name in ordered if name in o.floor.last_done_s and classes[name].finished]
        p("each class's last finish, s after generation start, this run / with no latency: "
          + ", ".join(f"{name} {ours:.1f} / {floor:.1f}" for name, ours, floor in both)
          + f"; evictions {sum(c.evictions for c in classes.values()):,} / {o.floor.evictions:,}")
    evicted = [w.evictions for w in r.workloads.values() if w.evictions]
    p(f"admissions: {admissions:,} (re-admissions after eviction included); runner: {o.runner.finishes:,} "
      f"Finished written, {o.runner.unreservations:,} evictions completed")
    if evicted:
        p(f"evicted workloads: {len(evicted):,}, evicted {sum(evicted):,} times, at most {max(evicted)} "
          "times one workload")
    writes = o.runner.write_seconds
    p(f"runner status writes: {len(writes):,}, p50 {1000 * percentile(writes, 0.5):.0f} ms, "
      f"p99 {1000 * percentile(writes, 0.99):.0f} ms, max {1000 * max(writes, default=0):.0f} ms; "
      f"this bench's event loop ran late by at most {1000 * o.loop_lag.worst:.0f} ms")
    probes = o.webhook.seconds
    if o.webhook.period:
        p(f"kadmit's webhook round trip (a Workload status review every {1000 * o.webhook.period:.0f} ms, "
          f"{len(probes):,} answered, "
          f"{o.webhook.failures} failed{': ' + o.webhook.last_failure if o.webhook.failures else ''}): "
          f"p50 {1000 * percentile(probes, 0.5):.1f} ms, p99 {1000 * percentile(probes, 0.99):.1f} ms, "
          f"max {1000 * max(probes, default=0):.1f} ms")
    for line in o.diagnosis:
        p(line)
    fits = r.fits
    p(f"longest stall (no admission while a pending workload fitted in free quota): "
      f"{fits.gap.longest:.2f} s, from {fits.gap.longest_start - o.started:.1f} s after start; "
      f"in cohorts with no eviction in flight: {fits.settled_gap.longest:.2f} s, from "
      f"{fits.settled_gap.longest_start - o.started:.1f} s")
    report_quota_time(r, o.generation_started, p)

    p()
    p("processes (/proc): CPU seconds over the whole life / since the ready line, CPU s per 1,000 "
      "admissions (since ready), peak RSS")
    p(f"  {'process':<36}{'pid':>8}{'CPU s':>9}{'ready':>9}{'/1k adm':>9}{'peak RSS MB':>13}")
    for record in sorted(o.watcher.measured(), key=lambda rec: rec.pid):
        busy_cpu = record.cpu_s - record.cpu_at_ready
        per_k = busy_cpu / (admissions / 1000) if admissions else math.nan
        p(f"  {o.watcher.role(record):<36}{record.pid:>8}{record.cpu_s:>9.1f}{busy_cpu:>9.1f}{per_k:>9.2f}"
          f"{record.peak_rss_kb / 1024:>13.0f}")
    own = resource.getrusage(resource.RUSAGE_SELF)
    p(f"  {'this bench (generator, runner, recorder)':<36}{os.getpid():>8}{'':>9}{o.bench_cpu_s:>9.1f}"
      f"{'':>9}{own.ru_maxrss / 1024:>13.0f}")
    recording_s = end - o.generation_started
    ours = o.bench_cpu_s + sum(rec.cpu_s - rec.cpu_at_ready for rec in o.watcher.measured())
    others = max(o.machine_busy_s - ours, 0.0)
    p(f"  machine: {os.cpu_count()} CPUs, busy {o.machine_busy_s:.0f} CPU-s while recording "
      f"({recording_s:.0f} s); other processes {others:.0f} CPU-s of it "
      f"({others / max(recording_s, 1e-9):.2f} CPUs on average)")
    for name, lines in o.profile_lines.items():
        p()
        p(f"py-spy profile of {name}:")
        for line in lines:
            p(line)


def report_quota_time(r: Recorder, generation_started: float, p: Callable[[str], None]) -> None:
    """The quota split after generation, phase by phase: each phase ends at a class's last finish."""
    quota = r.fits.quota_time
    if quota.start is None or quota.end is None or not quota.shares():
        return
    last_done: dict[str, float] = {}
    for record in r.workloads.values():
        if record.finished:
            done = record.first_event + record.time_to_finish_ms / 1000
            last_done[record.class_name] = max(done, last_done.get(record.class_name, done))
    phase_ends = sorted((t, f"the last {c}'s finish") for c, t in last_done.items()
                        if quota.start < t < quota.end)
    bounds = [(quota.start, "the end of generation"), *phase_ends, (quota.end, "the end")]
    p(f"the cohorts' quota ({sum(r.fits.capacity.values()) / 1000:,.0f} CPU) after generation, "
      "as the watches showed it (shares of quota x time):")
    parts = QuotaTime.PARTS
    p(f"  {'from':>7} {'to':>7}  " + "  ".join(f"{part:>{max(len(part), 6)}}" for part in parts))
    for (since, _), (until, what) in itertools.pairwise(bounds):
        if until - since < 1:
            continue
        shares = quota.shares(since, until)
        p(f"  {since - generation_started:6.1f}s {until - generation_started:6.1f}s  " + "  ".join(
            f"{100 * shares.get(part, 0.0):>{max(len(part), 6) - 2}.1f} %" for part in parts)
          + f"   (to {what})")


def _row(label: str, ours: str, kueue: str, threshold: str, held: bool, judged: bool) -> str:
    verdict = ("yes" if held else "NO") if threshold and judged else ""
    return f"{label:<36}{ours:>12}{kueue:>12}   {threshold:<12}{verdict:>6}"


def report_floor(scenario: Scenario, scale: float, plan: Plan, floor: Floor, runner_write_s: float,
                 out: TextIO) -> None:
    """``--floor``: the wall the config allows under Kueue's rules when nothing takes time (or only
    the runner's writes, ``runner_write_s`` each)."""
    classes = ", ".join(f"{name} {floor.last_done_s[name]:.1f} s"
                        for name in CLASS_ORDER if name in floor.last_done_s)
    latency = ("no latency anywhere (kadmit's engine in virtual time, every create on the generator's "
               "schedule, every admission, eviction and finish at once)" if runner_write_s <= 0 else
               f"only the runner's writes taking time ({RUNNER_WORKERS} workers, first come first served, "
               f"each Finished or eviction's completion {1000 * runner_write_s:g} ms; kadmit's engine in "
               "virtual time, every create on the generator's schedule, every admission at once)")
    print(f"config {scenario.name}{f', scale {scale:g}' if scale != 1 else ''}: with {latency} the last "
          f"workload finishes at {floor.wall_s:.1f} s", file=out)
    print(f"  last finish per class: {classes}", file=out)
    if floor.finished < plan.workload_count:
        print(f"  only {floor.finished:,} of {plan.workload_count:,} finished: the others never fit",
              file=out)
    print(f"  {plan.workload_count:,} workloads, {floor.admissions:,} admissions, "
          f"{floor.evictions:,} evictions; worked out in {floor.cpu_s:.1f} CPU s", file=out)
    if scale == 1:
        print(f"  Kueue's published wall: {scenario.published.wall_s:.1f} s", file=out)


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", choices=sorted(SCENARIOS), default="baseline",
                        help="Kueue's generator config (default baseline)")
    parser.add_argument("--timeout", type=float,
                        help="seconds of recording after generation starts (default: Kueue's, "
                             "600 for baseline, 1800 for large-scale)")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="fraction of each workloads set's count (at least 1 each), for quick runs")
    parser.add_argument("--kadmit-args", default="", help="more arguments for `kadmit local`, one string")
    parser.add_argument("--kadmit-command", default=f"{shlex.quote(sys.executable)} -m kadmit",
                        help="the command that runs kadmit, one string (default: this Python's `-m kadmit`; "
                             "another checkout's `.venv/bin/kadmit` measures that version)")
    parser.add_argument("--progress", type=float, default=30.0,
                        help="seconds between progress lines (0: none; default 30)")
    parser.add_argument("--py-spy", type=int, default=0, metavar="SECONDS",
                        help="record a py-spy profile of each process for this long (speedscope files, kept)")
    parser.add_argument("--py-spy-delay", type=float, default=30.0, metavar="SECONDS",
                        help="when to start the profiles, after generation starts (default 30)")
    parser.add_argument("--py-spy-gil", action="store_true",
                        help="profile only samples holding the GIL (py-spy --gil): Python's own CPU, "
                             "leaving out waits in system calls, which on a busy machine include "
                             "waiting for a core after waking the peer of a socket write")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work directory (kubeconfig, kadmit's log)")
    parser.add_argument("--webhook-probe", type=float, default=0.02, metavar="SECONDS",
                        help="seconds between the probes of kadmit's webhook round trip (default 0.02; "
                             "0: none)")
    parser.add_argument("--floor", action="store_true",
                        help="only work out the wall the config allows with no latency anywhere: kadmit's "
                             "engine (Kueue's rules) in virtual time, no cluster; the floor any run has")
    parser.add_argument("--runner-write-ms", type=float, default=0.0, metavar="MS",
                        help="with --floor: give Kueue's runner (its 5 workers) this long for each status "
                             "write, and nothing else any time: the floor of any admission layer measured "
                             "with Kueue's harness against an API server that writes this fast")
    parser.add_argument("--without-webhooks", action="store_true",
                        help="as Kueue's own run (minimalkueue registers no webhook): delete kadmit's "
                             "webhook configurations once ready, so the API server calls none")
    args = parser.parse_args(argv)
    if not 0 < args.scale <= 1:
        parser.error("--scale must be in (0, 1]")
    if args.webhook_probe < 0:
        parser.error("--webhook-probe must be 0 or more")
    if not 0 <= args.runner_write_ms < math.inf:
        parser.error("--runner-write-ms must be 0 or more")
    if args.runner_write_ms and not args.floor:
        parser.error("--runner-write-ms goes with --floor (a run reports its own runner's floor)")
    # On the event loop kadmit runs on (uvloop where installed): the runner's writes and the
    # recorder's watches cross TLS as kadmit's do, and asyncio's own TLS transport is Python code
    # on each read and write, CPU this machine's two cores would otherwise spend on the harness.
    try:
        return run_async(run(args))
    except CommandError as exc:
        print(f"scalability.py: {exc}", file=sys.stderr)
        return exc.code


if __name__ == "__main__":
    sys.exit(main())
