"""Events are best effort: a slow API server never makes kadmit hold more than MAX_QUEUED of them,
and they never go faster than Kueue's client budget lets its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from kadmit.kube import Client, EventRecorder
from kadmit.kube.events import MAX_QUEUED
from kadmit.kube.ratelimit import KUEUE_BURST, KUEUE_QPS, TokenBucket

JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns", "uid": "u"}}


@asynccontextmanager
async def events_api(aiohttp_server: Any, answer: asyncio.Event, written: list[str]) -> AsyncIterator[Client]:
    """A client of an API server that records each Event's message once ``answer`` is set."""

    async def create(request: web.Request) -> web.Response:
        await answer.wait()
        body = await request.json()
        written.append(body["message"])
        return web.json_response(body, status=201)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/events", create)
    server = await aiohttp_server(app)
    async with ApiClient(Configuration(host=str(server.make_url("")).rstrip("/"))) as api_client:
        yield Client(api_client)


def in_order(written: list[str]) -> list[str]:
    return sorted(written, key=lambda m: int(m.split()[1]))


async def test_events_beyond_the_queue_are_dropped_and_the_rest_written(aiohttp_server: Any) -> None:
    answer = asyncio.Event()  # an API server that does not answer yet
    written: list[str] = []
    async with events_api(aiohttp_server, answer, written) as client:
        recorder = EventRecorder(client, "kadmit")
        for i in range(MAX_QUEUED + 200):
            recorder.emit(JOB, "Normal", "Test", f"event {i}")
        assert recorder.dropped == 200
        answer.set()
        await recorder.drain()
    assert in_order(written) == [f"event {i}" for i in range(MAX_QUEUED)]


class Gate:
    """A pace that lets ``allowed`` events go at once and holds the rest until ``opened``."""

    def __init__(self, allowed: int) -> None:
        self.allowed = allowed
        self.opened = asyncio.Event()

    async def wait(self) -> None:
        if self.allowed > 0:
            self.allowed -= 1
            return
        await self.opened.wait()


async def test_events_wait_for_their_pace_and_beyond_the_queue_are_dropped(aiohttp_server: Any) -> None:
    answer = asyncio.Event()
    answer.set()  # an API server that answers at once
    written: list[str] = []
    async with events_api(aiohttp_server, answer, written) as client:
        gate = Gate(allowed=3)
        recorder = EventRecorder(client, "kadmit", pace=gate)
        for i in range(MAX_QUEUED + 10):
            recorder.emit(JOB, "Normal", "Test", f"event {i}")
        assert recorder.dropped == 10
        for _ in range(200):  # the three the pace lets go are written; the rest wait for it
            if len(written) == 3:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert len(written) == 3
        gate.opened.set()
        await recorder.drain()
    assert in_order(written) == [f"event {i}" for i in range(MAX_QUEUED)]


async def test_the_default_pace_is_kueues_client_budget() -> None:
    """Bursts of 500, then 300 a second: what Kueue's clientConnection defaults allow its events."""
    async with ApiClient(Configuration(host="http://127.0.0.1:1")) as api_client:
        recorder = EventRecorder(Client(api_client), "kadmit")
    assert isinstance(recorder.pace, TokenBucket)
    assert [recorder.pace.reserve() for _ in range(KUEUE_BURST)] == [0.0] * KUEUE_BURST
    assert 0 < recorder.pace.reserve() <= 1 / KUEUE_QPS
    assert (KUEUE_QPS, KUEUE_BURST) == (300.0, 500)
