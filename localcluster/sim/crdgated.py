"""What the simulated controllers of third-party kinds share: they serve their kind only while its
CRD is established (so they can start before it is installed), keep an informer for it and the
kinds they create, make KubeRay-style random name suffixes, delete with a uid precondition and in
the background, and write a status only when it changed."""

from __future__ import annotations

import asyncio
import random

from ..conditions import is_true
from ..errors import ApiError
from ..lifecycle import cancel_and_wait
from ..objects import Obj
from .client import CRDS, Resource, delete_options, key_of
from .controller import Controller
from .informer import Handler, Informer
from .jobs import controller_of

Key = tuple[str, str]
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # as Kubernetes' rand.String


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


class CrdGatedController(Controller[Key]):
    """A controller of a third-party kind: it watches its CRD and serves the kind (plus the
    dependent kinds :meth:`serve` watches) only while the CRD is established."""

    crd = ""
    group = ""  # the API group of the owners :meth:`owned_by` recognises

    def __init__(self, seed: int | None = None) -> None:
        super().__init__()
        self.primary: Informer | None = None
        self.dependents: list[Informer] = []
        self._rng = random.Random(seed)
        self._switch: asyncio.Task[None] | None = None

    async def setup(self) -> None:
        self.watch(CRDS, self._on_crd)

    async def stop(self) -> None:
        await cancel_and_wait(self._switch)
        await super().stop()
        self.primary = None
        self.dependents = []

    def serve(self) -> tuple[Informer, list[Informer]]:
        raise NotImplementedError

    def owned_by(self, kind: str) -> Handler:
        """A handler that queues the ``kind`` owning the changed object."""

        def handler(event: str, obj: Obj, old: Obj | None) -> None:
            owner = controller_of(obj)
            if (
                owner is not None
                and owner.get("kind") == kind
                and str(owner.get("apiVersion", "")).startswith(f"{self.group}/")
            ):
                self.queue.add((str(_meta(obj).get("namespace", "")), str(owner.get("name", ""))))

        return handler

    def _on_crd(self, kind: str, crd: Obj, old: Obj | None) -> None:
        if key_of(crd)[1] != self.crd or self.primary is not None:
            return
        if kind != "DELETED" and is_true(crd.get("status") or {}, "Established"):
            self.primary, self.dependents = self.serve()
            for informer in (self.primary, *self.dependents):
                informer.start()
            self._switch = asyncio.create_task(self._enqueue_when_synced())

    async def _enqueue_when_synced(self) -> None:
        if self.primary is None:
            return
        await asyncio.gather(*(i.synced.wait() for i in (self.primary, *self.dependents)))
        for key in list(self.primary.cache):
            self.queue.add(key)

    @property
    def serving(self) -> bool:
        return self.primary is not None and all(i.synced.is_set() for i in (self.primary, *self.dependents))

    def suffix(self) -> str:
        return "".join(self._rng.choice(_ALPHABET) for _ in range(5))

    async def delete(self, resource: Resource, obj: Obj) -> None:
        if _meta(obj).get("deletionTimestamp"):
            return
        try:
            uid = str(_meta(obj).get("uid") or "") or None
            await self.api.delete(resource, *key_of(obj), delete_options(uid=uid, propagation="Background"))
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise

    async def write_status(self, resource: Resource, obj: Obj, status: Obj) -> None:
        if status == (obj.get("status") or {}):
            return
        try:
            await self.api.replace(resource, {**obj, "status": status}, "status")
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise  # 409: it changed meanwhile, and its event brings us back
