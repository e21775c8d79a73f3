"""What the controllers of third-party kinds share: they serve their objects only once the
kinds' CustomResourceDefinitions are established, as a real operator installed beside its CRDs
would, so they can start before the CRDs are applied.

A subclass names the CRDs it needs and, in :meth:`CrdGatedController.serve`, creates its
informers (with :meth:`Controller.watch`); they start once every CRD is established, and every
object of the first informer (:attr:`CrdGatedController.primary`) is reconciled once all caches
are synced (reconciles before that are skipped: :attr:`CrdGatedController.serving` is False).
It also has what such operators do alike: queue the owner of a changed object, make
Kubernetes-style random name suffixes, delete with a uid precondition and in the background, and
write a status only when it changed.
"""

from __future__ import annotations

import random

from .. import timestamps
from ..conditions import is_true, set_condition
from ..objects import Obj
from ..objects import meta as _meta
from .client import Resource, delete_options, ignore_stale, key_of
from .controller import Controller
from .informer import Handler, Informer
from .jobs import controller_of

Key = tuple[str, str]
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # as Kubernetes' rand.String


def set_status_condition(status: Obj, kind: str, value: bool, reason: str, message: str) -> None:
    """Set a ``metav1.Condition`` in ``status``, True or False, stamped now (its message is
    required by the CRDs)."""
    set_condition(status, kind, "True" if value else "False", reason, message, timestamps.now())


class CrdGatedController(Controller[Key]):
    crds: tuple[str, ...] = ()  # metadata.name of every CRD the kind needs, the kind's own first
    workers = 2  # two reconciles at once, in every operator this stands in for

    def __init__(self, seed: int | None = None) -> None:
        super().__init__()
        self.served: list[Informer] = []
        self._established: set[str] = set()
        self._rng = random.Random(seed)

    def serve(self) -> list[Informer]:
        """Create the informers of the kind (the first: the objects reconciled by name)."""
        raise NotImplementedError

    @property
    def primary(self) -> Informer | None:
        """The informer of the kind itself (the first :meth:`serve` made), once served."""
        return self.served[0] if self.served else None

    def informer(self, resource: Resource) -> Informer | None:
        """The informer :meth:`serve` made for ``resource``, once served."""
        return next((i for i in self.served if i.resource == resource), None)

    @staticmethod
    def owned(informer: Informer | None, owner: Obj) -> list[Obj]:
        """The objects ``informer`` holds whose controller is ``owner`` (matched by uid)."""
        uid = _meta(owner).get("uid")
        objects = informer.cache.values() if informer is not None else []
        return [o for o in objects if (controller_of(o) or {}).get("uid") == uid]

    @property
    def group(self) -> str:
        """The kind's API group, read from its own CRD's name (``<plural>.<group>``, the first of
        :attr:`crds`): the group of the owners :meth:`owned_by` recognises."""
        return self.crds[0].partition(".")[2] if self.crds else ""

    @property
    def serving(self) -> bool:
        return bool(self.served) and all(i.synced.is_set() for i in self.served)

    def live(self, key: Key) -> Obj | None:
        """The object of the kind named ``key``, from :attr:`primary`; None while the caches are
        not synced, and when it is gone or being deleted (its children go with it)."""
        if not self.serving or self.primary is None:
            return None
        obj = self.primary.get(*key)
        if obj is None or _meta(obj).get("deletionTimestamp"):
            return None
        return obj

    async def setup(self) -> None:
        self.watch_crds(self.crds, self._on_crd)

    async def stop(self) -> None:
        await super().stop()
        self.served = []
        self._established.clear()

    def _on_crd(self, kind: str, crd: Obj, old: Obj | None) -> None:
        name = key_of(crd)[1]
        if name not in self.crds or self.served:
            return
        if kind != "DELETED" and is_true(crd.get("status") or {}, "Established"):
            self._established.add(name)
        else:
            self._established.discard(name)
        if self._established == set(self.crds):
            self.served = self.serve()
            for informer in self.served:
                informer.start()
            self.catch_up(self.served)

    def enqueue(self, event: str, obj: Obj, old: Obj | None) -> None:
        """A handler that queues the changed object itself."""
        self.queue.add(key_of(obj))

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

    def suffix(self) -> str:
        return "".join(self._rng.choice(_ALPHABET) for _ in range(5))

    async def delete(self, resource: Resource, obj: Obj) -> None:
        if _meta(obj).get("deletionTimestamp"):
            return
        options = delete_options(uid=str(_meta(obj).get("uid") or "") or None, propagation="Background")
        await ignore_stale(self.api.delete(resource, *key_of(obj), options))

    async def write_status(self, resource: Resource, obj: Obj, status: Obj) -> None:
        if status != (obj.get("status") or {}):
            await ignore_stale(self.api.replace(resource, {**obj, "status": status}, "status"))
