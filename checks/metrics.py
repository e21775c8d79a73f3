"""Prometheus metrics of the check runner: verdicts, plugin time and failures, status writes.

They live in a registry the caller may share (``kadmit run`` serves one ``/metrics`` for
everything); ``kadmit checks run --metrics-bind-address`` serves them on their own.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram


class CheckMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.verdicts = Counter(
            "kadmit_admission_check_verdicts_total",
            "Verdicts returned by admission-check plugins, by controller name and state",
            ["controller", "state"],
            registry=self.registry,
        )
        self.evaluation_seconds = Histogram(
            "kadmit_admission_check_evaluation_duration_seconds",
            "Time one plugin took for one verdict",
            ["controller"],
            registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0),
        )
        self.plugin_failures = Counter(
            "kadmit_admission_check_plugin_failures_total",
            "Plugin calls that raised or timed out (each yields Pending)",
            ["controller", "reason"],
            registry=self.registry,
        )
        self.status_writes = Counter(
            "kadmit_admission_check_status_writes_total",
            "Workload and AdmissionCheck status writes, by result (written, conflict)",
            ["result"],
            registry=self.registry,
        )
