"""Prometheus metrics with Kueue's names and labels (contract §8), served on ``/metrics``.

Counters and histograms are bumped as the loops act (admissions, reservations, evictions,
preemptions, scheduling attempts). Gauges are read when Prometheus scrapes: the queue counts from
:class:`~kadmit.controller.queue_stats.IncrementalStats`, which the Workload events keep equal to a
count of the Workloads the API holds (so a scrape costs the queues, never the Workloads), the rest
from the caches and the engine the loops read. Every series carries
``replica_role`` (``leader``, ``follower`` or ``standalone``).
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Callable, Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kadmit import workload as ws
from kadmit.controller.queue_stats import nominal_quotas
from kadmit.controller.scheduler import SchedulerObserver
from kadmit.engine import Decisions, Reservation
from kadmit.kube import Obj
from kadmit.kube.resources import CLUSTER_QUEUES, COHORTS, LOCAL_QUEUES

if TYPE_CHECKING:
    from kadmit.controller.manager import Manager

ROLE = "replica_role"
try:
    _VERSION = version("kadmit")
except PackageNotFoundError:  # running from a source tree that was never installed
    _VERSION = "unknown"
WAIT_BUCKETS = (
    1.0,
    2.0,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1200.0,
    1800.0,
    3600.0,
    7200.0,
    21600.0,
    43200.0,
    86400.0,
)
ATTEMPT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def priority_class(wl: Obj) -> str:
    return str(((wl.get("spec") or {}).get("priorityClassRef") or {}).get("name") or "")


def _cluster_queue(wl: Obj) -> str:
    return str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")


def _queued_since(wl: Obj) -> float | None:
    """Kueue's wait start: the last Requeued=True transition, else the creation time."""
    requeued = ws.find_condition(wl, ws.REQUEUED)
    if requeued is not None and requeued.get("status") == "True":
        since = ws.parse_time(requeued.get("lastTransitionTime"))
        if since is not None:
            return since
    return ws.parse_time(wl.get("metadata", {}).get("creationTimestamp"))


class Metrics(SchedulerObserver):
    def __init__(
        self, role: Callable[[], str] = lambda: "standalone", registry: CollectorRegistry | None = None
    ) -> None:
        self.registry = registry or CollectorRegistry()
        self.role = role
        self.manager: Manager | None = None
        r = self.registry
        cq_pc = ["cluster_queue", "priority_class", ROLE]
        lq_pc = ["name", "namespace", "priority_class", ROLE]
        self.admission_attempts = Counter(
            "kueue_admission_attempts_total",
            "Scheduling cycles that tried to admit workloads",
            ["result", ROLE],
            registry=r,
        )
        self.attempt_duration = Histogram(
            "kueue_admission_attempt_duration_seconds",
            "Duration of a scheduling cycle",
            ["result", ROLE],
            buckets=ATTEMPT_BUCKETS,
            registry=r,
        )
        self.quota_reserved = Counter(
            "kueue_quota_reserved_workloads_total",
            "Workloads that got a quota reservation",
            cq_pc,
            registry=r,
        )
        self.quota_reserved_wait = Histogram(
            "kueue_quota_reserved_wait_time_seconds",
            "Time from creation or requeue to quota reservation",
            cq_pc,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.admitted_total = Counter(
            "kueue_admitted_workloads_total", "Workloads admitted", cq_pc, registry=r
        )
        self.admission_wait = Histogram(
            "kueue_admission_wait_time_seconds",
            "Time from creation or requeue to admission",
            cq_pc,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.checks_wait = Histogram(
            "kueue_admission_checks_wait_time_seconds",
            "Time from quota reservation to admission",
            cq_pc,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.evicted_total = Counter(
            "kueue_evicted_workloads_total",
            "Workloads evicted",
            ["cluster_queue", "reason", "underlying_cause", "priority_class", ROLE],
            registry=r,
        )
        self.preempted_total = Counter(
            "kueue_preempted_workloads_total",
            "Workloads preempted",
            ["preempting_cluster_queue", "reason", ROLE],
            registry=r,
        )
        self.lq_quota_reserved = Counter(
            "kueue_local_queue_quota_reserved_workloads_total",
            "Workloads that got a quota reservation, per LocalQueue",
            lq_pc,
            registry=r,
        )
        self.lq_admitted = Counter(
            "kueue_local_queue_admitted_workloads_total",
            "Workloads admitted, per LocalQueue",
            lq_pc,
            registry=r,
        )
        self.lq_evicted = Counter(
            "kueue_local_queue_evicted_workloads_total",
            "Workloads evicted, per LocalQueue",
            ["name", "namespace", "reason", "underlying_cause", "priority_class", ROLE],
            registry=r,
        )
        self.finished_total = Counter(
            "kueue_finished_workloads_total", "Workloads finished", cq_pc, registry=r
        )
        self.execution_time = Histogram(
            "kueue_execution_time_seconds",
            "Time a workload was admitted, until it finished",
            cq_pc,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.ready_wait = Histogram(
            "kueue_ready_wait_time_seconds",
            "Time from creation or requeue until the pods are ready",
            cq_pc,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.admitted_until_ready = Histogram(
            "kueue_admitted_until_ready_wait_time_seconds",
            "Time from admission until the pods are ready",
            cq_pc,
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.registry.register(_Gauges(self))

    def bind(self, manager: Manager) -> None:
        """Read the gauges from ``manager`` and count finishing Workloads as its informer sees them."""
        self.manager = manager
        manager.workloads.add_handler(self._on_workload)

    def _on_workload(self, event: str, new: Obj, old: Obj | None) -> None:
        # Only the replica that writes counts, so that a sum over replicas counts each once.
        if event == "DELETED" or old is None or self.manager is None or not self.manager.leading:
            return
        if ws.is_true(new, ws.PODS_READY) and not ws.is_true(old, ws.PODS_READY):
            self._pods_ready(new)
        if not ws.is_true(new, ws.FINISHED) or ws.is_true(old, ws.FINISHED):
            return
        cq, pc, role = _cluster_queue(new), priority_class(new), self.role()
        self.finished_total.labels(cq, pc, role).inc()
        finished = ws.parse_time((ws.find_condition(new, ws.FINISHED) or {}).get("lastTransitionTime"))
        admitted = ws.find_condition(new, ws.ADMITTED)
        since = ws.parse_time((admitted or {}).get("lastTransitionTime"))
        past = int((new.get("status") or {}).get("accumulatedPastExecutionTimeSeconds") or 0)
        if finished is not None and since is not None and admitted and admitted.get("status") == "True":
            self.execution_time.labels(cq, pc, role).observe(past + max(finished - since, 0.0))

    # -- observer hooks

    def cycle(self, seconds: float, decisions: Decisions) -> None:
        role = self.role()
        for result, count in (
            ("success", decisions.attempts_success),
            ("inadmissible", decisions.attempts_inadmissible),
        ):
            if count:
                self.admission_attempts.labels(result, role).inc(count)
                self.attempt_duration.labels(result, role).observe(seconds)

    def reserved(self, workload: Obj, reservation: Reservation, now: float) -> None:
        cq, pc, role = reservation.cluster_queue, priority_class(workload), self.role()
        self.quota_reserved.labels(cq, pc, role).inc()
        since = _queued_since(workload)
        if since is not None:
            self.quota_reserved_wait.labels(cq, pc, role).observe(max(now - since, 0.0))
        meta = workload["metadata"]
        self.lq_quota_reserved.labels(_lq(workload), meta.get("namespace", ""), pc, role).inc()

    def admitted(self, workload: Obj, now: float) -> None:
        cq, pc, role = _cluster_queue(workload), priority_class(workload), self.role()
        self.admitted_total.labels(cq, pc, role).inc()
        since = _queued_since(workload)
        if since is not None:
            self.admission_wait.labels(cq, pc, role).observe(max(now - since, 0.0))
        reserved = ws.find_condition(workload, ws.QUOTA_RESERVED)
        reserved_at = ws.parse_time((reserved or {}).get("lastTransitionTime"))
        if reserved_at is not None:
            self.checks_wait.labels(cq, pc, role).observe(max(now - reserved_at, 0.0))
        self.lq_admitted.labels(_lq(workload), workload["metadata"].get("namespace", ""), pc, role).inc()

    def evicted(self, workload: Obj, reason: str, underlying_cause: str) -> None:
        pc, role = priority_class(workload), self.role()
        self.evicted_total.labels(_cluster_queue(workload), reason, underlying_cause, pc, role).inc()
        self.lq_evicted.labels(
            _lq(workload), workload["metadata"].get("namespace", ""), reason, underlying_cause, pc, role
        ).inc()

    def preempted(self, preemptor_cluster_queue: str, reason: str) -> None:
        self.preempted_total.labels(preemptor_cluster_queue, reason, self.role()).inc()

    def _pods_ready(self, wl: Obj) -> None:
        ready = ws.find_condition(wl, ws.PODS_READY) or {}
        if ready.get("reason") != "Started":  # the first readiness, not a recovery
            return
        at = ws.parse_time(ready.get("lastTransitionTime"))
        admitted = ws.parse_time((ws.find_condition(wl, ws.ADMITTED) or {}).get("lastTransitionTime"))
        queued = _queued_since(wl)
        cq, pc, role = _cluster_queue(wl), priority_class(wl), self.role()
        if at is not None and admitted is not None:
            self.admitted_until_ready.labels(cq, pc, role).observe(max(at - admitted, 0.0))
        if at is not None and queued is not None:
            self.ready_wait.labels(cq, pc, role).observe(max(at - queued, 0.0))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _root_cohort(manager: Manager, cohort: str) -> str:
    """The top of ``cohort``'s tree, following Cohort objects' ``spec.parentName`` (cycles stop)."""
    seen: set[str] = set()
    while cohort and cohort not in seen:
        seen.add(cohort)
        obj = manager.informers.get(COHORTS).get(None, cohort)
        parent = str(((obj or {}).get("spec") or {}).get("parentName") or "")
        if not parent:
            return cohort
        cohort = parent
    return cohort


def _lq(wl: Obj) -> str:
    return str((wl.get("spec") or {}).get("queueName") or "")


class _Gauges:
    """The gauges, read at scrape time: queue counts as kept from the events, the rest from the
    manager's caches and engine."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily]:
        manager = self.metrics.manager
        if manager is None or not manager.synced:
            return
        role = self.metrics.role()
        stats = manager.queue_status.stats
        pending = GaugeMetricFamily(
            "kueue_pending_workloads", "Pending workloads", labels=["cluster_queue", "status", ROLE]
        )
        reserving = GaugeMetricFamily(
            "kueue_reserving_active_workloads",
            "Workloads holding a reservation",
            labels=["cluster_queue", ROLE],
        )
        admitted = GaugeMetricFamily(
            "kueue_admitted_active_workloads",
            "Admitted, unfinished workloads",
            labels=["cluster_queue", ROLE],
        )
        status = GaugeMetricFamily(
            "kueue_cluster_queue_status",
            "ClusterQueue status (1 for the current one)",
            labels=["cluster_queue", "status", ROLE],
        )
        build = GaugeMetricFamily(
            "kueue_build_info",
            "kadmit's build",
            labels=["git_version", "git_commit", "build_date", "go_version", "compiler", "platform", ROLE],
        )
        build.add_metric([_VERSION, "", "", platform.python_version(), "cpython", sys.platform, role], 1)
        info = GaugeMetricFamily(
            "kueue_cluster_queue_info",
            "A ClusterQueue's place in the cohort tree",
            labels=["cluster_queue", "parent_cohort", "root_cohort", ROLE],
        )
        finished = GaugeMetricFamily(
            "kueue_finished_workloads",
            "Finished workloads not deleted yet",
            labels=["cluster_queue", ROLE],
        )
        families = [pending, reserving, admitted, finished, status, build, info]
        resources = manager.config.enable_cluster_queue_resources
        nominal = GaugeMetricFamily(
            "kueue_cluster_queue_nominal_quota",
            "Nominal quota",
            labels=["cohort", "cluster_queue", "flavor", "resource", ROLE],
        )
        reservation = GaugeMetricFamily(
            "kueue_cluster_queue_resource_reservation",
            "Reserved quota",
            labels=["cohort", "cluster_queue", "flavor", "resource", ROLE],
        )
        usage = GaugeMetricFamily(
            "kueue_cluster_queue_resource_usage",
            "Quota used by admitted workloads",
            labels=["cohort", "cluster_queue", "flavor", "resource", ROLE],
        )
        if resources:
            families += [nominal, reservation, usage]
        for cq in manager.informers.get(CLUSTER_QUEUES).list():
            name = cq["metadata"]["name"]
            s = stats.cluster_queues.get(name)
            pending.add_metric([name, "active", role], s.pending_active if s else 0)
            pending.add_metric([name, "inadmissible", role], s.pending_inadmissible if s else 0)
            reserving.add_metric([name, role], s.reserving if s else 0)
            admitted.add_metric([name, role], s.admitted if s else 0)
            finished.add_metric([name, role], s.finished if s else 0)
            parent = str(
                (cq.get("spec") or {}).get("cohortName") or (cq.get("spec") or {}).get("cohort") or ""
            )
            info.add_metric([name, parent, _root_cohort(manager, parent), role], 1)
            active = manager.engine.cluster_queue_active(name)[0]
            terminating = cq["metadata"].get("deletionTimestamp") is not None
            current = "terminated" if terminating else "active" if active else "pending"
            for state in ("pending", "active", "terminated"):
                status.add_metric([name, state, role], 1.0 if state == current else 0.0)
            if resources:
                cohort = str(
                    (cq.get("spec") or {}).get("cohortName") or (cq.get("spec") or {}).get("cohort") or ""
                )
                for (flavor, resource), value in nominal_quotas(cq).items():
                    labels = [cohort, name, flavor, resource, role]
                    nominal.add_metric(labels, value / 1000)
                    reservation.add_metric(
                        labels, (s.reservation.get((flavor, resource), 0) if s else 0) / 1000
                    )
                    usage.add_metric(labels, (s.usage.get((flavor, resource), 0) if s else 0) / 1000)
        if manager.config.local_queue_metrics:
            lq_pending = GaugeMetricFamily(
                "kueue_local_queue_pending_workloads",
                "Pending workloads",
                labels=["name", "namespace", "status", ROLE],
            )
            lq_reserving = GaugeMetricFamily(
                "kueue_local_queue_reserving_active_workloads",
                "Workloads holding a reservation",
                labels=["name", "namespace", ROLE],
            )
            lq_admitted = GaugeMetricFamily(
                "kueue_local_queue_admitted_active_workloads",
                "Admitted, unfinished workloads",
                labels=["name", "namespace", ROLE],
            )
            lq_finished = GaugeMetricFamily(
                "kueue_local_queue_finished_workloads",
                "Finished workloads not deleted yet",
                labels=["name", "namespace", ROLE],
            )
            for lq in manager.informers.get(LOCAL_QUEUES).list():
                meta = lq["metadata"]
                key = (meta.get("namespace", ""), meta["name"])
                s = stats.local_queues.get(key)
                lq_pending.add_metric([key[1], key[0], "active", role], s.pending_active if s else 0)
                lq_pending.add_metric(
                    [key[1], key[0], "inadmissible", role], s.pending_inadmissible if s else 0
                )
                lq_reserving.add_metric([key[1], key[0], role], s.reserving if s else 0)
                lq_admitted.add_metric([key[1], key[0], role], s.admitted if s else 0)
                lq_finished.add_metric([key[1], key[0], role], s.finished if s else 0)
            families += [lq_pending, lq_reserving, lq_admitted, lq_finished]
        yield from families


def metrics_app(metrics: Metrics, middlewares: Sequence[Any] = ()) -> web.Application:
    """``/metrics``; ``middlewares`` guard it (secure serving: :mod:`kadmit.controller.metrics_auth`)."""

    async def handle(_: web.Request) -> web.Response:
        body = metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application(middlewares=list(middlewares))
    app.router.add_get("/metrics", handle)
    return app
