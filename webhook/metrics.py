"""Webhook metrics under the names controller-runtime gives them, which Kueue's dashboards use.

``controller_runtime_webhook_requests_total{webhook, code}``,
``controller_runtime_webhook_latency_seconds{webhook}`` and
``controller_runtime_webhook_requests_in_flight{webhook}``, plus kadmit's
``kadmit_webhook_verdicts_total{webhook, allowed}`` to tell denials from admissions.
The manager passes its registry so that everything is served on the one ``/metrics``.

Each request only adds to plain numbers of its path; the series are built from them when
``/metrics`` is read. prometheus_client's own metrics take a lock and validate the labels on
every update, which cost a webhook review several microseconds (``bench/webhook.py``). The
webhook runs on one event loop, and so does the scrape, so the numbers need no lock.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import Histogram
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

REQUESTS = "controller_runtime_webhook_requests"
LATENCY = "controller_runtime_webhook_latency_seconds"
IN_FLIGHT = "controller_runtime_webhook_requests_in_flight"
VERDICTS = "kadmit_webhook_verdicts"
BUCKETS: tuple[float, ...] = Histogram.DEFAULT_BUCKETS
"""controller-runtime's latency histogram uses Prometheus' default buckets, as prometheus_client does."""
_LE = tuple(floatToGoString(bound) for bound in BUCKETS)  # type: ignore[no-untyped-call]


@dataclass
class _Count:
    value: int = 0
    created: float = field(default_factory=time.time)


@dataclass
class _PathNumbers:
    """Everything measured for one webhook path since its first request."""

    created: float = field(default_factory=time.time)
    in_flight: int = 0
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))  # not cumulative
    latency_sum: float = 0.0
    codes: dict[int, _Count] = field(default_factory=dict)
    verdicts: dict[bool, _Count] = field(default_factory=dict)

    def observe(self, seconds: float, status: int) -> None:
        self.buckets[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.latency_sum += seconds
        code = self.codes.get(status)
        if code is None:
            code = self.codes[status] = _Count()
        code.value += 1


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._paths: dict[str, _PathNumbers] = {}
        self.registry.register(_WebhookCollector(self._paths))

    def _numbers(self, path: str) -> _PathNumbers:
        numbers = self._paths.get(path)
        if numbers is None:
            numbers = self._paths[path] = _PathNumbers()
        return numbers

    def verdict(self, path: str, allowed: bool) -> None:
        verdicts = self._numbers(path).verdicts
        count = verdicts.get(allowed)
        if count is None:
            count = verdicts[allowed] = _Count()
        count.value += 1

    def instrument(self, path: str, handler: Handler) -> Handler:
        """``handler`` timed and counted under ``path`` (the probes are not instrumented).

        A wrapper per path rather than a middleware: aiohttp runs a middleware for every request
        of the application, and builds its chain on the way."""

        async def measure(request: web.Request) -> web.StreamResponse:
            numbers = self._numbers(path)
            numbers.in_flight += 1
            started = time.perf_counter()
            status = 500
            try:
                response = await handler(request)
                status = response.status
                return response
            except web.HTTPException as exc:
                status = exc.status
                raise
            finally:
                numbers.in_flight -= 1
                numbers.observe(time.perf_counter() - started, status)

        return measure


class _WebhookCollector(Collector):
    """The series, in the shapes prometheus_client's Counter, Gauge and Histogram would give them."""

    def __init__(self, paths: dict[str, _PathNumbers]) -> None:
        self.paths = paths

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(REQUESTS, "Total number of admission requests by HTTP status code.",
                                       labels=["webhook", "code"])
        latency = Metric(LATENCY, "Histogram of the latency of processing admission requests", "histogram")
        in_flight = GaugeMetricFamily(IN_FLIGHT, "Current number of admission requests being served.",
                                      labels=["webhook"])
        verdicts = CounterMetricFamily(VERDICTS, "Admission verdicts by webhook path and outcome.",
                                       labels=["webhook", "allowed"])
        for path, numbers in list(self.paths.items()):
            for status, count in list(numbers.codes.items()):
                requests.add_metric([path, str(status)], count.value, created=count.created)
            in_flight.add_metric([path], numbers.in_flight)
            if numbers.codes:  # latency series from the first answered request on
                cumulative = 0
                for le, observed in zip(_LE, numbers.buckets, strict=True):
                    cumulative += observed
                    latency.add_sample(f"{LATENCY}_bucket", {"webhook": path, "le": le}, cumulative)
                latency.add_sample(f"{LATENCY}_count", {"webhook": path}, cumulative)
                latency.add_sample(f"{LATENCY}_sum", {"webhook": path}, numbers.latency_sum)
                latency.add_sample(f"{LATENCY}_created", {"webhook": path}, numbers.created)
            for allowed, count in list(numbers.verdicts.items()):
                label = "true" if allowed else "false"
                verdicts.add_metric([path, label], count.value, created=count.created)
        yield from (requests, latency, in_flight, verdicts)
