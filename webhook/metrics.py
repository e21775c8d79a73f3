"""Webhook metrics under the names controller-runtime gives them, which Kueue's dashboards use.

``controller_runtime_webhook_requests_total{webhook, code}``,
``controller_runtime_webhook_latency_seconds{webhook}`` and
``controller_runtime_webhook_requests_in_flight{webhook}``, plus kadmit's
``kadmit_webhook_verdicts_total{webhook, allowed}`` to tell denials from admissions.
The manager passes its registry so that everything is served on the one ``/metrics``.
"""

from __future__ import annotations

import time

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.requests = Counter(
            "controller_runtime_webhook_requests_total",
            "Total number of admission requests by HTTP status code.",
            ["webhook", "code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            ["webhook"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served.",
            ["webhook"],
            registry=self.registry,
        )
        self.verdicts = Counter(
            "kadmit_webhook_verdicts_total",
            "Admission verdicts by webhook path and outcome.",
            ["webhook", "allowed"],
            registry=self.registry,
        )

    def verdict(self, path: str, allowed: bool) -> None:
        self.verdicts.labels(path, "true" if allowed else "false").inc()

    def middleware(self, paths: frozenset[str]) -> Middleware:
        """Times and counts requests to ``paths`` (the probes are left out)."""

        @web.middleware
        async def measure(request: web.Request, handler: Handler) -> web.StreamResponse:
            if request.path not in paths:
                return await handler(request)
            gauge = self.in_flight.labels(request.path)
            gauge.inc()
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
                gauge.dec()
                self.latency.labels(request.path).observe(time.perf_counter() - started)
                self.requests.labels(request.path, str(status)).inc()

        return measure
