"""A list+watch cache of one kind of object, and the events that keep it current.

An :class:`Informer` lists the objects once, then watches from the list's resourceVersion. A
watch that ends (the server's timeout, a dropped connection) resumes from the last version
seen, which bookmarks keep fresh; a watch the server can no longer serve (410 Gone, the
history was compacted) is replaced by a new list, and the differences between the cache and
that list are delivered as ordinary ADDED / MODIFIED / DELETED events, so a handler never
misses a change, it only sees it late. Errors back off exponentially; the cache stays readable
throughout, so followers and restarted loops keep working from what was last seen.

A watch that ends at once, without a single event (a proxy that closes the stream, a server
that refuses the watch politely), is reopened after the same backoff as an error, never in a
tight loop.

Objects are the API's JSON as dicts (see :mod:`kadmit.kube.client`); the cache hands out the
stored dicts, which callers must treat as read-only. :class:`Informers` shares one informer per
resource (and namespace) between everyone who reads it: the controller's loops, the check
runner and the check plugins.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import inspect
import logging
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from kadmit.kube.client import Client
from kadmit.kube.errors import ApiError, error_from_status
from kadmit.kube.objects import Obj
from kadmit.kube.resources import Resource
from kadmit.kube.turns import TurnBudget

logger = logging.getLogger(__name__)

Handler = Callable[[str, Obj, Obj | None], Awaitable[None] | None]
IndexFunc = Callable[[Obj], list[str]]
Key = tuple[str | None, str]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"


class InformerStopped(Exception):
    """Raised by :meth:`Informer.wait_synced` when the informer stops before its first list."""


def key_of(obj: Obj) -> Key:
    meta = obj.get("metadata", {})
    return meta.get("namespace"), meta["name"]


@dataclass(eq=False, repr=False)
class Informer:
    """List, then watch, one resource; keep a dict cache; call handlers on every change.

    Handlers are called one at a time, in the order of the events, with
    ``(event_type, new_object, old_object)``: ``old_object`` is ``None`` for ADDED, and for
    DELETED ``new_object`` is the object's last state. A handler may be a plain function or a
    coroutine function; an exception in a handler is logged and does not stop the informer.
    Handlers added after :meth:`start` see only the events from then on (read :meth:`list` to
    catch up).
    """

    client: Client
    resource: Resource
    _: KW_ONLY
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    watch_timeout_seconds: int = 290
    backoff_initial: float = 0.2
    backoff_max: float = 10.0
    resource_version: str | None = field(default=None, init=False)
    relists: int = field(default=0, init=False)
    """How many times the cache was rebuilt from a list (1 after the first sync)."""
    events_seen: int = field(default=0, init=False)
    """ADDED/MODIFIED/DELETED events received from watches."""
    _cache: dict[Key, Obj] = field(default_factory=dict, init=False)
    _indexers: dict[str, IndexFunc] = field(default_factory=dict, init=False)
    _indexes: dict[str, dict[str, set[Key]]] = field(default_factory=dict, init=False)
    _handlers: list[Handler] = field(default_factory=list, init=False)
    _synced: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _stopped: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    # -- lifecycle

    async def start(self) -> None:
        """Start listing and watching in the background; returns at once (see :meth:`wait_synced`)."""
        if self._task is not None:
            raise RuntimeError(f"informer for {self.resource} already started")
        self._stopped.clear()
        self._task = asyncio.create_task(self._run(), name=f"informer:{self.resource}")

    async def stop(self) -> None:
        """Stop watching. The cache keeps its last contents."""
        self._stopped.set()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def wait_synced(self) -> None:
        """Wait until the cache holds a complete list (after the first successful list).

        Bound it with ``asyncio.timeout``; raises :class:`InformerStopped` if the informer is
        stopped first.
        """
        if self._synced.is_set():
            return
        waiters = {asyncio.ensure_future(self._synced.wait()), asyncio.ensure_future(self._stopped.wait())}
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
        if not self._synced.is_set():
            raise InformerStopped(f"informer for {self.resource} stopped before it synced")

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    @property
    def started(self) -> bool:
        return self._task is not None

    # -- cache reads

    def list(self, namespace: str | None = None) -> list[Obj]:
        if namespace is None:
            return list(self._cache.values())
        return [obj for (ns, _), obj in self._cache.items() if ns == namespace]

    def get(self, namespace: str | None, name: str) -> Obj | None:
        return self._cache.get((namespace, name))

    def __len__(self) -> int:
        return len(self._cache)

    def add_handler(self, fn: Handler) -> None:
        self._handlers.append(fn)

    def remove_handler(self, fn: Handler) -> None:
        """Stop calling ``fn`` (a loop that stops while the shared informer goes on)."""
        with contextlib.suppress(ValueError):
            self._handlers.remove(fn)

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Keep the objects findable by the values ``fn`` returns (client-go's Indexer)."""
        self._indexers[name] = fn
        index: dict[str, set[Key]] = {}
        for key, obj in self._cache.items():
            for value in fn(obj):
                index.setdefault(value, set()).add(key)
        self._indexes[name] = index

    def by_index(self, name: str, value: str) -> builtins.list[Obj]:
        return [self._cache[key] for key in sorted(self._indexes[name].get(value, ()), key=str)
                if key in self._cache]

    def _store(self, key: Key, obj: Obj) -> None:
        old = self._cache.get(key)
        self._cache[key] = obj
        for name, fn in self._indexers.items():
            index = self._indexes[name]
            if old is not None:
                for value in fn(old):
                    index.get(value, set()).discard(key)
            for value in fn(obj):
                index.setdefault(value, set()).add(key)

    def _remove(self, key: Key) -> None:
        old = self._cache.pop(key, None)
        if old is None:
            return
        for name, fn in self._indexers.items():
            for value in fn(old):
                self._indexes[name].get(value, set()).discard(key)

    # -- the loop

    async def _run(self) -> None:
        backoff = self.backoff_initial
        need_list = True
        while True:
            try:
                if need_list:
                    await self._relist()
                    need_list = False
                    backoff = self.backoff_initial
                events_before = self.events_seen
                need_list = await self._watch_once()
                if need_list or self.events_seen > events_before:
                    backoff = self.backoff_initial
                else:  # ended without a single event: do not reopen it in a tight loop
                    await self._sleep_backoff(backoff)
                    backoff = min(backoff * 2, self.backoff_max)
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                if exc.gone:
                    logger.info("watch of %s expired (410), listing again", self.resource)
                    need_list = True
                    continue
                logger.warning("list/watch of %s failed: %s; retrying in %.1fs", self.resource, exc, backoff)
                await self._sleep_backoff(exc.retry_after if exc.retry_after is not None else backoff)
                backoff = min(backoff * 2, self.backoff_max)
            except Exception as exc:  # malformed streams: retry, never die
                logger.warning("list/watch of %s failed: %r; retrying in %.1fs", self.resource, exc, backoff)
                await self._sleep_backoff(backoff)
                backoff = min(backoff * 2, self.backoff_max)

    async def _sleep_backoff(self, delay: float) -> None:
        # Jitter spreads the retries of many informers after a shared outage.
        await asyncio.sleep(delay * (0.8 + 0.4 * random.random()))

    async def _relist(self) -> None:
        listed = await self.client.list_all(self.resource, self.namespace,
                                             label_selector=self.label_selector,
                                             field_selector=self.field_selector)
        fresh: dict[Key, Obj] = {key_of(item): item for item in listed["items"]}
        old_cache = dict(self._cache)
        turn = TurnBudget()  # a list of 50,000 objects is dispatched in slices, not in one turn
        for key, obj in fresh.items():
            await turn.spend()
            old = old_cache.get(key)
            if old is None:
                self._store(key, obj)
                await self._dispatch(ADDED, obj, None)
            elif _rv(old) != _rv(obj):
                self._store(key, obj)
                await self._dispatch(MODIFIED, obj, old)
        for key, old in old_cache.items():
            if key not in fresh:
                await turn.spend()
                self._remove(key)
                await self._dispatch(DELETED, old, old)
        self.resource_version = str(listed["metadata"]["resourceVersion"])
        self.relists += 1
        self._synced.set()

    async def _watch_once(self) -> bool:
        """Follow one watch request to its end; True if the cache must be rebuilt from a list."""
        assert self.resource_version is not None
        # A chunk of buffered events is read without the loop ever waiting: yield between them.
        turn = TurnBudget()
        async for event in self.client.watch(self.resource, self.namespace,
                                            resource_version=self.resource_version,
                                            label_selector=self.label_selector,
                                            field_selector=self.field_selector,
                                            timeout_seconds=self.watch_timeout_seconds):
            kind = event.get("type")
            obj = event.get("object") or {}
            if kind == "ERROR":
                code = obj.get("code")
                if code == 410:
                    logger.info("watch of %s expired (410 in stream), listing again", self.resource)
                    return True
                raise error_from_status(obj)
            version = obj.get("metadata", {}).get("resourceVersion")
            if kind == "BOOKMARK":
                if version:
                    self.resource_version = str(version)
                continue
            if kind not in (ADDED, MODIFIED, DELETED):
                logger.warning("ignoring watch event of unknown type %r for %s", kind, self.resource)
                continue
            self.events_seen += 1
            await turn.spend()
            await self.apply(obj, deleted=kind == DELETED)
            if version:
                self.resource_version = str(version)
        return False

    async def apply(self, obj: Obj, *, deleted: bool = False) -> None:
        """One watch event: the cache first, then the handlers (ADDED or MODIFIED as the cache
        knew the object). Public so that a benchmark can feed an informer without a server."""
        key = key_of(obj)
        old = self._cache.get(key)
        if deleted:
            self._remove(key)
            await self._dispatch(DELETED, obj, old)
        else:
            self._store(key, obj)
            await self._dispatch(ADDED if old is None else MODIFIED, obj, old)

    async def _dispatch(self, kind: str, new: Obj, old: Obj | None) -> None:
        for handler in list(self._handlers):
            try:
                result: Any = handler(kind, new, old)
                # Most handlers return None: skip isawaitable's ABC check for them (1.3 % of kadmit).
                if result is not None and inspect.isawaitable(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("handler %r failed on %s %s %s", handler, kind, self.resource, key_of(new))


def _rv(obj: Obj) -> str | None:
    version = obj.get("metadata", {}).get("resourceVersion")
    return None if version is None else str(version)


class Informers:
    """One informer per (resource, namespace), shared by everyone who reads that resource.

    :meth:`get` makes (without starting) the informer a loop will read; :meth:`watch` makes and
    starts one and is the watch factory the check runner takes. :meth:`start` starts the ones
    not started yet, :meth:`stop` stops them all (their caches stay readable).
    """

    def __init__(self, client: Client) -> None:
        self.client = client
        self._informers: dict[tuple[Resource, str | None, str | None], Informer] = {}

    def get(self, resource: Resource, namespace: str | None = None, *,
            label_selector: str | None = None) -> Informer:
        """The informer for ``resource`` (in ``namespace``; of the objects ``label_selector`` picks)."""
        key = (resource, namespace, label_selector)
        informer = self._informers.get(key)
        if informer is None:
            informer = self._informers[key] = Informer(
                self.client, resource, namespace=namespace, label_selector=label_selector)
        return informer

    def find(self, resource: Resource, namespace: str | None = None) -> Informer | None:
        """The informer already made for ``resource``, or None (a cluster-wide one serves any namespace)."""
        return self._informers.get((resource, namespace, None)) or self._informers.get((resource, None, None))

    def discard(self, resource: Resource, namespace: str | None = None, *,
                label_selector: str | None = None) -> None:
        """Forget an informer that was never started (a kind the cluster turned out not to serve)."""
        key = (resource, namespace, label_selector)
        informer = self._informers.get(key)
        if informer is not None and not informer.started:
            del self._informers[key]

    async def watch(self, resource: Resource, namespace: str | None = None) -> Informer:
        """The shared informer for ``resource``, started (a cluster-wide one serves any namespace)."""
        informer = self.find(resource, namespace) or self.get(resource, namespace)
        if not informer.started:
            await informer.start()
        return informer

    def __iter__(self) -> Iterator[Informer]:
        return iter(list(self._informers.values()))

    def resources(self) -> list[Resource]:
        return [resource for resource, _, _ in self._informers]

    async def start(self) -> None:
        for informer in self:
            if not informer.started:
                await informer.start()

    async def wait_synced(self) -> None:
        await asyncio.gather(*(informer.wait_synced() for informer in self))

    async def stop(self) -> None:
        await asyncio.gather(*(informer.stop() for informer in self))
