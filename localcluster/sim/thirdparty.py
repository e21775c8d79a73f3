"""What the controllers of third-party kinds share: they serve their objects only once the
kinds' CustomResourceDefinitions are established, as a real operator installed beside its CRDs
would, so they can start before the CRDs are applied.

A subclass names the CRDs it needs and, in :meth:`CrdGatedController.serve`, creates its
informers (with :meth:`Controller.watch`); they start once every CRD is established, and every
object of the first informer is reconciled once all caches are synced (reconciles before that
are skipped: :attr:`CrdGatedController.serving` is False).
"""

from __future__ import annotations

import asyncio

from ..conditions import is_true
from ..objects import Obj
from .client import CRDS, key_of
from .controller import Controller
from .informer import Informer

Key = tuple[str, str]


class CrdGatedController(Controller[Key]):
    crds: tuple[str, ...] = ()  # metadata.name of every CRD the kind needs

    def __init__(self) -> None:
        super().__init__()
        self.served: list[Informer] = []
        self._established: set[str] = set()

    def serve(self) -> list[Informer]:
        """Create the informers of the kind (the first: the objects reconciled by name)."""
        raise NotImplementedError

    @property
    def serving(self) -> bool:
        return bool(self.served) and all(i.synced.is_set() for i in self.served)

    async def setup(self) -> None:
        self.watch(CRDS, self._on_crd)

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
            # as Controller.watch_now: every object of the first informer once all are synced
            self._tasks.append(asyncio.create_task(self._enqueue_when_synced(self.served)))
