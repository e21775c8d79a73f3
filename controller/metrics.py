"""Prometheus metrics with Kueue's names, labels and buckets (its ``pkg/metrics``), on ``/metrics``.

Every family Kueue declares is declared once in :data:`FAMILIES`, in Kueue's order, with the
switch that turns it on as Kueue's configuration does: ``metrics.localQueueMetrics`` (the
``kueue_local_queue_*`` families), ``metrics.enableClusterQueueResources`` (quotas and resource
usage), Fair Sharing (the weighted shares). Counters and histograms are bumped as the loops act
(admissions, reservations, evictions, preemptions, scheduling attempts, finishes); gauges are read
when Prometheus scrapes: the queue counts from
:class:`~kadmit.controller.queue_stats.IncrementalStats`, which the Workload events keep equal to a
count of the Workloads the API holds (so a scrape costs the queues, never the Workloads), the rest
from the caches and the engine the loops read. Every series but ``kueue_build_info`` carries
``replica_role`` (``leader``, ``follower`` or ``standalone``). The process and Python collectors
of prometheus_client come along; kadmit's own series are named ``kadmit_*``.
"""

from __future__ import annotations

import math
import platform
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.registry import Collector

from kadmit import workload as ws
from kadmit.controller.queue_stats import QueueStats, nominal_quotas
from kadmit.controller.scheduler import SchedulerObserver
from kadmit.engine import Decisions, Reservation, to_milli
from kadmit.engine.fair_sharing import MAX_INT64
from kadmit.engine.quantity import MILLI
from kadmit.kube import Obj
from kadmit.kube.resources import CLUSTER_QUEUES, COHORTS, LOCAL_QUEUES

if TYPE_CHECKING:
    from kadmit.controller.manager import Manager

ROLE = "replica_role"
try:
    _VERSION = version("kadmit")
except PackageNotFoundError:  # running from a source tree that was never installed
    _VERSION = "unknown"


def exponential_buckets(count: int) -> tuple[float, ...]:
    """Kueue's ``generateExponentialBuckets``: 1, then 2.5 doubling, ``count`` in all."""
    return (1.0, *(2.5 * 2**i for i in range(count - 1)))


DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
"""client_golang's ``DefBuckets`` (Kueue's histograms that name no buckets)."""
CREATION_BUCKETS = tuple(0.01 * 2**i for i in range(11))
"""``prometheus.ExponentialBuckets(0.01, 2, 11)``."""

ALWAYS = ""
LOCAL_QUEUE = "localQueueMetrics"
RESOURCES = "enableClusterQueueResources"
FAIR_SHARING = "fairSharing"
LOCAL_QUEUE_RESOURCES = "localQueueMetrics+enableClusterQueueResources"


@dataclass(frozen=True, slots=True)
class Family:
    """One metric family as Kueue declares it; ``replica_role`` is appended to ``labels``
    (except for ``kueue_build_info``); ``switch`` names what turns it on."""

    name: str
    kind: str  # counter, histogram or gauge
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] = ()
    switch: str = ALWAYS
    role: bool = True

    @property
    def label_names(self) -> list[str]:
        return [*self.labels, ROLE] if self.role else list(self.labels)


CQ_PC = ("cluster_queue", "priority_class")
LQ_PC = ("name", "namespace", "priority_class")
CQ_FR = ("cohort", "cluster_queue", "flavor", "resource")
LQ_FR = ("name", "namespace", "flavor", "resource")
EVICTION = ("reason", "underlying_cause", "priority_class")

FAMILIES: tuple[Family, ...] = (
    Family(
        "kueue_admission_attempts_total",
        "counter",
        ("result",),
        "The total number of attempts to admit workloads",
    ),
    Family(
        "kueue_admission_attempt_duration_seconds",
        "histogram",
        ("result",),
        "The latency of an admission attempt",
        DEFAULT_BUCKETS,
    ),
    Family(
        "multikueue_workloads_dispatched_total",
        "counter",
        ("cluster_queue", "cluster"),
        "Remote workloads created by MultiKueue on a worker cluster (the multikueue check counts)",
    ),
    Family(
        "multikueue_workloads_admitted_total",
        "counter",
        ("cluster_queue", "cluster"),
        "Remote workload admissions on a worker cluster (the multikueue check counts)",
    ),
    Family(
        "kueue_admission_cycle_preemption_skips",
        "gauge",
        ("cluster_queue",),
        "Workloads that got preemption candidates but had to be skipped in the last cycle",
    ),
    Family(
        "kueue_preemption_target_recomputations_total",
        "counter",
        ("cluster_queue", "result"),
        "Preemption target recomputations",
    ),
    Family(
        "kueue_build_info",
        "gauge",
        ("git_version", "git_commit", "build_date", "go_version", "compiler", "platform"),
        "kadmit's build (go_version is Python's)",
        role=False,
    ),
    Family(
        "kueue_pending_workloads",
        "gauge",
        ("cluster_queue", "status"),
        "The number of pending workloads, per 'cluster_queue' and 'status'",
    ),
    Family(
        "kueue_pending_scheduling_hashes",
        "gauge",
        ("cluster_queue", "status"),
        "Distinct scheduling shapes among the pending workloads, per 'cluster_queue' and 'status'",
    ),
    Family(
        "kueue_local_queue_pending_workloads",
        "gauge",
        ("name", "namespace", "status"),
        "The number of pending workloads, per 'local_queue' and 'status'",
        switch=LOCAL_QUEUE,
    ),
    Family(
        "kueue_finished_workloads",
        "gauge",
        ("cluster_queue",),
        "The number of finished workloads per 'cluster_queue'",
    ),
    Family(
        "kueue_local_queue_finished_workloads",
        "gauge",
        ("name", "namespace"),
        "The number of finished workloads, per 'local_queue'",
        switch=LOCAL_QUEUE,
    ),
    Family(
        "kueue_quota_reserved_workloads_total",
        "counter",
        CQ_PC,
        "The total number of quota reserved workloads per 'cluster_queue'",
    ),
    Family(
        "kueue_local_queue_quota_reserved_workloads_total",
        "counter",
        LQ_PC,
        "The total number of quota reserved workloads per 'local_queue'",
        switch=LOCAL_QUEUE,
    ),
    Family(
        "kueue_finished_workloads_total",
        "counter",
        CQ_PC,
        "The total number of finished workloads per 'cluster_queue'",
    ),
    Family(
        "kueue_local_queue_finished_workloads_total",
        "counter",
        LQ_PC,
        "The total number of finished workloads per 'local_queue'",
        switch=LOCAL_QUEUE,
    ),
    Family(
        "kueue_execution_time_seconds",
        "histogram",
        CQ_PC,
        "The total execution time of a finished admitted workload, per 'cluster_queue'",
        exponential_buckets(16),
    ),
    Family(
        "kueue_local_queue_execution_time_seconds",
        "histogram",
        LQ_PC,
        "The total execution time of a finished admitted workload, per 'local_queue'",
        exponential_buckets(16),
        LOCAL_QUEUE,
    ),
    Family(
        "kueue_quota_reserved_wait_time_seconds",
        "histogram",
        CQ_PC,
        "The time between a workload was created or requeued until it got quota reservation, "
        "per 'cluster_queue'",
        exponential_buckets(14),
    ),
    Family(
        "kueue_pods_ready_to_evicted_time_seconds",
        "histogram",
        ("cluster_queue", "reason", "underlying_cause"),
        "The number of seconds between a workload's pods being ready and its eviction",
        exponential_buckets(14),
    ),
    Family(
        "kueue_local_queue_quota_reserved_wait_time_seconds",
        "histogram",
        LQ_PC,
        "The time between a workload was created or requeued until it got quota reservation, "
        "per 'local_queue'",
        exponential_buckets(14),
        LOCAL_QUEUE,
    ),
    Family(
        "kueue_admitted_workloads_total",
        "counter",
        CQ_PC,
        "The total number of admitted workloads per 'cluster_queue'",
    ),
    Family(
        "kueue_local_queue_admitted_workloads_total",
        "counter",
        LQ_PC,
        "The total number of admitted workloads per 'local_queue'",
        switch=LOCAL_QUEUE,
    ),
    Family(
        "kueue_admission_wait_time_seconds",
        "histogram",
        CQ_PC,
        "The time between a workload was created or requeued until admission, per 'cluster_queue'",
        exponential_buckets(16),
    ),
    Family(
        "kueue_ready_wait_time_seconds",
        "histogram",
        CQ_PC,
        "The time between a workload was created or requeued until ready, per 'cluster_queue'",
        exponential_buckets(14),
    ),
    Family(
        "kueue_admitted_until_ready_wait_time_seconds",
        "histogram",
        CQ_PC,
        "The time between a workload was admitted until ready, per 'cluster_queue'",
        exponential_buckets(14),
    ),
    Family(
        "kueue_local_queue_admission_wait_time_seconds",
        "histogram",
        LQ_PC,
        "The time between a workload was created or requeued until admission, per 'local_queue'",
        exponential_buckets(14),
        LOCAL_QUEUE,
    ),
    Family(
        "kueue_admission_checks_wait_time_seconds",
        "histogram",
        CQ_PC,
        "The time from when a workload got the quota reservation until admission, per 'cluster_queue'",
        exponential_buckets(14),
    ),
    Family(
        "kueue_local_queue_admission_checks_wait_time_seconds",
        "histogram",
        LQ_PC,
        "The time from when a workload got the quota reservation until admission, per 'local_queue'",
        exponential_buckets(14),
        LOCAL_QUEUE,
    ),
    Family(
        "kueue_local_queue_ready_wait_time_seconds",
        "histogram",
        LQ_PC,
        "The time between a workload was created or requeued until ready, per 'local_queue'",
        exponential_buckets(14),
        LOCAL_QUEUE,
    ),
    Family(
        "kueue_local_queue_admitted_until_ready_wait_time_seconds",
        "histogram",
        LQ_PC,
        "The time between a workload was admitted until ready, per 'local_queue'",
        exponential_buckets(14),
        LOCAL_QUEUE,
    ),
    Family(
        "kueue_workload_creation_latency_seconds",
        "histogram",
        ("job_kind",),
        "The time between a job was created until its workload was created, per 'job_kind' "
        "(jobs of generation 1 only)",
        CREATION_BUCKETS,
    ),
    Family(
        "kueue_pod_scheduling_gate_removal_seconds",
        "histogram",
        ("name", "cluster_queue", "is_group"),
        "Duration from Workload admission to removal of a Pod scheduling gate",
        DEFAULT_BUCKETS,
    ),
    Family(
        "kueue_evicted_workloads_total",
        "counter",
        ("cluster_queue", *EVICTION),
        "The number of evicted workloads per 'cluster_queue'",
    ),
    Family(
        "kueue_replaced_workload_slices_total",
        "counter",
        ("cluster_queue",),
        "The number of replaced workload slices per 'cluster_queue'",
    ),
    Family(
        "kueue_local_queue_evicted_workloads_total",
        "counter",
        ("name", "namespace", *EVICTION),
        "The number of evicted workloads per 'local_queue'",
        switch=LOCAL_QUEUE,
    ),
    Family(
        "kueue_evicted_workloads_once_total",
        "counter",
        ("cluster_queue", *EVICTION),
        "The number of unique workload evictions per 'cluster_queue'",
    ),
    Family(
        "kueue_preempted_workloads_total",
        "counter",
        ("preempting_cluster_queue", "reason"),
        "The number of preempted workloads per 'preempting_cluster_queue'",
    ),
    Family(
        "kueue_workload_eviction_latency_seconds",
        "histogram",
        ("cluster_queue", "reason"),
        "The time from workload eviction until the workload returns to Pending (quota released)",
        exponential_buckets(14),
    ),
    Family(
        "kueue_reserving_active_workloads",
        "gauge",
        ("cluster_queue",),
        "The number of Workloads that are reserving quota, per 'cluster_queue'",
    ),
    Family(
        "kueue_local_queue_reserving_active_workloads",
        "gauge",
        ("name", "namespace"),
        "The number of Workloads that are reserving quota, per 'localQueue'",
        switch=LOCAL_QUEUE,
    ),
    Family(
        "kueue_admitted_active_workloads",
        "gauge",
        ("cluster_queue",),
        "The number of admitted Workloads that are active, per 'cluster_queue'",
    ),
    Family(
        "kueue_local_queue_admitted_active_workloads",
        "gauge",
        ("name", "namespace"),
        "The number of admitted Workloads that are active, per 'localQueue'",
        switch=LOCAL_QUEUE,
    ),
    Family(
        "kueue_cluster_queue_status",
        "gauge",
        ("cluster_queue", "status"),
        "Reports 'cluster_queue' with its 'status' ('pending', 'active' or 'terminated')",
    ),
    Family(
        "kueue_local_queue_status",
        "gauge",
        ("name", "namespace", "active"),
        "Reports 'localQueue' with its 'active' status ('True', 'False' or 'Unknown')",
        switch=LOCAL_QUEUE,
    ),
    Family(
        "kueue_unadmitted_workloads",
        "gauge",
        ("cluster_queue", "reason", "underlying_cause"),
        "The number of unadmitted workloads, per 'cluster_queue', 'reason' and 'underlying_cause'",
    ),
    Family(
        "kueue_local_queue_unadmitted_workloads",
        "gauge",
        ("name", "namespace", "cluster_queue", "reason", "underlying_cause"),
        "The number of unadmitted workloads, per 'name', 'namespace', 'cluster_queue', 'reason' "
        "and 'underlying_cause'",
        switch=LOCAL_QUEUE,
    ),
    Family(
        "kueue_cluster_queue_resource_reservation",
        "gauge",
        CQ_FR,
        "Reports the cluster_queue's total resource reservation within all the flavors",
        switch=RESOURCES,
    ),
    Family(
        "kueue_cluster_queue_resource_pending",
        "gauge",
        ("cluster_queue", "resource"),
        "Reports the cluster_queue's total pending resource requests",
        switch=RESOURCES,
    ),
    Family(
        "kueue_cluster_queue_resource_usage",
        "gauge",
        CQ_FR,
        "Reports the cluster_queue's total resource usage within all the flavors",
        switch=RESOURCES,
    ),
    Family(
        "kueue_local_queue_resource_reservation",
        "gauge",
        LQ_FR,
        "Reports the localQueue's total resource reservation within all the flavors",
        switch=LOCAL_QUEUE_RESOURCES,
    ),
    Family(
        "kueue_local_queue_resource_usage",
        "gauge",
        LQ_FR,
        "Reports the localQueue's total resource usage within all the flavors",
        switch=LOCAL_QUEUE_RESOURCES,
    ),
    Family(
        "kueue_local_queue_admission_fair_sharing_usage",
        "gauge",
        ("name", "namespace", "cluster_queue"),
        "The LocalQueue's Admission Fair Sharing usage",
        switch=LOCAL_QUEUE,
    ),
    Family(
        "kueue_cluster_queue_nominal_quota",
        "gauge",
        CQ_FR,
        "Reports the cluster_queue's resource nominal quota within all the flavors",
        switch=RESOURCES,
    ),
    Family(
        "kueue_cluster_queue_borrowing_limit",
        "gauge",
        CQ_FR,
        "Reports the cluster_queue's resource borrowing limit within all the flavors (+Inf when unset)",
        switch=RESOURCES,
    ),
    Family(
        "kueue_cluster_queue_lending_limit",
        "gauge",
        CQ_FR,
        "Reports the cluster_queue's resource lending limit within all the flavors (+Inf when unset)",
        switch=RESOURCES,
    ),
    Family(
        "kueue_cluster_queue_weighted_share",
        "gauge",
        ("cluster_queue", "cohort"),
        "The ClusterQueue's weighted share (Fair Sharing)",
        switch=FAIR_SHARING,
    ),
    Family(
        "kueue_cohort_weighted_share",
        "gauge",
        ("cohort",),
        "The Cohort's weighted share (Fair Sharing)",
        switch=FAIR_SHARING,
    ),
    Family(
        "kueue_cohort_subtree_quota",
        "gauge",
        ("cohort", "flavor", "resource"),
        "The quota of the Cohort's subtree, per flavor and resource",
    ),
    Family(
        "kueue_cohort_subtree_admitted_workloads_total",
        "counter",
        ("cohort", "priority_class"),
        "Workloads admitted in the Cohort's subtree",
    ),
    Family(
        "kueue_cohort_subtree_resource_reservations",
        "gauge",
        ("cohort", "flavor", "resource"),
        "Quota reserved in the Cohort's subtree, per flavor and resource",
    ),
    Family(
        "kueue_cohort_subtree_admitted_active_workloads",
        "gauge",
        ("cohort",),
        "Admitted, unfinished workloads in the Cohort's subtree",
    ),
    Family(
        "kueue_cohort_info",
        "gauge",
        ("cohort", "parent_cohort", "root_cohort"),
        "A Cohort's place in the cohort tree",
    ),
    Family(
        "kueue_cluster_queue_info",
        "gauge",
        ("cluster_queue", "parent_cohort", "root_cohort"),
        "A ClusterQueue's place in the cohort tree",
    ),
)
"""Every family of Kueue's ``pkg/metrics``, in its declaration order."""

BY_NAME = {family.name: family for family in FAMILIES}
SERVED_ELSEWHERE = frozenset({"multikueue_workloads_dispatched_total", "multikueue_workloads_admitted_total"})
"""Counted by the multikueue admission check (``kadmit.checks.multikueue``) in the same registry."""
WITHOUT_SERIES = frozenset(
    {
        "kueue_admission_cycle_preemption_skips",
        "kueue_preemption_target_recomputations_total",
        "kueue_pod_scheduling_gate_removal_seconds",
        "kueue_local_queue_admission_fair_sharing_usage",
    }
)
"""Families of mechanisms kadmit does not have (preemption skips and target recomputation in a
cycle, Pod groups' scheduling gates, Admission Fair Sharing): declared,
so that dashboards find them, and without series."""


def priority_class(wl: Obj) -> str:
    return str(((wl.get("spec") or {}).get("priorityClassRef") or {}).get("name") or "")


def _cluster_queue(wl: Obj) -> str:
    return str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")


def _lq(wl: Obj) -> str:
    return str((wl.get("spec") or {}).get("queueName") or "")


def _namespace(wl: Obj) -> str:
    return str(wl["metadata"].get("namespace", ""))


def _cohort_of(cq: Obj | None) -> str:
    spec = (cq or {}).get("spec") or {}
    return str(spec.get("cohortName") or spec.get("cohort") or "")


def _since(wl: Obj, kind: str) -> float | None:
    return ws.parse_time((ws.find_condition(wl, kind) or {}).get("lastTransitionTime"))


class Metrics(SchedulerObserver):
    def __init__(
        self,
        role: Callable[[], str] = lambda: "standalone",
        registry: CollectorRegistry | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = registry or CollectorRegistry()
        self.role = role
        self.clock = clock
        self.manager: Manager | None = None
        self._metrics: dict[str, MetricWrapperBase] = {}
        self._children: dict[tuple[str, tuple[str, ...]], Any] = {}
        """Each labelled child, found once: ``labels()`` checks and converts its values on every
        call, several times per admission. Children are never removed, so none goes stale."""
        for family in FAMILIES:
            if family.kind == "counter" and family.name not in SERVED_ELSEWHERE:
                self._metrics[family.name] = Counter(
                    family.name, family.help, family.label_names, registry=None
                )
            elif family.kind == "histogram":
                self._metrics[family.name] = Histogram(
                    family.name, family.help, family.label_names, buckets=family.buckets, registry=None
                )
        self.registry.register(_Collector(self))
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(_Delegate(collector))

    def count(self, name: str, *labels: str, by: float = 1.0) -> None:
        """Bump a counter of :data:`FAMILIES` (``replica_role`` is added)."""
        self._child(name, (*labels, self.role())).inc(by)

    def observe(self, name: str, value: float, *labels: str) -> None:
        """Observe into a histogram of :data:`FAMILIES` (``replica_role`` is added)."""
        self._child(name, (*labels, self.role())).observe(max(value, 0.0))

    def _child(self, name: str, labels: tuple[str, ...]) -> Any:
        key = (name, labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._metrics[name].labels(*labels)
        return child

    def bind(self, manager: Manager) -> None:
        """Read the gauges from ``manager`` and follow its Workloads (finishes, readiness, releases)."""
        self.manager = manager
        manager.workloads.add_handler(self._on_workload)

    def _on_workload(self, event: str, new: Obj, old: Obj | None) -> None:
        # Only the replica that writes counts, so that a sum over replicas counts each once.
        if event == "DELETED" or self.manager is None or not self.manager.leading:
            return
        if old is None:
            self._created(new)
            return
        if ws.is_true(new, ws.PODS_READY) and not ws.is_true(old, ws.PODS_READY):
            self._pods_ready(new)
        if ws.is_true(old, ws.EVICTED) and _cluster_queue(old) and not _cluster_queue(new):
            evicted = ws.find_condition(old, ws.EVICTED) or {}
            at = ws.parse_time(evicted.get("lastTransitionTime"))
            if at is not None:
                self.observe(
                    "kueue_workload_eviction_latency_seconds",
                    self.clock() - at,
                    _cluster_queue(old),
                    str(evicted.get("reason") or ""),
                )
        if ws.is_true(new, ws.FINISHED) and not ws.is_true(old, ws.FINISHED):
            self._finished(new)

    def _created(self, wl: Obj) -> None:
        """Kueue's workload_creation_latency_seconds: the owning job's creation → the Workload's."""
        manager = self.manager
        assert manager is not None
        created = ws.parse_time(wl["metadata"].get("creationTimestamp"))
        for ref in wl["metadata"].get("ownerReferences") or []:
            if not ref.get("controller"):
                continue
            for integration in manager.integrations:
                if integration.kind != ref.get("kind"):
                    continue
                job = manager.informers.get(integration.resource).get(
                    _namespace(wl), str(ref.get("name", ""))
                )
                if job is None or job["metadata"].get("generation", 1) != 1:
                    return
                since = ws.parse_time(job["metadata"].get("creationTimestamp"))
                if since is not None and created is not None:
                    self.observe("kueue_workload_creation_latency_seconds", created - since, integration.kind)
                return

    def _finished(self, wl: Obj) -> None:
        cq, pc, lq, ns = _cluster_queue(wl), priority_class(wl), _lq(wl), _namespace(wl)
        self.count("kueue_finished_workloads_total", cq, pc)
        self.count("kueue_local_queue_finished_workloads_total", lq, ns, pc)
        finished = _since(wl, ws.FINISHED)
        admitted = ws.find_condition(wl, ws.ADMITTED)
        since = ws.parse_time((admitted or {}).get("lastTransitionTime"))
        past = int((wl.get("status") or {}).get("accumulatedPastExecutionTimeSeconds") or 0)
        if finished is not None and since is not None and admitted and admitted.get("status") == "True":
            seconds = past + max(finished - since, 0.0)
            self.observe("kueue_execution_time_seconds", seconds, cq, pc)
            self.observe("kueue_local_queue_execution_time_seconds", seconds, lq, ns, pc)

    # -- observer hooks

    def cycle(self, seconds: float, decisions: Decisions) -> None:
        for result, count in (
            ("success", decisions.attempts_success),
            ("inadmissible", decisions.attempts_inadmissible),
        ):
            if count:
                self.count("kueue_admission_attempts_total", result, by=count)
                self.observe("kueue_admission_attempt_duration_seconds", seconds, result)

    def reserved(self, workload: Obj, reservation: Reservation, now: float) -> None:
        cq, pc, lq, ns = (
            reservation.cluster_queue,
            priority_class(workload),
            _lq(workload),
            _namespace(workload),
        )
        self.count("kueue_quota_reserved_workloads_total", cq, pc)
        self.count("kueue_local_queue_quota_reserved_workloads_total", lq, ns, pc)
        since = ws.queued_since(workload)
        if since is not None:
            self.observe("kueue_quota_reserved_wait_time_seconds", now - since, cq, pc)
            self.observe("kueue_local_queue_quota_reserved_wait_time_seconds", now - since, lq, ns, pc)

    def admitted(self, workload: Obj, now: float) -> None:
        cq, pc, lq, ns = (
            _cluster_queue(workload),
            priority_class(workload),
            _lq(workload),
            _namespace(workload),
        )
        self.count("kueue_admitted_workloads_total", cq, pc)
        self.count("kueue_local_queue_admitted_workloads_total", lq, ns, pc)
        for cohort in self._cohorts_above(cq):
            self.count("kueue_cohort_subtree_admitted_workloads_total", cohort, pc)
        since = ws.queued_since(workload)
        if since is not None:
            self.observe("kueue_admission_wait_time_seconds", now - since, cq, pc)
            self.observe("kueue_local_queue_admission_wait_time_seconds", now - since, lq, ns, pc)
        reserved_at = _since(workload, ws.QUOTA_RESERVED)
        if reserved_at is not None:
            self.observe("kueue_admission_checks_wait_time_seconds", now - reserved_at, cq, pc)
            self.observe(
                "kueue_local_queue_admission_checks_wait_time_seconds", now - reserved_at, lq, ns, pc
            )

    def evicted(self, workload: Obj, reason: str, underlying_cause: str) -> None:
        cq, pc, lq, ns = (
            _cluster_queue(workload),
            priority_class(workload),
            _lq(workload),
            _namespace(workload),
        )
        self.count("kueue_evicted_workloads_total", cq, reason, underlying_cause, pc)
        self.count("kueue_local_queue_evicted_workloads_total", lq, ns, reason, underlying_cause, pc)
        stats = ((workload.get("status") or {}).get("schedulingStats") or {}).get("evictions") or []
        for entry in stats:  # the first eviction of this Workload for this reason (Kueue's "once")
            if entry.get("reason") == reason and (entry.get("underlyingCause") or "") == underlying_cause:
                if int(entry.get("count") or 0) == 1:
                    self.count("kueue_evicted_workloads_once_total", cq, reason, underlying_cause, pc)
                break
        ready = ws.find_condition(workload, ws.PODS_READY)
        ready_at = ws.parse_time((ready or {}).get("lastTransitionTime"))
        if ready is not None and ready.get("status") == "True" and ready_at is not None:
            self.observe(
                "kueue_pods_ready_to_evicted_time_seconds",
                self.clock() - ready_at,
                cq,
                reason,
                underlying_cause,
            )

    def preempted(self, preemptor_cluster_queue: str, reason: str) -> None:
        self.count("kueue_preempted_workloads_total", preemptor_cluster_queue, reason)

    def slice_replaced(self, cluster_queue: str) -> None:
        """An elastic job's Workload slice was replaced by its scaled-up successor."""
        self.count("kueue_replaced_workload_slices_total", cluster_queue)

    def _pods_ready(self, wl: Obj) -> None:
        ready = ws.find_condition(wl, ws.PODS_READY) or {}
        if ready.get("reason") != "Started":  # the first readiness, not a recovery
            return
        at = ws.parse_time(ready.get("lastTransitionTime"))
        admitted = _since(wl, ws.ADMITTED)
        queued = ws.queued_since(wl)
        cq, pc, lq, ns = _cluster_queue(wl), priority_class(wl), _lq(wl), _namespace(wl)
        if at is not None and admitted is not None:
            self.observe("kueue_admitted_until_ready_wait_time_seconds", at - admitted, cq, pc)
            self.observe(
                "kueue_local_queue_admitted_until_ready_wait_time_seconds", at - admitted, lq, ns, pc
            )
        if at is not None and queued is not None:
            self.observe("kueue_ready_wait_time_seconds", at - queued, cq, pc)
            self.observe("kueue_local_queue_ready_wait_time_seconds", at - queued, lq, ns, pc)

    def _cohorts_above(self, cluster_queue: str) -> list[str]:
        if self.manager is None:
            return []
        return _ancestors(
            self.manager, _cohort_of(self.manager.informers.get(CLUSTER_QUEUES).get(None, cluster_queue))
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _ancestors(manager: Manager, cohort: str) -> list[str]:
    """``cohort`` and the cohorts above it, by the Cohort objects' ``spec.parentName`` (cycles stop)."""
    chain: list[str] = []
    while cohort and cohort not in chain:
        chain.append(cohort)
        obj = manager.informers.get(COHORTS).get(None, cohort)
        cohort = str(((obj or {}).get("spec") or {}).get("parentName") or "")
    return chain


class _Delegate(Collector):
    """A shared collector of prometheus_client (process, platform, GC) in this registry too."""

    def __init__(self, collector: Any) -> None:
        self.collector = collector

    def collect(self) -> Iterable[Any]:
        return self.collector.collect()  # type: ignore[no-any-return]


class _Collector(Collector):
    """Every family of :data:`FAMILIES` whose switch is on: the counters and histograms as bumped,
    the gauges read now from the manager's kept counts, caches and engine."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Any]:
        manager = self.metrics.manager
        switches = {ALWAYS}
        if manager is not None:
            config = manager.config
            if config.local_queue_metrics:
                switches.add(LOCAL_QUEUE)
            if config.enable_cluster_queue_resources:
                switches.add(RESOURCES)
            if config.local_queue_metrics and config.enable_cluster_queue_resources:
                switches.add(LOCAL_QUEUE_RESOURCES)
            if manager.engine.fair_sharing:
                switches.add(FAIR_SHARING)
        gauges: dict[str, GaugeMetricFamily] = {}
        for family in FAMILIES:
            if family.switch not in switches or family.name in SERVED_ELSEWHERE:
                continue
            if family.kind == "gauge":
                gauges[family.name] = GaugeMetricFamily(family.name, family.help, labels=family.label_names)
            else:
                for metric in self.metrics._metrics[family.name].collect():
                    # Kueue (client_golang) exports no *_created series
                    metric.samples = [x for x in metric.samples if not x.name.endswith("_created")]
                    yield metric
        build = gauges["kueue_build_info"]
        build.add_metric([_VERSION, "", "", platform.python_version(), "cpython", sys.platform], 1)
        if manager is not None and manager.synced:
            _Gauges(manager, self.metrics.role(), gauges).fill()
        else:
            gauges = {"kueue_build_info": build}
        yield from gauges.values()


class _Gauges:
    """The gauges of one scrape, filled from the manager (only those whose switch is on exist)."""

    def __init__(self, manager: Manager, role: str, gauges: dict[str, GaugeMetricFamily]) -> None:
        self.manager = manager
        self.role = role
        self.gauges = gauges
        self.stats = manager.queue_status.stats

    def set(self, name: str, labels: list[str], value: float) -> None:
        gauge = self.gauges.get(name)
        if gauge is not None:
            gauge.add_metric([*labels, self.role], value)

    def fill(self) -> None:
        manager = self.manager
        cluster_queues = manager.informers.get(CLUSTER_QUEUES).list()
        for cq in cluster_queues:
            self._cluster_queue(cq)
        for lq in (
            manager.informers.get(LOCAL_QUEUES).list() if LOCAL_QUEUE_FAMILIES & set(self.gauges) else ()
        ):
            self._local_queue(lq)
        self._cohorts(cluster_queues)

    def _cluster_queue(self, cq: Obj) -> None:
        manager, name = self.manager, cq["metadata"]["name"]
        s = self.stats.cq(name)
        self.set("kueue_pending_workloads", [name, "active"], s.pending_active)
        self.set("kueue_pending_workloads", [name, "inadmissible"], s.pending_inadmissible)
        active_shapes, parked_shapes = manager.engine.pending_shapes(name)
        self.set("kueue_pending_scheduling_hashes", [name, "active"], active_shapes)
        self.set("kueue_pending_scheduling_hashes", [name, "inadmissible"], parked_shapes)
        self.set("kueue_reserving_active_workloads", [name], s.reserving)
        self.set("kueue_admitted_active_workloads", [name], s.admitted)
        self.set("kueue_finished_workloads", [name], s.finished)
        for (queue, reason, cause), count in sorted(s.unadmitted.items()):
            if queue == name:
                self.set("kueue_unadmitted_workloads", [name, reason, cause], count)
        cohort = _cohort_of(cq)
        chain = _ancestors(manager, cohort)
        self.set("kueue_cluster_queue_info", [name, cohort, chain[-1] if chain else ""], 1)
        active = manager.engine.cluster_queue_active(name)[0]
        terminating = cq["metadata"].get("deletionTimestamp") is not None
        current = "terminated" if terminating else "active" if active else "pending"
        for state in ("pending", "active", "terminated"):
            self.set("kueue_cluster_queue_status", [name, state], 1.0 if state == current else 0.0)
        if "kueue_cluster_queue_nominal_quota" in self.gauges:
            self._quotas(cq, cohort, s)
        if "kueue_cluster_queue_weighted_share" in self.gauges:
            self.set(
                "kueue_cluster_queue_weighted_share",
                [name, cohort],
                _share(manager.engine.weighted_share(name)),
            )

    def _quotas(self, cq: Obj, cohort: str, s: QueueStats) -> None:
        name = cq["metadata"]["name"]
        limits: dict[str, dict[tuple[str, str], float]] = {"borrowingLimit": {}, "lendingLimit": {}}
        for group in (cq.get("spec") or {}).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for resource in flavor.get("resources") or []:
                    for field, found in limits.items():
                        if resource.get(field) is not None:
                            found[(flavor.get("name"), resource.get("name"))] = _value(
                                resource["name"], resource[field]
                            )
        for (flavor, resource), quota in nominal_quotas(cq).items():
            labels = [cohort, name, flavor, resource]
            self.set("kueue_cluster_queue_nominal_quota", labels, _amount(resource, quota))
            for field, family in (
                ("borrowingLimit", "kueue_cluster_queue_borrowing_limit"),
                ("lendingLimit", "kueue_cluster_queue_lending_limit"),
            ):
                self.set(family, labels, limits[field].get((flavor, resource), math.inf))
            self.set(
                "kueue_cluster_queue_resource_reservation",
                labels,
                _amount(resource, s.reservation.get((flavor, resource), 0)),
            )
            self.set(
                "kueue_cluster_queue_resource_usage",
                labels,
                _amount(resource, s.usage.get((flavor, resource), 0)),
            )
        for resource, value in sorted(s.pending_requests.items()):
            self.set("kueue_cluster_queue_resource_pending", [name, resource], _amount(resource, value))

    def _local_queue(self, lq: Obj) -> None:
        meta = lq["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        s = self.stats.lq(namespace, name)
        self.set("kueue_local_queue_pending_workloads", [name, namespace, "active"], s.pending_active)
        self.set(
            "kueue_local_queue_pending_workloads", [name, namespace, "inadmissible"], s.pending_inadmissible
        )
        self.set("kueue_local_queue_reserving_active_workloads", [name, namespace], s.reserving)
        self.set("kueue_local_queue_admitted_active_workloads", [name, namespace], s.admitted)
        self.set("kueue_local_queue_finished_workloads", [name, namespace], s.finished)
        active = self.manager.engine.local_queue_active(namespace, name)[0]
        for state in ("True", "False", "Unknown"):
            self.set(
                "kueue_local_queue_status", [name, namespace, state], 1.0 if state == str(active) else 0.0
            )
        for (queue, reason, cause), count in sorted(s.unadmitted.items()):
            self.set("kueue_local_queue_unadmitted_workloads", [name, namespace, queue, reason, cause], count)
        for (flavor, resource), value in sorted(s.reservation.items()):
            self.set(
                "kueue_local_queue_resource_reservation",
                [name, namespace, flavor, resource],
                _amount(resource, value),
            )
        for (flavor, resource), value in sorted(s.usage.items()):
            self.set(
                "kueue_local_queue_resource_usage",
                [name, namespace, flavor, resource],
                _amount(resource, value),
            )

    def _cohorts(self, cluster_queues: list[Obj]) -> None:
        """The cohort families, from the engine's quota tree (one node per Cohort, named or not)."""
        manager = self.manager
        engine = manager.engine
        admitted: dict[str, int] = {}
        for cq in cluster_queues:
            for cohort in _ancestors(manager, _cohort_of(cq)):
                admitted[cohort] = admitted.get(cohort, 0) + self.stats.cq(cq["metadata"]["name"]).admitted
        for node in engine.nodes():
            if not node.is_cohort:
                continue
            name = node.name
            parent = node.parent.name if node.parent is not None else ""
            self.set("kueue_cohort_info", [name, parent, node.root.name], 1)
            self.set("kueue_cohort_subtree_admitted_active_workloads", [name], admitted.get(name, 0))
            for (flavor, resource), value in sorted(node.subtree.items()):
                self.set("kueue_cohort_subtree_quota", [name, flavor, resource], _amount(resource, value))
            for (flavor, resource), value in sorted(node.usage.items()):
                self.set(
                    "kueue_cohort_subtree_resource_reservations",
                    [name, flavor, resource],
                    _amount(resource, value),
                )
            if "kueue_cohort_weighted_share" in self.gauges:
                self.set("kueue_cohort_weighted_share", [name], _share(engine.weighted_share(name)))


LOCAL_QUEUE_FAMILIES = frozenset(f.name for f in FAMILIES if f.switch in (LOCAL_QUEUE, LOCAL_QUEUE_RESOURCES))


def _amount(resource: str, milli: int) -> float:
    """A quantity as Kueue reports it (``AsApproximateFloat64``): CPU in cores, others whole
    (:func:`~kadmit.engine.to_milli` counts CPU in milli-cores, others in thousandths)."""
    return milli / MILLI


def _value(resource: str, quantity: object) -> float:
    return _amount(resource, to_milli(resource, quantity))


def _share(weighted_share: int) -> float:
    """A weighted share as Kueue reports it; an infinite one (MaxInt64: a zero weight) is NaN."""
    return math.nan if weighted_share >= MAX_INT64 else float(weighted_share)


def metrics_app(metrics: Metrics, middlewares: Sequence[Any] = ()) -> web.Application:
    """``/metrics``; ``middlewares`` guard it (secure serving: :mod:`kadmit.controller.metrics_auth`)."""

    async def handle(_: web.Request) -> web.Response:
        body = metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application(middlewares=list(middlewares))
    app.router.add_get("/metrics", handle)
    return app
