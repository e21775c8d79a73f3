"""Writes that never make their caller wait: coalesced per object, bounded, retried level-triggered.

A loop that decides many changes at once (the scheduler: reservations, preemptions, conditions)
submits each as a :class:`Change` and goes on deciding. Per object there is at most one write in
flight; changes submitted meanwhile wait and go together in the next write, applied in the order
they came (last state wins). Each write starts from the newest copy of the object known — the
cache's, or what this pipeline last wrote, whichever is newer — and after a conflict from a fresh
read, and every change is applied again to it: a change whose precondition no longer holds (the
workload finished, was evicted meanwhile) declines by returning False, so a decision is never
applied to a state it was not made for. Nothing is retried blindly: a write that fails is reported
to the changes' ``on_dropped``, and the caller decides again from what it observes.

Urgent changes (reservations, preemptions) are written before background ones (a condition on a
waiting workload), and ``workers`` bounds the writes in flight. A ``background_pace`` holds each
background write until it may go: under a burst of waiting workloads their conditions are then
written at its rate, and whatever is decided meanwhile (a newer condition in the same slot, a
reservation that takes the object urgently) replaces or carries the waiting change, so a state
that is already past is never written at all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from kadmit.kube.client import Client
from kadmit.kube.errors import ApiError, Conflict, NotFound
from kadmit.kube.informer import Key
from kadmit.kube.objects import Obj, copy_object
from kadmit.kube.ratelimit import Pace
from kadmit.kube.resources import Resource
from kadmit.kube.workers import Workers

logger = logging.getLogger(__name__)

Reader = Callable[[str | None, str], Obj | None]


@dataclass(frozen=True, slots=True)
class Change:
    """One change to one object.

    ``mutate`` edits the object in place (only its ``status`` reaches the API through a status
    pipeline) and returns whether it changed anything; it is called again on every fresh copy,
    so it must judge that copy, not the one its decision saw. ``on_written`` gets the
    object as written; ``on_dropped`` is told when nothing of this change was written: ``None``
    when ``mutate`` declined, else the error (the object is gone, conflicts kept coming, the API
    failed).

    Changes that share a ``slot`` on one object restate the same thing (a waiting workload's
    condition, decided again each cycle): a newer one replaces an older one still waiting, which is
    dropped with ``None``. Only what is written is told, so each written state gets one
    ``on_written`` (one Event), not one per decision that was folded into it.
    """

    mutate: Callable[[Obj], bool]
    on_written: Callable[[Obj], None] | None = None
    on_dropped: Callable[[BaseException | None], None] | None = None
    slot: str | None = None


class LastWritten:
    """The newest copy of each object one writer has had from the API — what it last wrote, or
    read after a conflict — until its cache catches up: the next decision starts from the newest
    copy known, not from a cache still watch events behind (which would make the next write a
    conflict, a read and a second decision)."""

    def __init__(self, read: Reader) -> None:
        self._read = read
        self._written: dict[Key, Obj] = {}

    def remember(self, key: Key, written: Obj) -> None:
        self._written[key] = written

    def latest(self, key: Key) -> Obj | None:
        """The cache's copy, or the one written last if the cache has not caught up."""
        cached = self._read(*key)
        written = self._written.get(key)
        if written is None:
            return cached
        if cached is None or _version(cached) >= _version(written):
            del self._written[key]  # deleted, or the cache caught up
            return cached
        return written

    def forget(self, key: Key) -> None:
        """Drop what was written of one object (its writer is done with it)."""
        self._written.pop(key, None)

    def clear(self) -> None:
        self._written.clear()


class WritePipeline:
    """Background writes of one resource's objects (``subresource``: ``"status"`` or None)."""

    def __init__(self, client: Client, resource: Resource, read: Reader, *,
                 subresource: str | None = "status", workers: int = 8, background_workers: int = 2,
                 attempts: int = 5, name: str = "writes", background_pace: Pace | None = None) -> None:
        self.client = client
        self.resource = resource
        self.subresource = subresource
        self.attempts = attempts
        self._pending: dict[Key, list[Change]] = {}
        self._written = LastWritten(read)
        self._urgent: Workers[Key] = Workers(f"{name}-urgent", self._write, count=workers)
        self._pace = background_pace
        self._background: Workers[Key] = Workers(f"{name}-background", self._write_background,
                                                 count=background_workers)
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.writes = 0  # writes that succeeded
        self.conflicts = 0  # writes redone after a 409

    def submit(self, namespace: str | None, name: str, change: Change, *, urgent: bool = True) -> None:
        key = (namespace, name)
        if change.slot is not None:
            self.withdraw(namespace, name, change.slot)
        self._pending.setdefault(key, []).append(change)
        self._idle.clear()
        (self._urgent if urgent else self._background).queue.add(key)

    def withdraw(self, namespace: str | None, name: str, slot: str) -> None:
        """Drop (told with ``None``) the change in ``slot`` still waiting for the object: a
        decision that makes it moot (a reservation, for a waiting workload's condition)."""
        key = (namespace, name)
        waiting = self._pending.get(key, [])
        for index, earlier in enumerate(waiting):
            if earlier.slot == slot:
                del waiting[index]
                if not waiting:
                    del self._pending[key]
                    self._idle_if_done()
                _drop(earlier, None)
                return

    def _idle_if_done(self) -> None:
        if not self._pending and not self._in_flight:
            self._idle.set()

    def latest(self, namespace: str | None, name: str) -> Obj | None:
        """The newest copy of the object known: the cache's, or what this pipeline last wrote or
        read of it while the cache has not caught up (never to be edited: a copy is made to write)."""
        return self._written.latest((namespace, name))

    @property
    def running(self) -> bool:
        return self._urgent.running

    @property
    def pending(self) -> int:
        """Objects with changes not written yet."""
        return len(self._pending)

    async def start(self) -> None:
        await self._urgent.start(key for key in self._pending)
        await self._background.start()

    async def stop(self) -> None:
        """Stop writing; changes not written yet are dropped (their callers are told)."""
        await self._urgent.stop()
        await self._background.stop()
        pending, self._pending = self._pending, {}
        for changes in pending.values():
            for change in changes:
                _drop(change, asyncio.CancelledError("the write pipeline stopped"))
        self._written.clear()
        self._idle.set()

    async def drain(self) -> None:
        """Until every change submitted so far is written or dropped."""
        await self._idle.wait()

    async def _write_background(self, key: Key) -> None:
        if self._pace is not None and key in self._pending:
            await self._pace.wait()  # what is decided meanwhile replaces or carries what waits
        await self._write(key)

    async def _write(self, key: Key) -> None:
        changes = self._pending.pop(key, [])
        if not changes:
            return
        self._in_flight += 1
        try:
            await self._apply(key, changes)
        except asyncio.CancelledError as stopped:
            for change in changes:  # stopping mid-write: the callers must not wait for it
                _drop(change, stopped)
            raise
        except Exception:
            # Not an answer of the API's (a change that raised, say): the changes are neither
            # written nor dropped, so they wait for the retry the workers make after a backoff.
            # Lost here, a reservation would stay assumed in the engine for good.
            self._pending[key] = [*changes, *self._pending.get(key, [])]
            raise
        finally:
            self._in_flight -= 1
            self._idle_if_done()

    async def _apply(self, key: Key, changes: list[Change]) -> None:
        current = self._written.latest(key)
        error: BaseException | None = NotFound(404, "NotFound", f"{self.resource} {key} is not known")
        for _ in range(self.attempts):
            if current is None:
                break
            obj = copy_object(current)
            if self.subresource == "status" and not isinstance(obj.get("status"), dict):
                obj["status"] = {}
            applied = [change.mutate(obj) for change in changes]
            if not any(applied):
                error = None
                break
            try:
                written = await self.client.replace(self.resource, obj, subresource=self.subresource)
            except Conflict as exc:
                self.conflicts += 1
                error = exc
                try:
                    current = await self.client.get(self.resource, *key)
                except ApiError as failed:  # gone, or the API failed: told as not written
                    error, current = failed, None
                else:
                    self._written.remember(key, current)  # newer than the cache: what comes next reads it
                continue
            except ApiError as exc:
                error = exc
                if exc.status == 0 or exc.status >= 500:
                    # No answer, or the server failed after it may have committed (a 504 timeout, a
                    # 500 on the way out): the write may have landed all the same.
                    landed = await self._landed(key, changes)
                    if landed is not None:
                        for change in changes:
                            _notify(change.on_written, landed)
                        return
                break
            self.writes += 1
            self._written.remember(key, written)
            for change, done in zip(changes, applied, strict=True):
                if done:
                    _notify(change.on_written, written)
                else:
                    _drop(change, None)
            return
        if error is not None:
            logger.info("%s %s/%s not written: %s", self.resource.plural, key[0], key[1], error)
        for change in changes:
            _drop(change, error)


    async def _landed(self, key: Key, changes: list[Change]) -> Obj | None:
        """After a write whose answer was lost: the object as it is now, if every change is already
        in it (applying them again changes nothing); None when that cannot be told."""
        try:
            fresh = await self.client.get(self.resource, *key)
        except ApiError:
            return None
        probe = copy_object(fresh)
        if self.subresource == "status" and not isinstance(probe.get("status"), dict):
            probe["status"] = {}
        if any([change.mutate(probe) for change in changes]):
            return None
        logger.info("%s %s/%s: the answer was lost, but the write landed", self.resource.plural, *key)
        return fresh


def _version(obj: Obj) -> int:
    """The resourceVersion as a number (Kubernetes' are etcd revisions); -1 when it is not one."""
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or -1)
    except ValueError:
        return -1


def _drop(change: Change, error: BaseException | None) -> None:
    _notify(change.on_dropped, error)


def _notify(callback: Callable[..., None] | None, argument: object) -> None:
    """A callback's failure is a bug to log, never a reason to lose the other callbacks."""
    if callback is None:
        return
    try:
        callback(argument)
    except Exception:
        logger.exception("a write callback failed")
