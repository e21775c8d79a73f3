"""The in-memory object store: one global resourceVersion counter, bounded history, watchers.

Stored objects are never mutated: every write stores a new dict. That lets reads, watch events
and admission plugins share objects without copying, which keeps writes cheap.
"""

from __future__ import annotations

import asyncio
import builtins
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from kadmit.localcluster import timestamps
from kadmit.localcluster.objects import Obj, copy_json

Key = tuple[str, str]  # (group, plural)
ObjKey = tuple[str | None, str]  # (namespace, name)
EventType = Literal["ADDED", "MODIFIED", "DELETED"]


@dataclass(slots=True)
class Event:
    """One change to one object, kept in the history for watch resume."""

    type: EventType
    rv: int
    key: Key
    object: Obj
    old: Obj | None  # the previous state (MODIFIED, DELETED), to re-evaluate selectors
    encoded: dict[str, bytes] = field(default_factory=dict)  # apiVersion -> watch line


class TooOldResourceVersion(Exception):
    """The requested resourceVersion is older than the kept history (the client must relist)."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")


class Watcher:
    """One open watch: events arrive on ``queue`` as they are committed; None ends the watch."""

    def __init__(self, store: Store, key: Key) -> None:
        self.store = store
        self.key = key
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()

    def close(self) -> None:
        self.store._watchers.get(self.key, set()).discard(self)


class Store:
    """Objects per (group, plural), each map keyed by (namespace, name)."""

    def __init__(self, history_window: int = 10_000) -> None:
        self.history_window = history_window
        self._rv = 0
        self._objects: dict[Key, dict[ObjKey, Obj]] = {}
        self._history: dict[Key, deque[Event]] = {}
        self._compacted: dict[Key, int] = {}  # highest rv dropped from each history
        self._watchers: dict[Key, set[Watcher]] = {}
        self._by_uid: dict[str, tuple[Key, ObjKey]] = {}
        self._listeners: list[Callable[[Event], None]] = []
        self._per_namespace: dict[str, int] = {}

    # -- reads ------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def get(self, group: str, resource: str, namespace: str | None, name: str) -> Obj | None:
        return self._objects.get((group, resource), {}).get((namespace or None, name))

    def list(self, group: str, resource: str, namespace: str | None = None) -> list[Obj]:
        objects = self._objects.get((group, resource), {})
        if namespace is None:
            return [objects[k] for k in sorted(objects, key=_sort_key)]
        return [objects[k] for k in sorted(objects, key=_sort_key) if k[0] == namespace]

    def count(self, group: str, resource: str, namespace: str | None = None) -> int:
        objects = self._objects.get((group, resource), {})
        if namespace is None:
            return len(objects)
        return sum(1 for k in objects if k[0] == namespace)

    def by_uid(self, uid: str) -> tuple[Key, Obj] | None:
        where = self._by_uid.get(uid)
        if where is None:
            return None
        obj = self._objects.get(where[0], {}).get(where[1])
        return (where[0], obj) if obj is not None else None

    def namespace_count(self, namespace: str) -> int:
        """How many objects of any kind live in ``namespace``."""
        return self._per_namespace.get(namespace, 0)

    def watcher_count(self, group: str, resource: str) -> int:
        """Open watches on one resource (tests use it to see that a disconnect closed one)."""
        return len(self._watchers.get((group, resource), ()))

    def keys(self) -> Iterator[Key]:
        return iter(list(self._objects))

    def namespaced_in(self, namespace: str) -> Iterator[tuple[Key, Obj]]:
        for key, objects in list(self._objects.items()):
            for (ns, _), obj in list(objects.items()):
                if ns == namespace:
                    yield key, obj

    # -- writes -----------------------------------------------------------------------------

    def next_rv(self) -> int:
        self._rv += 1
        return self._rv

    def create(self, group: str, resource: str, obj: Obj) -> Obj:
        """Store a new object; fills uid, creationTimestamp, generation and resourceVersion."""
        meta = obj["metadata"]
        if "uid" not in meta:
            meta["uid"] = str(uuid.uuid4())
        if "creationTimestamp" not in meta:
            meta["creationTimestamp"] = timestamps.now()
        meta["resourceVersion"] = str(self.next_rv())
        okey = (meta.get("namespace") or None, meta["name"])
        self._objects.setdefault((group, resource), {})[okey] = obj
        self._by_uid[meta["uid"]] = ((group, resource), okey)
        if okey[0] is not None:
            self._per_namespace[okey[0]] = self._per_namespace.get(okey[0], 0) + 1
        self._emit(Event("ADDED", self._rv, (group, resource), obj, None))
        return obj

    def replace(self, group: str, resource: str, obj: Obj) -> Obj:
        """Store a new version of an existing object under a new resourceVersion."""
        meta = obj["metadata"]
        okey = (meta.get("namespace") or None, meta["name"])
        objects = self._objects[(group, resource)]
        old = objects[okey]
        meta["resourceVersion"] = str(self.next_rv())
        objects[okey] = obj
        self._emit(Event("MODIFIED", self._rv, (group, resource), obj, old))
        return obj

    def remove(self, group: str, resource: str, namespace: str | None, name: str) -> Obj:
        """Delete an object; the DELETED event carries it at a fresh resourceVersion."""
        objects = self._objects[(group, resource)]
        old = objects.pop((namespace or None, name))
        final = dict(old)
        final["metadata"] = dict(old["metadata"], resourceVersion=str(self.next_rv()))
        self._by_uid.pop(old["metadata"].get("uid", ""), None)
        if namespace:
            self._per_namespace[namespace] -= 1
        self._emit(Event("DELETED", self._rv, (group, resource), final, old))
        return final

    def write_status(self, group: str, resource: str, namespace: str | None, name: str, status: Obj) -> Obj:
        old = self.get(group, resource, namespace, name)
        if old is None:
            raise KeyError(f"{resource} {namespace}/{name} not found")
        new = dict(old)
        new["metadata"] = dict(old["metadata"])
        new["status"] = copy_json(status)
        return self.replace(group, resource, new)

    # -- watch ------------------------------------------------------------------------------

    def add_listener(self, listener: Callable[[Event], None]) -> None:
        """Call ``listener`` synchronously on every committed event (garbage collection, CRDs)."""
        self._listeners.append(listener)

    def watch(self, key: Key, since: int | None) -> tuple[Watcher, builtins.list[Event]]:
        """Open a watcher and return the kept events after ``since`` (none when ``since`` is None).

        Raises :class:`TooOldResourceVersion` when events after ``since`` were already dropped.
        """
        replay: builtins.list[Event] = []
        if since is not None:
            compacted = self._compacted.get(key, 0)
            if since < compacted:
                raise TooOldResourceVersion(since, compacted + 1)
            history = self._history.get(key, ())
            if history and history[-1].rv > since:
                replay = [e for e in history if e.rv > since]
        watcher = Watcher(self, key)
        self._watchers.setdefault(key, set()).add(watcher)
        return watcher, replay

    def close_watchers(self) -> None:
        """End every open watch (the server is stopping); clients see their streams end cleanly."""
        for watchers in self._watchers.values():
            for watcher in watchers:
                watcher.queue.put_nowait(None)

    def compact(self, key: Key | None = None) -> None:
        """Drop all kept history (of one resource, or all), as etcd compaction does."""
        for k in [key] if key is not None else list(self._history):
            history = self._history.get(k)
            if history:
                self._compacted[k] = max(self._compacted.get(k, 0), history[-1].rv)
                history.clear()
            else:
                self._compacted[k] = self._rv

    def _emit(self, event: Event) -> None:
        history = self._history.get(event.key)
        if history is None:
            history = self._history[event.key] = deque()
        if len(history) >= self.history_window:
            dropped = history.popleft()
            self._compacted[event.key] = dropped.rv
        history.append(event)
        for watcher in self._watchers.get(event.key, ()):
            watcher.queue.put_nowait(event)
        for listener in self._listeners:
            listener(event)


def _sort_key(k: ObjKey) -> tuple[str, str]:
    return (k[0] or "", k[1])
