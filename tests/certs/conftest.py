"""Fixtures: a LocalCluster (the embedded API server) and kubernetes-asyncio clients for it."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes_asyncio import client

from kadmit.localcluster.cluster import LocalCluster

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
NAMESPACE = "kadmit-system"
SERVICE = "kadmit-webhook-service"


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(admission_plugins=[], bookmark_interval=0.2) as running:
        yield running


@pytest.fixture
async def api_client(cluster: LocalCluster) -> AsyncIterator[Any]:
    api = await cluster.api_client()
    async with api:
        core = client.CoreV1Api(api)
        await core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE)))
        yield api


def webhook_configurations() -> list[dict[str, Any]]:
    """kadmit's own webhook configurations, as shipped in manifests/base/webhooks.yaml."""
    documents = yaml.safe_load_all((MANIFESTS / "base" / "webhooks.yaml").read_text())
    return [copy.deepcopy(d) for d in documents if d]


def conversion_crd(name: str = "clusterqueues.kueue.x-k8s.io") -> dict[str, Any]:
    path = MANIFESTS / "crds" / f"kueue.x-k8s.io_{name.split('.')[0]}.yaml"
    crd: dict[str, Any] = yaml.safe_load(path.read_text())
    return crd


async def install_webhook_configurations(api: Any) -> None:
    admission = client.AdmissionregistrationV1Api(api)
    for document in webhook_configurations():
        if document["kind"] == "MutatingWebhookConfiguration":
            await admission.create_mutating_webhook_configuration(cast(Any, document))
        else:
            await admission.create_validating_webhook_configuration(cast(Any, document))
