"""CRD validation rules (CEL), when the cluster is asked to evaluate them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiException

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.crdrules import rule_causes

CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
GROUP, V = "kueue.x-k8s.io", "v1beta2"


def schema_of(name: str) -> dict[str, Any]:
    crd = yaml.safe_load((CRDS / f"kueue.x-k8s.io_{name}.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == V)
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def test_rules_on_create_and_transition_rules_on_update() -> None:
    schema = schema_of("localqueues")
    queue = {"spec": {"clusterQueue": "a"}}
    assert rule_causes(schema, queue, None) == []  # "self == oldSelf" needs an old object
    moved = {"spec": {"clusterQueue": "b"}}
    [found] = rule_causes(schema, moved, queue)
    assert found["field"] == "spec.clusterQueue" and "immutable" in found["message"].lower()


def test_list_rules_and_ratcheting() -> None:
    schema = schema_of("resourceflavors")
    bad = {"spec": {"tolerations": [{"key": "k", "operator": "Sideways"}]}}
    causes = rule_causes(schema, bad, None)
    assert causes and all(c["field"] == "spec.tolerations" for c in causes)
    # An update that leaves the bad value alone is not re-validated (validation ratcheting).
    relabelled = {"metadata": {"labels": {"x": "y"}}, **bad}
    assert rule_causes(schema, relabelled, bad) == []


@pytest.fixture
async def strict_cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(admission_plugins=[], crd_validation_rules=True) as cluster:
        yield cluster


async def test_cluster_enforces_rules(strict_cluster: LocalCluster) -> None:
    api = await strict_cluster.api_client()
    async with api:
        ext, custom = client.ApiextensionsV1Api(api), client.CustomObjectsApi(api)
        await ext.create_custom_resource_definition(
            yaml.safe_load((CRDS / "kueue.x-k8s.io_localqueues.yaml").read_text())
        )
        queue = {
            "apiVersion": f"{GROUP}/{V}",
            "kind": "LocalQueue",
            "metadata": {"name": "q"},
            "spec": {"clusterQueue": "a"},
        }
        await custom.create_namespaced_custom_object(GROUP, V, "default", "localqueues", queue)
        with pytest.raises(ApiException) as caught:
            await custom.patch_namespaced_custom_object(
                GROUP,
                V,
                "default",
                "localqueues",
                "q",
                {"spec": {"clusterQueue": "b"}},
                _content_type="application/merge-patch+json",
            )
        body = json.loads(caught.value.body)
        assert caught.value.status == 422 and body["details"]["causes"][0]["field"] == "spec.clusterQueue"
