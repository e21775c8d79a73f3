"""Custom resources: CRDs from manifests/, schema validation, defaulting, pruning, the status
subresource, versions, and what deleting a CRD does."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client import ApiException

from kadmit.localcluster.cluster import LocalCluster
from tests.localcluster.conftest import kueue_examples

CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
GROUP, V = "kueue.x-k8s.io", "v1beta2"
MERGE = "application/merge-patch+json"


def load_crd(name: str) -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load((CRDS / f"kueue.x-k8s.io_{name}.yaml").read_text())
    return crd


def widget_crd(conversion: str = "None") -> dict[str, Any]:
    """A two-version CRD with a status subresource, defaults and a required field."""
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "minimum": 1},
                    "color": {"type": "string", "default": "blue", "enum": ["blue", "red"]},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            },
            "status": {
                "type": "object",
                "properties": {
                    "ready": {"type": "boolean"},
                    "detail": {"type": "object", "properties": {"count": {"type": "integer", "default": 0}}},
                },
            },
        },
    }
    crd: dict[str, Any] = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                },
                {
                    "name": "v1beta1",
                    "served": True,
                    "storage": False,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                },
            ],
        },
    }
    if conversion == "Webhook":
        crd["spec"]["conversion"] = {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {"service": {"name": "nowhere", "namespace": "default", "path": "/convert"}},
                "conversionReviewVersions": ["v1"],
            },
        }
    return crd


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


@pytest.fixture
async def widgets(ext: client.ApiextensionsV1Api) -> None:
    await ext.create_custom_resource_definition(widget_crd())


async def test_every_kueue_crd_is_accepted_and_served(
    ext: client.ApiextensionsV1Api, custom: client.CustomObjectsApi
) -> None:
    for path in sorted(CRDS.glob("kueue.x-k8s.io_*.yaml")):
        created = await ext.create_custom_resource_definition(yaml.safe_load(path.read_text()))
        conditions = {c.type: c.status for c in created.status.conditions}
        assert conditions == {"NamesAccepted": "True", "Established": "True"}
    docs = list(yaml.safe_load_all((kueue_examples() / "admin__single-clusterqueue-setup.yaml").read_text()))
    plurals = {
        "ResourceFlavor": "resourceflavors",
        "ClusterQueue": "clusterqueues",
        "LocalQueue": "localqueues",
    }
    for doc in docs:
        plural = plurals[doc["kind"]]
        if doc["metadata"].get("namespace"):
            await custom.create_namespaced_custom_object(GROUP, V, doc["metadata"]["namespace"], plural, doc)
        else:
            await custom.create_cluster_custom_object(GROUP, V, plural, doc)
    queue = await custom.get_namespaced_custom_object(GROUP, V, "default", "localqueues", "user-queue")
    assert queue["spec"]["clusterQueue"] == "cluster-queue"
    cq = await custom.get_cluster_custom_object(GROUP, V, "clusterqueues", "cluster-queue")
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuota"] == "36Gi"


async def test_custom_resource_crud_and_conflict(widgets: None, custom: client.CustomObjectsApi) -> None:
    created = await custom.create_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", widget("a", size=1)
    )
    assert created["spec"]["color"] == "blue"  # defaulted from the schema
    assert created["metadata"]["generation"] == 1 and "status" not in created
    created["spec"]["size"] = 2
    updated = await custom.replace_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", "a", created
    )
    assert updated["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as caught:
        await custom.replace_namespaced_custom_object("example.com", "v1", "default", "widgets", "a", created)
    assert caught.value.status == 409
    listed = await custom.list_namespaced_custom_object("example.com", "v1", "default", "widgets")
    assert [w["metadata"]["name"] for w in listed["items"]] == ["a"]
    await custom.delete_namespaced_custom_object("example.com", "v1", "default", "widgets", "a")
    with pytest.raises(ApiException) as caught:
        await custom.get_namespaced_custom_object("example.com", "v1", "default", "widgets", "a")
    assert caught.value.status == 404
    assert json.loads(caught.value.body)["message"] == 'widgets.example.com "a" not found'


async def test_schema_validation_is_422_with_causes(widgets: None, custom: client.CustomObjectsApi) -> None:
    with pytest.raises(ApiException) as caught:
        await custom.create_namespaced_custom_object(
            "example.com", "v1", "default", "widgets", widget("a", size="big", color="green")
        )
    body = json.loads(caught.value.body)
    assert caught.value.status == 422 and body["reason"] == "Invalid"
    fields = {c["field"]: c["reason"] for c in body["details"]["causes"]}
    assert fields == {"spec.size": "FieldValueTypeInvalid", "spec.color": "FieldValueNotSupported"}
    with pytest.raises(ApiException) as caught:
        await custom.create_namespaced_custom_object("example.com", "v1", "default", "widgets", widget("b"))
    assert json.loads(caught.value.body)["details"]["causes"][0]["field"] == "spec.size"


async def test_unknown_fields_are_pruned_or_rejected(widgets: None, cluster: LocalCluster) -> None:
    body = widget("a", size=1, bogus=True, extra={"anything": {"goes": 1}})
    url = f"{cluster.url}/apis/example.com/v1/namespaces/default/widgets"
    async with aiohttp.ClientSession() as http:
        async with http.post(url + "?fieldValidation=Strict", json=body) as resp:
            assert resp.status == 400
            assert (await resp.json())["message"] == 'strict decoding error: unknown field "spec.bogus"'
        async with http.post(url, json=body) as resp:
            assert resp.status == 201
            assert "spec.bogus" in resp.headers["Warning"]
            stored = await resp.json()
    assert "bogus" not in stored["spec"] and stored["spec"]["extra"] == {"anything": {"goes": 1}}


async def test_status_subresource(widgets: None, custom: client.CustomObjectsApi) -> None:
    obj = widget("a", size=1)
    obj["status"] = {"ready": True}
    created = await custom.create_namespaced_custom_object("example.com", "v1", "default", "widgets", obj)
    assert "status" not in created  # dropped on create
    patched = await custom.patch_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", "a", {"status": {"ready": True}}, _content_type=MERGE
    )
    assert "status" not in patched
    written = await custom.patch_namespaced_custom_object_status(
        "example.com",
        "v1",
        "default",
        "widgets",
        "a",
        {"spec": {"size": 5}, "status": {"ready": True}},
        _content_type=MERGE,
    )
    assert written["status"] == {"ready": True} and written["spec"]["size"] == 1
    assert written["metadata"]["generation"] == 1
    with pytest.raises(ApiException) as caught:
        await custom.patch_namespaced_custom_object_status(
            "example.com", "v1", "default", "widgets", "a", {"status": {"ready": "yes"}}, _content_type=MERGE
        )
    assert caught.value.status == 422  # a status write checks the status (the rest is as stored)
    assert [c["field"] for c in json.loads(caught.value.body)["details"]["causes"]] == ["status.ready"]


async def test_status_write_prunes_and_checks_only_the_status(widgets: None, cluster: LocalCluster) -> None:
    """A status write normalizes the status alone (the rest is as stored): its unknown fields are
    pruned, reported under ``fieldValidation``, and refused when it is Strict."""
    url = f"{cluster.url}/apis/example.com/v1/namespaces/default/widgets"
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json=widget("a", size=1)) as resp:
            assert resp.status == 201
            stored = await resp.json()
        stored["status"] = {"ready": True, "bogus": 1}
        async with http.put(f"{url}/a/status?fieldValidation=Strict", json=stored) as resp:
            assert resp.status == 400
            assert (await resp.json())["message"] == 'strict decoding error: unknown field "status.bogus"'
        async with http.put(f"{url}/a/status?fieldValidation=Warn", json=stored) as resp:
            assert resp.status == 200
            assert "status.bogus" in resp.headers["Warning"]
            written = await resp.json()
    assert written["status"] == {"ready": True}
    assert written["spec"] == {"size": 1, "color": "blue"}
    # The next write keeps `ready` as stored and normalizes only what it changes.
    written["status"]["detail"] = {"bogus": 1}
    async with aiohttp.ClientSession() as http:
        async with http.put(f"{url}/a/status?fieldValidation=Strict", json=written) as resp:
            assert resp.status == 400
            message = (await resp.json())["message"]
            assert message == 'strict decoding error: unknown field "status.detail.bogus"'
        async with http.put(f"{url}/a/status?fieldValidation=Warn", json=written) as resp:
            assert resp.status == 200
            assert "status.detail.bogus" in resp.headers["Warning"]
            again = await resp.json()
    assert again["status"] == {"ready": True, "detail": {"count": 0}}


async def test_served_versions_share_storage(widgets: None, custom: client.CustomObjectsApi) -> None:
    await custom.create_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", widget("a", size=1)
    )
    old = await custom.get_namespaced_custom_object("example.com", "v1beta1", "default", "widgets", "a")
    assert old["apiVersion"] == "example.com/v1beta1" and old["spec"]["size"] == 1
    listed = await custom.list_namespaced_custom_object("example.com", "v1beta1", "default", "widgets")
    assert listed["items"][0]["apiVersion"] == "example.com/v1beta1"


async def test_webhook_conversion_failure_is_an_error(
    ext: client.ApiextensionsV1Api, custom: client.CustomObjectsApi
) -> None:
    await ext.create_custom_resource_definition(widget_crd("Webhook"))
    await custom.create_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", widget("a", size=1)
    )
    with pytest.raises(ApiException) as caught:
        await custom.get_namespaced_custom_object("example.com", "v1beta1", "default", "widgets", "a")
    assert caught.value.status == 500


async def test_cluster_scoped_custom_resources(
    ext: client.ApiextensionsV1Api, custom: client.CustomObjectsApi
) -> None:
    await ext.create_custom_resource_definition(load_crd("resourceflavors"))
    flavor = {
        "apiVersion": f"{GROUP}/{V}",
        "kind": "ResourceFlavor",
        "metadata": {"name": "f"},
        "spec": {"nodeLabels": {"zone": "a"}},
    }
    await custom.create_cluster_custom_object(GROUP, V, "resourceflavors", flavor)
    got = await custom.get_cluster_custom_object(GROUP, V, "resourceflavors", "f")
    assert got["spec"]["nodeLabels"] == {"zone": "a"} and "namespace" not in got["metadata"]


async def test_watch_custom_resources(widgets: None, custom: client.CustomObjectsApi) -> None:
    listed = await custom.list_namespaced_custom_object("example.com", "v1", "default", "widgets")
    await custom.create_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", widget("a", size=1)
    )
    w = watch.Watch()
    stream = w.stream(
        custom.list_namespaced_custom_object,
        "example.com",
        "v1",
        "default",
        "widgets",
        resource_version=listed["metadata"]["resourceVersion"],
        timeout_seconds=5,
    )
    async for event in stream:
        assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "a"
        break
    w.stop()


async def test_deleting_a_crd_deletes_its_objects(
    widgets: None, ext: client.ApiextensionsV1Api, custom: client.CustomObjectsApi, cluster: LocalCluster
) -> None:
    await custom.create_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", widget("a", size=1)
    )
    await ext.delete_custom_resource_definition("widgets.example.com")
    await asyncio.wait_for(cluster.settled(), 5)
    assert cluster.store.count("example.com", "widgets") == 0
    assert (
        cluster.store.get("apiextensions.k8s.io", "customresourcedefinitions", None, "widgets.example.com")
        is None
    )
    with pytest.raises(ApiException) as caught:
        await custom.list_namespaced_custom_object("example.com", "v1", "default", "widgets")
    assert caught.value.status == 404


async def test_crd_group_appears_in_discovery(widgets: None, cluster: LocalCluster) -> None:
    async with aiohttp.ClientSession() as http, http.get(f"{cluster.url}/apis/example.com/v1") as resp:
        doc = await resp.json()
    names = {r["name"]: r for r in doc["resources"]}
    assert names["widgets"]["shortNames"] == ["wd"] and "widgets/status" in names


async def test_invalid_crd_is_rejected(ext: client.ApiextensionsV1Api) -> None:
    crd = widget_crd()
    crd["metadata"]["name"] = "wrong.example.com"
    with pytest.raises(ApiException) as caught:
        await ext.create_custom_resource_definition(crd)
    assert caught.value.status == 422


async def test_writes_through_another_version_are_stored_at_the_storage_version(
    widgets: None, custom: client.CustomObjectsApi, cluster: LocalCluster
) -> None:
    old_style = dict(widget("a", size=1), apiVersion="example.com/v1beta1")
    created = await custom.create_namespaced_custom_object(
        "example.com", "v1beta1", "default", "widgets", old_style
    )
    assert created["apiVersion"] == "example.com/v1beta1"
    stored = cluster.store.get("example.com", "widgets", "default", "a")
    assert stored is not None and stored["apiVersion"] == "example.com/v1"
    patched = await custom.patch_namespaced_custom_object(
        "example.com",
        "v1beta1",
        "default",
        "widgets",
        "a",
        {"spec": {"size": 2}},
        _content_type="application/merge-patch+json",
    )
    assert patched["apiVersion"] == "example.com/v1beta1" and patched["spec"]["size"] == 2
