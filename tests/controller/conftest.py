"""Fixtures for the controller's tests: a fake list/watch server and a kubernetes-asyncio client for it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, Configuration

from tests.controller.fakeapi import FakeApiServer


@pytest.fixture
async def fake_api(aiohttp_server: Any) -> AsyncIterator[tuple[FakeApiServer, str]]:
    fake = FakeApiServer()
    server = await aiohttp_server(fake.app)
    yield fake, str(server.make_url("")).rstrip("/")
    fake.cut_watches()


@pytest.fixture
async def fake_client(fake_api: tuple[FakeApiServer, str]) -> AsyncIterator[ApiClient]:
    config = Configuration(host=fake_api[1])
    async with ApiClient(config) as client:
        yield client
