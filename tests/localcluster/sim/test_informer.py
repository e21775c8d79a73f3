"""The informer against a scripted server: resume after a closed stream, relist after 410 Gone."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from kadmit.localcluster.interfaces import Endpoint
from kadmit.localcluster.sim.client import Resource, RestClient, selecting
from kadmit.localcluster.sim.informer import Informer

THINGS = Resource("example.com", "v1", "things", namespaced=False)


def thing(name: str, version: int) -> dict[str, object]:
    return {"metadata": {"name": name, "resourceVersion": str(version)}}


class Script:
    """Lists and watch streams handed out in order; records the resourceVersions watched from."""

    def __init__(self) -> None:
        self.lists = [
            {"metadata": {"resourceVersion": "2"}, "items": [thing("a", 1), thing("b", 2)]},
            {"metadata": {"resourceVersion": "9"}, "items": [thing("a", 7), thing("c", 9)]},
        ]
        self.watches: list[list[dict[str, object]]] = [
            [{"type": "ADDED", "object": thing("d", 3)}],  # then the stream ends normally
            [{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired",
                                          "message": "too old resource version"}}],
            [],  # after the relist: stay open until the test ends
        ]
        self.watched_from: list[str] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return web.json_response(self.lists.pop(0))
        self.watched_from.append(request.query["resourceVersion"])
        events = self.watches.pop(0)
        response = web.StreamResponse()
        await response.prepare(request)
        for event in events:
            await response.write(json.dumps(event).encode() + b"\n")
        if not events:
            await asyncio.sleep(30)
        await response.write_eof()
        return response


@pytest.fixture
async def client(aiohttp_server) -> AsyncIterator[tuple[RestClient, Script]]:  # type: ignore[no-untyped-def]
    script = Script()
    app = web.Application()
    app.router.add_get("/apis/example.com/v1/things", script.handle)
    server = await aiohttp_server(app)
    rest = RestClient(Endpoint(url=str(server.make_url("")).rstrip("/")))
    yield rest, script
    await rest.close()


async def test_resume_then_relist_reports_the_difference(client: tuple[RestClient, Script]) -> None:
    rest, script = client
    events: list[tuple[str, str, str]] = []
    relisted = asyncio.Event()

    def record(kind: str, obj: dict[str, object], old: dict[str, object] | None) -> None:
        metadata = obj["metadata"]
        assert isinstance(metadata, dict)
        events.append((kind, metadata["name"], metadata["resourceVersion"]))
        if metadata["name"] == "c":
            relisted.set()

    informer = Informer(rest, THINGS, record)
    informer.start()
    try:
        await asyncio.wait_for(relisted.wait(), 5)
    finally:
        await informer.stop()
    assert script.watched_from == ["2", "3", "9"]  # resumed from the last event, then from the relist
    assert events == [
        ("ADDED", "a", "1"), ("ADDED", "b", "2"),
        ("ADDED", "d", "3"),
        ("DELETED", "b", "2"), ("DELETED", "d", "3"), ("MODIFIED", "a", "7"), ("ADDED", "c", "9"),
    ]
    assert sorted(name for _, name in informer.cache) == ["a", "c"]
    assert informer.relists == 2


async def test_the_query_narrows_both_the_list_and_the_watch(aiohttp_server) -> None:  # type: ignore[no-untyped-def]
    """``selecting`` makes the server filter: by labels, to one object by name, or both."""
    queries: list[tuple[str, dict[str, str]]] = []
    watching = asyncio.Event()

    async def handle(request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        if query.pop("watch", None) != "true":
            queries.append(("list", query))
            return web.json_response({"metadata": {"resourceVersion": "1"}, "items": [thing("one", 1)]})
        queries.append(("watch", {k: v for k, v in query.items() if k.endswith("Selector")}))
        watching.set()
        response = web.StreamResponse()
        await response.prepare(request)
        await asyncio.sleep(30)
        return response

    app = web.Application()
    app.router.add_get("/apis/example.com/v1/things", handle)
    server = await aiohttp_server(app)
    rest = RestClient(Endpoint(url=str(server.make_url("")).rstrip("/")))
    informer = Informer(rest, THINGS, lambda kind, obj, old: None, selecting("tier=gpu", name="one"))
    informer.start()
    try:
        await asyncio.wait_for(watching.wait(), 5)
    finally:
        await informer.stop()
        await rest.close()
    wanted = {"labelSelector": "tier=gpu", "fieldSelector": "metadata.name=one"}
    assert queries == [("list", wanted), ("watch", wanted)]
    assert selecting() == {}
    assert selecting("app=web") == {"labelSelector": "app=web"}
    assert selecting(name="x") == {"fieldSelector": "metadata.name=x"}
