"""A tiny API server on aiohttp that serves list and watch of any resource path.

It exists for the informer's edge cases that a real server rarely shows on demand: a watch
history compacted away (410, as an HTTP status or an ERROR event), bookmarks, watches cut off
mid-stream, paginated lists, server errors. It keeps one store for all paths.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

from aiohttp import web

Obj = dict[str, Any]


class FakeApiServer:
    def __init__(self) -> None:
        self.rv = 100
        self.objects: dict[tuple[str, str | None, str], Obj] = {}  # (collection path, ns, name)
        self.history: list[tuple[int, str, str, Obj]] = []  # (rv, collection path, type, object)
        self.compacted_below = 0
        self.fail_next: list[int] = []  # HTTP statuses to answer the next requests with
        self.gone_as_event = False  # answer a compacted watch with an ERROR event instead of HTTP 410
        self.page_size: int | None = None
        self.end_watches_at_once = False  # a proxy that accepts a watch and closes it straight away
        self.list_calls = 0
        self.watch_calls = 0
        self._changed = asyncio.Condition()
        self._cut = asyncio.Event()
        self.app = web.Application()
        self.app.router.add_route("GET", "/{path:.*}", self._get)

    # -- driving the store

    async def put(self, collection: str, obj: Obj, event: str | None = None) -> Obj:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        key = (collection, meta.get("namespace"), meta["name"])
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        kind = event or ("MODIFIED" if key in self.objects else "ADDED")
        self.objects[key] = obj
        await self._record(collection, kind, obj)
        return obj

    async def delete(self, collection: str, namespace: str | None, name: str) -> None:
        obj = self.objects.pop((collection, namespace, name))
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        await self._record(collection, "DELETED", obj)

    async def bookmark(self, collection: str) -> None:
        self.rv += 1
        await self._record(collection, "BOOKMARK", {"metadata": {"resourceVersion": str(self.rv)}})

    def compact(self) -> None:
        """Forget the history: every watch from an older version now gets 410."""
        self.compacted_below = self.rv + 1
        self.history.clear()

    def silently_change(
        self, collection: str, obj: Obj | None, delete: tuple[str | None, str] | None = None
    ) -> None:
        """Change the store without any watch event, as if the events were compacted away."""
        self.rv += 1
        if obj is not None:
            obj = copy.deepcopy(obj)
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[(collection, obj["metadata"].get("namespace"), obj["metadata"]["name"])] = obj
        if delete is not None:
            self.objects.pop((collection, *delete))
        self.compact()

    def cut_watches(self) -> None:
        """Drop every open watch connection mid-stream."""
        self._cut.set()

    async def _record(self, collection: str, kind: str, obj: Obj) -> None:
        async with self._changed:
            self.history.append((self.rv, collection, kind, copy.deepcopy(obj)))
            self._changed.notify_all()

    # -- serving

    async def _get(self, request: web.Request) -> web.StreamResponse:
        if self.fail_next:
            status = self.fail_next.pop(0)
            return web.json_response({"kind": "Status", "status": "Failure", "reason": "InternalError",
                                      "message": "injected failure", "code": status}, status=status)
        collection = "/" + request.match_info["path"]
        if request.query.get("watch") == "true":
            return await self._watch(request, collection)
        self.list_calls += 1
        items = [copy.deepcopy(o) for (c, _, _), o in sorted(self.objects.items(), key=lambda kv: str(kv[0]))
                 if c == collection]
        start = int(request.query.get("continue") or 0)
        limit = int(request.query.get("limit") or 0)
        size = min(x for x in (self.page_size or 10**9, limit or 10**9))
        page = items[start:start + size]
        meta: Obj = {"resourceVersion": str(self.rv)}
        if start + size < len(items):
            meta["continue"] = str(start + size)
        return web.json_response({"kind": "ThingList", "apiVersion": "example.com/v1", "metadata": meta,
                                  "items": page})

    async def _watch(self, request: web.Request, collection: str) -> web.StreamResponse:
        self.watch_calls += 1
        since = int(request.query["resourceVersion"])
        if since < self.compacted_below - 1 and not self.gone_as_event:
            return web.json_response({"kind": "Status", "status": "Failure", "reason": "Expired",
                                      "message": "too old resource version", "code": 410}, status=410)
        response = web.StreamResponse()
        await response.prepare(request)
        if self.end_watches_at_once:
            return response
        if since < self.compacted_below - 1:
            error = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired",
                                                 "message": "too old resource version"}}
            await response.write(json.dumps(error).encode() + b"\n")
            return response
        self._cut.clear()
        sent = since
        while True:
            for rv, c, kind, obj in list(self.history):
                if rv > sent and c == collection:
                    await response.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
                    sent = rv
            waiter = asyncio.ensure_future(self._wait_change(collection, sent))
            cut = asyncio.ensure_future(self._cut.wait())
            done, pending = await asyncio.wait({waiter, cut}, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            if cut in done:
                if request.transport is not None:
                    request.transport.close()
                return response

    async def _wait_change(self, collection: str, sent: int) -> None:
        async with self._changed:
            await self._changed.wait_for(
                lambda: any(rv > sent and c == collection for rv, c, _, _ in self.history))
