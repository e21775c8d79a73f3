"""Fixtures: a fresh LocalCluster per test and kubernetes-asyncio clients for it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from kadmit.localcluster.cluster import LocalCluster

REPO = Path(__file__).resolve().parents[2]


def kueue_examples() -> Path:
    """Kueue's sample manifests: ``shared/`` sits beside the repository (CI) or at /work/shared."""
    for candidate in (REPO.parent / "shared" / "kueue-examples", Path("/work/shared/kueue-examples")):
        if candidate.is_dir():
            return candidate
    pytest.skip("Kueue's sample manifests (shared/kueue-examples) are not available")


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(admission_plugins=[], bookmark_interval=0.2) as running:
        yield running


@pytest.fixture
async def api_client(cluster: LocalCluster) -> AsyncIterator[Any]:
    api = await cluster.api_client()
    async with api:
        yield api


@pytest.fixture
def core(api_client: Any) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def batch(api_client: Any) -> client.BatchV1Api:
    return client.BatchV1Api(api_client)


@pytest.fixture
def custom(api_client: Any) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)


@pytest.fixture
def ext(api_client: Any) -> client.ApiextensionsV1Api:
    return client.ApiextensionsV1Api(api_client)
