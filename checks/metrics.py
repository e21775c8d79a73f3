"""Prometheus metrics of the check runner and the built-in checks.

They live in a registry the caller may share (``kadmit run`` serves one ``/metrics`` for
everything); ``kadmit checks run --metrics-bind-address`` serves them on their own. A check
declares its counters with :func:`counter`, so that each metric is one line here.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

PLUGIN_SECONDS_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0)


def counter(registry: CollectorRegistry, name: str, documentation: str, *labels: str) -> Counter:
    return Counter(name, documentation, list(labels), registry=registry)


class CheckMetrics:
    """The runner's: verdicts, plugin time and failures, status writes."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = r = registry or CollectorRegistry()
        self.verdicts = counter(r, "kadmit_admission_check_verdicts_total",
                                "Verdicts returned by admission-check plugins, by controller name and state",
                                "controller", "state")
        self.evaluation_seconds = Histogram("kadmit_admission_check_evaluation_duration_seconds",
                                            "Time one plugin took for one verdict", ["controller"],
                                            registry=r, buckets=PLUGIN_SECONDS_BUCKETS)
        self.plugin_failures = counter(r, "kadmit_admission_check_plugin_failures_total",
                                       "Plugin calls that raised or timed out (each yields Pending)",
                                       "controller", "reason")
        self.status_writes = counter(
            r, "kadmit_admission_check_status_writes_total",
            "Workload and AdmissionCheck status writes, by result (written, conflict)", "result")
