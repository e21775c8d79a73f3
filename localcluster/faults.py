"""Fault injection for reliability tests: the API server misbehaving the ways real ones do.

A :class:`FaultInjector` is an aiohttp middleware placed in front of the local API server
(``LocalCluster(middlewares=[injector.middleware])``). Every knob is off until set, and every
knob is bounded, by a number of requests or a duration, so a test that forgets to turn a
fault off cannot hang the suite. With a seed, which requests fail is reproducible.

- :meth:`FaultInjector.fail`: answer a fraction of requests with 500, 503 or 429 (429 and 503
  carry ``Retry-After``), as an overloaded or restarting server does.
- :meth:`FaultInjector.delay`: add latency before each request is handled.
- :meth:`FaultInjector.force_gone`: the next *n* watches get what a server whose history was
  compacted sends: HTTP 200 and one ``ERROR`` event holding a ``410 Expired`` Status.
- :meth:`FaultInjector.drop_watches`: cut every open watch connection mid-stream.
- :meth:`FaultInjector.pause`: make the server unreachable: requests hang (``mode="hang"``)
  or have their connection cut (``mode="refuse"``) until :meth:`resume` or the time runs out.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from aiohttp import web

from kadmit.localcluster import errors
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.server import true

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PauseMode = Literal["hang", "refuse"]

MAX_COUNT = 100_000
MAX_SECONDS = 600.0
MAX_LATENCY_SECONDS = 30.0
_FAIL_STATUSES = {
    500: ("InternalError", "Internal error occurred: injected by localcluster faults"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request (injected)"),
    429: ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
}


@dataclass
class _Budget:
    """How long a knob stays on: a number of uses, a deadline on the loop clock, or both."""

    remaining: int | None
    until: float | None

    def live(self, now: float) -> bool:
        if self.until is not None and now >= self.until:
            return False
        return self.remaining is None or self.remaining > 0

    def spend(self) -> None:
        if self.remaining is not None:
            self.remaining -= 1


def _budget(for_requests: int | None, for_seconds: float | None) -> _Budget:
    if for_requests is None and for_seconds is None:
        raise ValueError("a fault needs a bound: give for_requests or for_seconds")
    if for_requests is not None and not 0 < for_requests <= MAX_COUNT:
        raise ValueError(f"for_requests must be between 1 and {MAX_COUNT}")
    if for_seconds is not None and not 0 < for_seconds <= MAX_SECONDS:
        raise ValueError(f"for_seconds must be between 0 and {MAX_SECONDS}")
    until = None if for_seconds is None else asyncio.get_running_loop().time() + for_seconds
    return _Budget(for_requests, until)


class FaultCounts:
    """What was injected so far, for tests to assert on: requests failed, delayed, answered 410,
    paused; watches dropped; failures by HTTP status."""

    def __init__(self) -> None:
        self.failed = self.delayed = self.gone = self.dropped = self.paused = 0
        self.by_status: dict[int, int] = {}


def is_watch(request: web.Request) -> bool:
    return true(request.query.get("watch")) or "/watch/" in request.path


class FaultInjector:
    def __init__(self, seed: int | None = None) -> None:
        self._random = random.Random(seed)
        self._fail: tuple[float, int, int, _Budget] | None = None
        self._latency: tuple[float, _Budget] | None = None
        self._gone = 0
        self._pause: tuple[PauseMode, float] | None = None
        self._resumed = asyncio.Event()
        self._watches: set[asyncio.Transport] = set()
        self.counts = FaultCounts()

    # ---- knobs -------------------------------------------------------------------------

    def fail(
        self,
        fraction: float,
        status: int = 500,
        *,
        for_requests: int | None = None,
        for_seconds: float | None = None,
        retry_after: int = 1,
    ) -> None:
        """Answer ``fraction`` of requests with ``status`` (500, 503 or 429) within the bound."""
        if not 0 < fraction <= 1:
            raise ValueError("fraction must be in (0, 1]")
        if status not in _FAIL_STATUSES:
            raise ValueError(f"status must be one of {sorted(_FAIL_STATUSES)}")
        if not 0 <= retry_after <= 60:
            raise ValueError("retry_after must be between 0 and 60 seconds")
        self._fail = (fraction, status, retry_after, _budget(for_requests, for_seconds))

    def delay(
        self, seconds: float, *, for_requests: int | None = None, for_seconds: float | None = None
    ) -> None:
        """Hold each request ``seconds`` before handling it, within the bound."""
        if not 0 < seconds <= MAX_LATENCY_SECONDS:
            raise ValueError(f"latency must be in (0, {MAX_LATENCY_SECONDS}] seconds")
        self._latency = (seconds, _budget(for_requests, for_seconds))

    def force_gone(self, watches: int = 1) -> None:
        """The next ``watches`` watch requests are told their resourceVersion is too old."""
        if not 0 < watches <= MAX_COUNT:
            raise ValueError(f"watches must be between 1 and {MAX_COUNT}")
        self._gone = watches

    def drop_watches(self) -> int:
        """Cut every open watch connection, as a load balancer or a restart does; return how many."""
        dropped = 0
        for transport in list(self._watches):
            if not transport.is_closing():
                transport.abort()
                dropped += 1
        self._watches.clear()
        self.counts.dropped += dropped
        return dropped

    def pause(self, seconds: float, mode: PauseMode = "hang") -> None:
        """Make the API unreachable for ``seconds`` (or until :meth:`resume`); open watches are cut."""
        if not 0 < seconds <= MAX_SECONDS:
            raise ValueError(f"seconds must be in (0, {MAX_SECONDS}]")
        if mode not in ("hang", "refuse"):
            raise ValueError("mode must be 'hang' or 'refuse'")
        self._resumed.clear()
        self._pause = (mode, asyncio.get_running_loop().time() + seconds)
        self.drop_watches()

    def resume(self) -> None:
        self._pause = None
        self._resumed.set()

    def clear(self) -> None:
        """Turn every knob off."""
        self._fail = None
        self._latency = None
        self._gone = 0
        self.resume()

    # ---- the middleware ----------------------------------------------------------------

    async def _wait_out_pause(self, request: web.Request) -> bool:
        """Apply a pause; return False when the request must be dropped without an answer."""
        if self._pause is None:
            return True
        mode, until = self._pause
        remaining = until - asyncio.get_running_loop().time()
        if remaining <= 0:
            self.resume()
            return True
        self.counts.paused += 1
        if mode == "refuse":
            return False
        try:
            await asyncio.wait_for(self._resumed.wait(), remaining)
        except TimeoutError:
            self.resume()
        return True

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if not await self._wait_out_pause(request):
            if request.transport is not None:
                request.transport.abort()
            # The connection is gone; aiohttp discards whatever is returned here.
            return web.Response(status=503)
        now = asyncio.get_running_loop().time()
        if self._latency is not None:
            seconds, budget = self._latency
            if budget.live(now):
                budget.spend()
                self.counts.delayed += 1
                await asyncio.sleep(seconds)
            else:
                self._latency = None
        if self._fail is not None:
            fraction, status, retry_after, budget = self._fail
            if not budget.live(now):
                self._fail = None
            elif self._random.random() < fraction:
                budget.spend()
                return self._failure(status, retry_after)
        if is_watch(request):
            if self._gone > 0:
                self._gone -= 1
                self.counts.gone += 1
                return await self._gone_stream(request)
            return await self._tracked_watch(request, handler)
        return await handler(request)

    def _failure(self, status: int, retry_after: int) -> web.Response:
        reason, message = _FAIL_STATUSES[status]
        self.counts.failed += 1
        self.counts.by_status[status] = self.counts.by_status.get(status, 0) + 1
        headers: dict[str, str] = {}
        details: Obj | None = None
        if status in (429, 503):
            headers["Retry-After"] = str(retry_after)
            details = {"retryAfterSeconds": retry_after}
        return web.Response(
            status=status, text=json.dumps(errors.status(status, reason, message, details)),
            content_type="application/json", headers=headers,
        )

    async def _gone_stream(self, request: web.Request) -> web.StreamResponse:
        version = request.query.get("resourceVersion", "0")
        event = {
            "type": "ERROR",
            "object": errors.gone(f"too old resource version: {version} (injected)").status,
        }
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(json.dumps(event).encode() + b"\n")
        await response.write_eof()
        return response

    async def _tracked_watch(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        transport = request.transport
        if transport is not None:
            self._watches.add(transport)
        try:
            return await handler(request)
        finally:
            if transport is not None:
                self._watches.discard(transport)
