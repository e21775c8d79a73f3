"""What every simulated controller shares: a client, informers, a work queue and its workers.

Each add-on is its own client of the API server, as each real controller is its own
process: it lists and watches what it needs and writes back over HTTP.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar, cast

from ..interfaces import Endpoint
from ..lifecycle import cancel_and_wait
from ..workqueue import WorkQueue
from .client import CRDS, Resource, RestClient, selecting
from .informer import Handler, Informer

K = TypeVar("K", bound=Hashable)
log = logging.getLogger(__name__)
SYNC_TIMEOUT_SECONDS = 30.0


class Controller(Generic[K]):
    """Base of the add-ons: subclasses declare informers in :meth:`setup` and implement :meth:`reconcile`."""

    workers = 1
    name = "controller"

    def __init__(self) -> None:
        self.client: RestClient | None = None
        self.queue: WorkQueue[K] = WorkQueue()
        self.informers: list[Informer] = []
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def api(self) -> RestClient:
        if self.client is None:
            raise RuntimeError(f"{self.name} is not started")
        return self.client

    def watch(self, resource: Resource, handler: Handler, labels: str | None = None, *,
              name: str | None = None) -> Informer:
        """Follow ``resource`` into ``handler``: the objects ``labels`` selects (all when None), or
        the one called ``name``."""
        informer = Informer(self.api, resource, handler, selecting(labels, name))
        self.informers.append(informer)
        return informer

    def watch_crds(self, names: Iterable[str], handler: Handler) -> None:
        """Follow only the named CRDs, one informer each filtered by name on the server: the
        others can be large (KServe's is 1.9 MB), and a controller gated on a CRD would decode
        every one of them on every change."""
        for name in names:
            self.watch(CRDS, handler, name=name)

    def watch_now(self, *watches: tuple[Resource, Handler]) -> list[Informer]:
        """Watch from now on, the controller running (its CRD just became Established): start
        the informers at once, and queue every object of the first once all are synced (a
        reconcile before that sees partial caches). :meth:`stop` ends the catching up too."""
        informers = [self.watch(resource, handler) for resource, handler in watches]
        for informer in informers:
            informer.start()
        self.catch_up(informers)
        return informers

    def catch_up(
        self, informers: list[Informer], key: Callable[[tuple[str, str]], K] = lambda k: cast(K, k)
    ) -> None:
        """Once every one of ``informers`` is synced, queue each object of the first (its key by
        ``key``: the controllers that watch late are keyed by (namespace, name) unless told).
        :meth:`stop` ends the catching up."""
        self._tasks.append(asyncio.create_task(self._enqueue_when_synced(informers, key)))

    async def _enqueue_when_synced(
        self, informers: list[Informer], key: Callable[[tuple[str, str]], K]
    ) -> None:
        await asyncio.gather(*(informer.synced.wait() for informer in informers))
        for found in list(informers[0].cache):
            self.queue.add(key(found))

    async def setup(self) -> None:
        """Create informers (with :meth:`watch`) and anything that must exist before they run."""

    async def reconcile(self, key: K) -> None:
        raise NotImplementedError

    async def _reconcile_safely(self, key: K) -> None:
        try:
            await self.reconcile(key)
        except Exception as exc:  # a failed reconcile is retried, never fatal
            log.debug("%s: reconcile %s failed: %s", self.name, key, exc)
            self.queue.add_after(key, 0.5)

    async def start(self, endpoint: Endpoint) -> None:
        self.client = RestClient(endpoint)
        await self.setup()
        for informer in self.informers:
            informer.start()
        await asyncio.wait_for(
            asyncio.gather(*(i.synced.wait() for i in self.informers)), SYNC_TIMEOUT_SECONDS
        )
        for index in range(self.workers):
            worker = self.queue.run_worker(self._reconcile_safely)
            self._tasks.append(asyncio.create_task(worker, name=f"{self.name}-{index}"))

    async def stop(self) -> None:
        self.queue.close()
        await cancel_and_wait(*self._tasks)
        self._tasks.clear()
        for informer in self.informers:
            await informer.stop()
        self.informers.clear()
        if self.client is not None:
            await self.client.close()
            self.client = None
