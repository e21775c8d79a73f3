"""Fixtures for the I/O layer's tests: a fake list/watch server and kadmit's client for it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, Configuration

from kadmit.kube import Client
from tests.kube.fakeapi import FakeApiServer


@pytest.fixture
async def fake_api(aiohttp_server: Any) -> AsyncIterator[tuple[FakeApiServer, str]]:
    fake = FakeApiServer()
    server = await aiohttp_server(fake.app)
    yield fake, str(server.make_url("")).rstrip("/")
    fake.cut_watches()


@pytest.fixture
async def fake_client(fake_api: tuple[FakeApiServer, str]) -> AsyncIterator[Client]:
    config = Configuration(host=fake_api[1])
    async with ApiClient(config) as api_client:
        yield Client(api_client)
