"""The system controllers that finish deletions: garbage collector, namespace and CRD cleanup.

As on a real cluster they run beside the request path: the store tells them about every change,
and a worker task deletes dependents (Background), waits for them (``foregroundDeletion``),
strips owner references (``orphan``), empties terminating namespaces and removes the custom
resources of a deleted CRD, then lifts the finalizer that held the owner.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kadmit.localcluster.api import Api, WriteOptions
from kadmit.localcluster.errors import ApiError
from kadmit.localcluster.lifecycle import cancel_and_wait
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.store import Event, Key
from kadmit.localcluster.workqueue import WorkQueue

log = logging.getLogger(__name__)
Task = tuple[str, str]  # (what, uid or name)

CRD_KEY: Key = ("apiextensions.k8s.io", "customresourcedefinitions")
NAMESPACES: Key = ("", "namespaces")
CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"


ObjectStep = Callable[["GarbageCollector", Key, Obj], Awaitable[None]]


def _stored(step: ObjectStep) -> Callable[[GarbageCollector, str], Awaitable[None]]:
    """A step on one stored object, queued (and called) by its uid: a no-op once the object is gone."""

    async def by_uid(collector: GarbageCollector, uid: str) -> None:
        found = collector.store.by_uid(uid)
        if found is not None:
            await step(collector, *found)

    return by_uid


class GarbageCollector:
    """Owner-reference index plus one worker that acts on what the store reports."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.store = api.store
        self._dependents: dict[str, set[str]] = {}
        self._owners: dict[str, set[str]] = {}
        self._queue: WorkQueue[Task] = WorkQueue()
        self._task: asyncio.Task[None] | None = None
        self._swept: set[str] = set()  # terminating namespaces whose contents were asked to go
        self._swept_crds: set[str] = set()  # deleted CRDs whose objects were asked to go
        self.store.add_listener(self._on_event)

    def start(self) -> None:
        worker = self._queue.run_worker(self._step)
        self._task = asyncio.get_running_loop().create_task(worker, name="localcluster-gc")

    async def stop(self) -> None:
        self._queue.close()
        await cancel_and_wait(self._task)

    async def settled(self) -> None:
        """Wait until every queued cleanup has run (for tests and orderly shutdown)."""
        await self._queue.drained()

    # -- the index, fed synchronously by the store ------------------------------------------

    def _put(self, what: str, ident: str) -> None:
        self._queue.add((what, ident))

    def _on_event(self, event: Event) -> None:
        meta = event.object["metadata"]
        uid = meta.get("uid", "")
        if event.type == "DELETED":
            for owner in self._owners.pop(uid, set()):
                self._dependents.get(owner, set()).discard(uid)
                self._put("owner-check", owner)
            if self._dependents.get(uid):
                self._put("owner-gone", uid)
            if meta.get("namespace"):
                self._put("namespace", meta["namespace"])
            if event.key == CRD_KEY:
                self.api.registry.remove_crd(meta["name"])
            else:
                crd_name = f"{event.key[1]}.{event.key[0]}"
                if self.store.get(*CRD_KEY, None, crd_name) is not None:
                    self._put("crd", crd_name)
            return
        refs = {r["uid"] for r in meta.get("ownerReferences") or [] if isinstance(r, dict) and r.get("uid")}
        previous = self._owners.get(uid, set())
        if refs != previous:
            for owner in previous - refs:
                self._dependents.get(owner, set()).discard(uid)
            for owner in refs - previous:
                self._dependents.setdefault(owner, set()).add(uid)
            if refs:
                self._owners[uid] = refs
            else:
                self._owners.pop(uid, None)
            if refs and event.type == "ADDED":
                self._put("dangling", uid)
        if meta.get("deletionTimestamp"):
            finalizers = meta.get("finalizers") or []
            if "orphan" in finalizers:
                self._put("orphan", uid)
            if "foregroundDeletion" in finalizers:
                self._put("foreground", uid)
            if event.key == NAMESPACES:
                self._put("namespace", meta["name"])
            if event.key == CRD_KEY and CRD_CLEANUP in finalizers:
                self._put("crd", meta["name"])

    # -- the worker -------------------------------------------------------------------------

    async def _step(self, task: Task) -> None:
        """One step, by name: ``("owner-gone", uid)`` runs ``_owner_gone(uid)``; steps are
        level-triggered, so one queued twice runs once (or again, if queued while it ran)."""
        what, ident = task
        try:
            await getattr(self, "_" + what.replace("-", "_"))(ident)
        except Exception:
            log.exception("garbage collection step %s %s failed", what, ident)

    async def _delete(self, key: Key, obj: Obj, policy: str = "Background") -> None:
        rt = self.api.registry.storage_type(*key)
        if rt is None or obj["metadata"].get("deletionTimestamp"):
            return
        try:
            await self.api.delete(
                rt,
                obj["metadata"].get("namespace"),
                obj["metadata"]["name"],
                WriteOptions(options={"propagationPolicy": policy}),
            )
        except ApiError as exc:
            if exc.code != 404:
                log.warning("garbage collector could not delete %s %s: %s", key, obj["metadata"]["name"], exc)

    def _exists(self, uid: str) -> bool:
        return self.store.by_uid(uid) is not None

    async def _owner_gone(self, uid: str) -> None:
        for dependent in list(self._dependents.pop(uid, set())):
            await self._dangling(dependent)

    @_stored
    async def _dangling(self, key: Key, obj: Obj) -> None:
        """Delete a dependent once none of its owners exist any more."""
        owners = [r.get("uid") for r in obj["metadata"].get("ownerReferences") or []]
        if owners and not any(self._exists(o) for o in owners):
            await self._delete(key, obj)

    @_stored
    async def _orphan(self, key: Key, owner: Obj) -> None:
        uid = owner["metadata"]["uid"]
        for dependent in list(self._dependents.get(uid, set())):
            dep = self.store.by_uid(dependent)
            if dep is None:
                continue
            dkey, dobj = dep
            refs = [r for r in dobj["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
            new = dict(dobj)
            new["metadata"] = dict(dobj["metadata"], ownerReferences=refs)
            if not refs:
                new["metadata"].pop("ownerReferences")
            self.store.replace(dkey[0], dkey[1], new)
        meta = owner["metadata"]
        self.api.remove_finalizer(key[0], key[1], meta.get("namespace"), meta["name"], "orphan")

    async def _foreground(self, uid: str) -> None:
        for dependent in list(self._dependents.get(uid, set())):
            dep = self.store.by_uid(dependent)
            if dep is not None:
                await self._delete(dep[0], dep[1], "Foreground")
        await self._owner_check(uid)

    @_stored
    async def _owner_check(self, key: Key, owner: Obj) -> None:
        """Lift ``foregroundDeletion`` from an owner whose dependents are all gone."""
        meta = owner["metadata"]
        uid = meta["uid"]
        if "foregroundDeletion" not in (meta.get("finalizers") or []):
            return
        if any(self._exists(d) for d in self._dependents.get(uid, set())):
            return
        self.api.remove_finalizer(key[0], key[1], meta.get("namespace"), meta["name"], "foregroundDeletion")

    async def _namespace(self, name: str) -> None:
        """The namespace controller: delete the contents of a terminating namespace, then itself."""
        ns = self.store.get("", "namespaces", None, name)
        if ns is None or not ns["metadata"].get("deletionTimestamp"):
            return
        if name not in self._swept:
            # One sweep deletes everything; later calls (one per deletion) only count what is left.
            self._swept.add(name)
            for key, obj in list(self.store.namespaced_in(name)):
                await self._delete(key, obj)
        if self.store.namespace_count(name):
            return
        self._swept.discard(name)
        ns = self.store.get("", "namespaces", None, name)
        if ns is None or not (ns.get("spec") or {}).get("finalizers"):
            return
        new = dict(ns)
        new["spec"] = dict(ns["spec"], finalizers=[])
        self.store.replace("", "namespaces", new)
        if not new["metadata"].get("finalizers"):
            self.store.remove("", "namespaces", None, name)

    async def _crd(self, name: str) -> None:
        """Delete every custom resource of a deleted CRD, then let the CRD go."""
        crd = self.store.get(*CRD_KEY, None, name)
        if crd is None or not crd["metadata"].get("deletionTimestamp"):
            return
        key = (crd["spec"]["group"], crd["spec"]["names"]["plural"])
        if name not in self._swept_crds:
            self._swept_crds.add(name)
            for obj in self.store.list(*key):
                await self._delete(key, obj)
        if self.store.count(*key) == 0:
            self._swept_crds.discard(name)
            self.api.remove_finalizer(*CRD_KEY, None, name, CRD_CLEANUP)
