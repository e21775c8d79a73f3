"""What every test gets."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping

import aiohttp.web_app
import pytest

from kadmit.controller.cli import loop_factory


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    """Every async test runs on the loop kadmit runs on: uvloop where installed, as ``kadmit run``
    and ``kadmit local`` choose it (``KADMIT_EVENT_LOOP=asyncio`` runs the suite on the standard
    library's). The two differ in corners: uvloop gives a timer due in under half a millisecond
    as a plain Handle without ``when()``, which failed kadmit's work queue in production only."""
    return {"loop": loop_factory() or asyncio.new_event_loop}


@pytest.fixture(autouse=True)
def forget_aiohttp_middleware_chains() -> Iterator[None]:
    """aiohttp caches each route's middleware chain (an ``lru_cache`` of 1,024 entries) by its
    bound handler, which keeps every server a test started and stopped reachable: a local
    cluster's API server with its whole store, about 25 MB a test. Emptied after each test, the
    suite's memory stays flat instead of growing to gigabytes, where the garbage collector's
    passes over the heap slowed every later test. A process that serves one app for its life (as
    ``kadmit run`` does) holds one entry per route and is not affected."""
    yield
    chains = getattr(aiohttp.web_app, "_cached_build_middleware", None)
    if chains is not None:
        chains.cache_clear()
