"""Watch streams: newline-delimited ``WatchEvent`` JSON over a chunked response.

A watch from resourceVersion N replays the kept history after N, then follows live events; a
watch without one (or from "0") starts with synthetic ADDED events for what exists. A version
older than the kept history gets an ERROR event with a 410 ``Status`` (the client must relist).
Selectors are evaluated on both the old and the new object, so an object that stops matching is
seen as DELETED and one that starts matching as ADDED, as on a real server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from kadmit.localcluster.api import Api
from kadmit.localcluster.errors import ApiError, bad_request, gone, status
from kadmit.localcluster.objects import Obj, dumps
from kadmit.localcluster.resources import ResourceType
from kadmit.localcluster.store import Event, TooOldResourceVersion

Predicate = Callable[[Obj], bool]


@dataclass
class WatchParams:
    namespace: str | None
    label: Predicate | None
    field: Predicate | None
    resource_version: str
    timeout: float | None
    bookmarks: bool
    send_initial_events: bool


def _matches(obj: Obj | None, params: WatchParams) -> bool:
    if obj is None:
        return False
    if params.namespace is not None and obj["metadata"].get("namespace") != params.namespace:
        return False
    if params.label is not None and not params.label(obj):
        return False
    return params.field is None or params.field(obj)


async def serve_watch(
    request: web.Request, api: Api, rt: ResourceType, params: WatchParams, bookmark_interval: float
) -> web.StreamResponse:
    store = api.store
    since: int | None = None
    if params.resource_version not in ("", "0") and not params.send_initial_events:
        try:
            since = int(params.resource_version)
        except ValueError:
            raise bad_request(f"invalid resource version: {params.resource_version}") from None
    if since is not None and since > store.resource_version:
        # A version this server never issued (e.g. from before a restart): the client must relist.
        raise ApiError(too_large(since, store.resource_version))
    response = web.StreamResponse(headers={"Content-Type": "application/json", "Cache-Control": "no-cache"})
    response.enable_chunked_encoding()
    try:
        watcher, replay = store.watch(rt.key, since)
    except TooOldResourceVersion as exc:
        await response.prepare(request)
        await response.write(dumps({"type": "ERROR", "object": gone(str(exc)).status}) + b"\n")
        await response.write_eof()
        return response
    initial: list[Obj] = []
    if since is None:
        initial = store.list(rt.group, rt.plural, params.namespace if rt.namespaced else None)
    start_rv = store.resource_version
    try:
        await response.prepare(request)
        for obj in await api.to_version(rt, [o for o in initial if _matches(o, params)]):
            await response.write(dumps({"type": "ADDED", "object": obj}) + b"\n")
        if params.send_initial_events and params.bookmarks:
            await response.write(_bookmark(rt, start_rv, initial_end=True))
        await _write_lines(response, [await _line(api, rt, past, params) for past in replay])
        deadline = time.monotonic() + params.timeout if params.timeout else None
        while True:
            wait = bookmark_interval if params.bookmarks else None
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                wait = min(wait, remaining) if wait is not None else remaining
            try:
                event = (
                    await asyncio.wait_for(watcher.queue.get(), wait)
                    if wait is not None
                    else (await watcher.queue.get())
                )
            except TimeoutError:
                # wait_for may give up on the get just as an event is queued (the event stays
                # queued): a bookmark then would carry a version past an event not yet sent, and a
                # client resuming from it would never get that event. Send the events first.
                if params.bookmarks and watcher.queue.empty():
                    await response.write(_bookmark(rt, store.resource_version))
                continue
            if event is None:
                break
            # Everything queued meanwhile goes out in one write: a busy watcher's events cost one
            # TLS record and one send, not one each.
            lines = [await _line(api, rt, event, params)]
            ended = False
            while not watcher.queue.empty():
                queued = watcher.queue.get_nowait()
                if queued is None:
                    ended = True
                    break
                lines.append(await _line(api, rt, queued, params))
            await _write_lines(response, lines)
            if ended:
                break
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client went away
    finally:
        watcher.close()
    return response


def too_large(requested: int, current: int) -> Obj:
    """The real server's answer to a resourceVersion from its future (it waits 3 s first)."""
    message = f"Timeout: Too large resource version: {requested}, current: {current}"
    details = {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }
    return status(504, "Timeout", message, details)


def _bookmark(rt: ResourceType, rv: int, initial_end: bool = False) -> bytes:
    meta: Obj = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return (
        dumps(
            {"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}}
        )
        + b"\n"
    )


async def _write_lines(response: web.StreamResponse, lines: list[bytes | None]) -> None:
    data = b"".join(line for line in lines if line is not None)
    if data:
        await response.write(data)


async def _line(api: Api, rt: ResourceType, event: Event, params: WatchParams) -> bytes | None:
    """The watch line ``event`` is for this watcher (None: its selectors do not see it)."""
    now = _matches(event.object, params) if event.type != "DELETED" else False
    before = _matches(event.old, params)
    if event.type == "DELETED":
        if not before:
            return None
        kind = "DELETED"
    elif now and not before and event.type == "MODIFIED":
        kind = "ADDED"
    elif before and not now:
        kind = "DELETED"
    elif now:
        kind = event.type
    else:
        return None
    line_key = f"{kind}:{rt.api_version}"
    line = event.encoded.get(line_key)
    if line is None:
        obj = (await api.to_version(rt, [event.object]))[0]
        line = dumps({"type": kind, "object": obj}) + b"\n"
        event.encoded[line_key] = line
    return line
