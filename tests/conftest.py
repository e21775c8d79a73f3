"""What every test gets."""

from __future__ import annotations

from collections.abc import Iterator

import aiohttp.web_app
import pytest


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
