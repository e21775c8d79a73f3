"""Events are best effort: a slow API server never makes kadmit hold more than MAX_QUEUED of them."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from kadmit.kube import Client, EventRecorder
from kadmit.kube.events import MAX_QUEUED

JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns", "uid": "u"}}


async def test_events_beyond_the_queue_are_dropped_and_the_rest_written(aiohttp_server: Any) -> None:
    gate = asyncio.Event()
    written: list[str] = []

    async def create(request: web.Request) -> web.Response:
        await gate.wait()  # an API server that does not answer yet
        body = await request.json()
        written.append(body["message"])
        return web.json_response(body, status=201)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/events", create)
    server = await aiohttp_server(app)
    async with ApiClient(Configuration(host=str(server.make_url("")).rstrip("/"))) as api_client:
        recorder = EventRecorder(Client(api_client), "kadmit")
        for i in range(MAX_QUEUED + 200):
            recorder.emit(JOB, "Normal", "Test", f"event {i}")
        assert recorder.dropped == 200
        gate.set()
        await recorder.drain()
    assert sorted(written, key=lambda m: int(m.split()[1])) == [f"event {i}" for i in range(MAX_QUEUED)]
