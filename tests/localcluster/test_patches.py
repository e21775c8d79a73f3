"""PATCH flavours: merge patch, JSON patch, strategic merge patch with the built-in merge keys."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiException

from kadmit.localcluster.patches import merge_patch, strategic_merge

MERGE = "application/merge-patch+json"


def pod_spec() -> dict[str, Any]:
    return {
        "containers": [
            {
                "name": "a",
                "image": "x",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "ports": [{"containerPort": 80}],
            },
            {"name": "b", "image": "y"},
        ],
        "tolerations": [{"key": "k1", "operator": "Exists"}],
        "volumes": [{"name": "v1", "emptyDir": {}}],
    }


def test_merge_patch_is_rfc7386() -> None:
    target = {"a": {"b": 1, "c": 2}, "l": [1, 2], "keep": True}
    assert merge_patch(target, {"a": {"b": None, "d": 3}, "l": [3]}) == {
        "a": {"c": 2, "d": 3},
        "l": [3],
        "keep": True,
    }
    assert target == {"a": {"b": 1, "c": 2}, "l": [1, 2], "keep": True}


def test_strategic_merge_lists_by_merge_key() -> None:
    original = {"spec": pod_spec()}
    patch = {
        "spec": {
            "containers": [
                {"name": "a", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]},
                {"name": "c", "image": "z"},
            ]
        }
    }
    result = strategic_merge(original, patch)
    containers = result["spec"]["containers"]
    assert [c["name"] for c in containers] == ["a", "b", "c"]
    assert containers[0]["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "3"},
        {"name": "C", "value": "4"},
    ]
    assert containers[0]["image"] == "x" and containers[0]["ports"] == [{"containerPort": 80}]


def test_strategic_merge_atomic_lists_and_directives() -> None:
    original = {"spec": pod_spec(), "metadata": {"finalizers": ["a"], "labels": {"x": "1", "y": "2"}}}
    patch = {
        "metadata": {"finalizers": ["b"], "labels": {"x": None}},
        "spec": {
            "tolerations": [{"key": "k2", "operator": "Exists"}],  # atomic upstream: replaced
            "containers": [{"name": "b", "$patch": "delete"}],
            "volumes": [{"$patch": "replace"}, {"name": "v2", "emptyDir": {}}],
        },
    }
    result = strategic_merge(original, patch)
    assert result["metadata"] == {"finalizers": ["a", "b"], "labels": {"y": "2"}}
    assert result["spec"]["tolerations"] == [{"key": "k2", "operator": "Exists"}]
    assert [c["name"] for c in result["spec"]["containers"]] == ["a"]
    assert result["spec"]["volumes"] == [{"name": "v2", "emptyDir": {}}]
    removed = strategic_merge(result, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})
    assert removed["metadata"]["finalizers"] == ["b"]
    replaced = strategic_merge(result, {"spec": {"$patch": "replace", "containers": []}})
    assert replaced["spec"] == {"containers": []}


def test_strategic_merge_conditions_by_type() -> None:
    original = {
        "status": {
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "Scheduled", "status": "True"}]
        }
    }
    result = strategic_merge(original, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert result["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "Scheduled", "status": "True"},
    ]


async def test_patch_types_over_http(core: client.CoreV1Api) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod_spec()}
    await core.create_namespaced_pod("default", pod)
    # kubernetes-asyncio picks strategic merge patch for a dict body on built-in kinds.
    smp = await core.patch_namespaced_pod(
        "p", "default", {"spec": {"containers": [{"name": "a", "image": "x2"}]}}
    )
    assert [c.image for c in smp.spec.containers] == ["x2", "y"]
    merged = await core.patch_namespaced_pod(
        "p", "default", {"metadata": {"labels": {"l": "v"}}}, _content_type=MERGE
    )
    assert merged.metadata.labels == {"l": "v"}
    ops = [{"op": "replace", "path": "/spec/containers/1/image", "value": "y2"}]
    patched = await core.patch_namespaced_pod("p", "default", ops)  # a list body is sent as a JSON patch
    assert [c.image for c in patched.spec.containers] == ["x2", "y2"]
    with pytest.raises(ApiException) as caught:
        await core.patch_namespaced_pod(
            "p", "default", [{"op": "test", "path": "/metadata/name", "value": "q"}]
        )
    assert caught.value.status == 422
    with pytest.raises(ApiException) as caught:
        await core.patch_namespaced_pod(
            "p", "default", {"metadata": {}}, _content_type="application/apply-patch+yaml"
        )
    assert caught.value.status == 422  # server-side apply needs a fieldManager
    assert "fieldManager: Required value: is required for apply patch" in str(caught.value.body)


async def test_strategic_merge_is_refused_for_custom_resources(
    custom: client.CustomObjectsApi, ext: client.ApiextensionsV1Api
) -> None:
    from tests.localcluster.test_crd import widget, widget_crd

    await ext.create_custom_resource_definition(widget_crd())
    await custom.create_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", widget("a", size=1)
    )
    with pytest.raises(ApiException) as caught:
        await custom.patch_namespaced_custom_object(
            "example.com",
            "v1",
            "default",
            "widgets",
            "a",
            {"spec": {"size": 2}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert caught.value.status == 415
    with pytest.raises(
        ApiException
    ) as caught:  # a dict sent as JSON patch, as kubernetes-asyncio does by default
        await custom.patch_namespaced_custom_object(
            "example.com", "v1", "default", "widgets", "a", {"spec": {"size": 2}}
        )
    assert caught.value.status == 400
    patched = await custom.patch_namespaced_custom_object(
        "example.com", "v1", "default", "widgets", "a", [{"op": "replace", "path": "/spec/size", "value": 2}]
    )
    assert patched["spec"]["size"] == 2


def test_set_element_order_reorders_merged_lists() -> None:
    original = {
        "spec": {
            "containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}],
            "finalizers": ["p", "q"],
        }
    }
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}],
            "containers": [{"name": "c", "image": "z"}],
        }
    }
    result = strategic_merge(original, patch)
    assert [c["name"] for c in result["spec"]["containers"]] == ["c", "a", "b"]  # b is server-only: last
