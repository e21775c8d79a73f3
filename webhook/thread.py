"""The webhook server on an event loop of its own, in a thread of its own.

The API server holds every create and update of a watched kind until kadmit answers its review,
and the manager's loop has long stretches of work between two awaits: an engine cycle over
thousands of pending Workloads, a burst of watch events decoded and dispatched. On that loop a
review waits for the stretch to end (a p99 of 25 to 50 ms in Kueue's scalability test). On a loop
of its own a review waits only for the interpreter to hand its thread the GIL, which the manager's
thread gives up within the switch interval this module sets.

The handlers read the manager's informer caches from this thread: they only look objects up
(``Informer.get``, ``by_index``, ``list``, each made of single C-level operations on the caches),
and never await anything of the manager's loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

from kadmit.webhook.server import WebhookServer

T = TypeVar("T")

SWITCH_INTERVAL = 0.001
"""Seconds a thread holding the GIL keeps it while another waits (CPython's default is 5 ms).

A review wakes its thread several times (the connection readable, the body read, the answer
written), and each wake waits up to one interval while the manager's thread computes: at 5 ms
that alone is 15 to 25 ms a review, at 1 ms a few. The interval costs nothing while the webhook's
thread sleeps, which is when no review is being served."""


class WebhookThread:
    """Runs a :class:`WebhookServer` on an event loop of the same kind as the caller's (uvloop's
    where kadmit runs on uvloop), in a daemon thread; ``start`` and ``stop`` are awaited from the
    caller's loop."""

    def __init__(self, server: WebhookServer, name: str = "kadmit-webhook") -> None:
        self.server = server
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The server's loop while it runs."""
        return self._loop

    async def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("the webhook thread is already started")
        loop_class: Callable[[], asyncio.AbstractEventLoop] = type(asyncio.get_running_loop())
        started: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            loop = loop_class()
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.server.start())
            except BaseException as exc:
                loop.close()
                started.set_exception(exc)
                return
            self._loop = loop
            started.set_result(None)
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        if sys.getswitchinterval() > SWITCH_INTERVAL:
            sys.setswitchinterval(SWITCH_INTERVAL)
        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        try:
            await asyncio.wrap_future(started)
        except BaseException:
            await asyncio.to_thread(self._thread.join)
            self._thread = None
            raise

    def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the server's loop, waited for: what touches the server's SSL context while
        that loop makes handshakes with it, such as a certificate load (OpenSSL's contexts are not
        to be changed while another thread uses them). Before the server starts, after it stops,
        or on its own thread, ``fn`` runs at once. The caller's thread waits for one turn of the
        server's loop: a certificate load is rare and takes about a millisecond."""
        loop = self._loop
        if loop is None or threading.current_thread() is self._thread:
            return fn()

        async def call() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), loop).result()

    async def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self.server.stop(), loop))
        finally:
            loop.call_soon_threadsafe(loop.stop)
            await asyncio.to_thread(thread.join)
            self._loop = None
            self._thread = None
