"""List, then watch from the list's resourceVersion, and keep a cache: client-go's informer.

A broken stream resumes from the last resourceVersion seen; ``410 Gone`` (the history was
compacted) relists and reports the difference as ordinary events, so handlers never miss a
change and never see one twice out of order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import aiohttp

from ..errors import ApiError
from ..lifecycle import cancel_and_wait
from ..objects import Obj
from .client import Resource, RestClient, key_of

Handler = Callable[[str, Obj, Obj | None], None]
"""Called with the event type (ADDED, MODIFIED, DELETED), the object and the cached old one."""

log = logging.getLogger(__name__)
RETRY_MIN_SECONDS = 0.05
RETRY_MAX_SECONDS = 2.0


@dataclass(eq=False)
class Informer:
    """List then watch one resource into ``cache``, calling ``handler`` on every change; only
    what ``query`` (:func:`~kadmit.localcluster.sim.client.selecting`) lets the server send."""

    client: RestClient
    resource: Resource
    handler: Handler
    query: Mapping[str, str] = field(default_factory=dict)
    cache: dict[tuple[str, str], Obj] = field(default_factory=dict, init=False)
    synced: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    relists: int = field(default=0, init=False)
    _resource_version: str = field(default="", init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"informer:{self.resource.plural}")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.cache.get((namespace, name))

    async def _relist(self) -> None:
        listed = await self.client.list(self.resource, query=self.query)
        fresh = {key_of(item): item for item in listed.get("items") or []}
        stale = self.cache
        self.cache = fresh
        self._resource_version = str((listed.get("metadata") or {}).get("resourceVersion") or "")
        self.relists += 1
        for key, old in stale.items():
            if key not in fresh:
                self._notify("DELETED", old, old)
        for key, obj in fresh.items():
            previous = stale.get(key)
            if previous is None:
                self._notify("ADDED", obj, None)
            elif (previous.get("metadata") or {}).get("resourceVersion") != (obj.get("metadata") or {}).get(
                "resourceVersion"
            ):
                self._notify("MODIFIED", obj, previous)
        self.synced.set()

    def _notify(self, kind: str, obj: Obj, old: Obj | None) -> None:
        """Hand an event to the handler; a failing handler must not stop the informer."""
        try:
            self.handler(kind, obj, old)
        except Exception:
            log.exception("informer %s: handler failed on %s", self.resource.plural, kind)

    def _apply(self, event: Obj) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self._resource_version = str(version)
        if kind == "BOOKMARK":
            return
        key = key_of(obj)
        old = self.cache.get(key)
        if kind == "DELETED":
            self.cache.pop(key, None)
            self._notify("DELETED", obj, old)
        elif kind in ("ADDED", "MODIFIED"):
            self.cache[key] = obj
            self._notify("MODIFIED" if old is not None else "ADDED", obj, old)

    async def _run(self) -> None:
        """List, then follow the watch until the history it resumes from is gone; over again."""
        while True:
            await self._list_until_done()
            await self._follow_until_gone()

    async def _list_until_done(self) -> None:
        backoff = _Backoff()
        while True:
            try:
                await self._relist()
                return
            except (ApiError, TimeoutError, aiohttp.ClientError, ValueError) as exc:
                log.debug("informer %s: list: %s", self.resource.plural, exc)
            await backoff.pause()

    async def _follow_until_gone(self) -> None:
        """Watch from the last resourceVersion seen; a broken or ended stream is resumed, and
        only ``410 Gone`` (the history was compacted) returns, for a relist."""
        backoff = _Backoff()
        while True:
            try:
                async for event in self.client.watch(self.resource, self._resource_version, query=self.query):
                    self._apply(event)
                    backoff.reset()
                continue  # the server closed the stream normally: resume at once
            except ApiError as exc:
                if exc.code == 410:
                    return
                log.debug("informer %s: watch: %s", self.resource.plural, exc)
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                log.debug("informer %s: watch: %s", self.resource.plural, exc)
            await backoff.pause()


class _Backoff:
    """Doubling pauses (capped) before talking again to a server that just failed us."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._seconds = RETRY_MIN_SECONDS

    async def pause(self) -> None:
        await asyncio.sleep(self._seconds)
        self._seconds = min(self._seconds * 2, RETRY_MAX_SECONDS)
