"""The read-modify-write helpers against a real API server (the local cluster's)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator

import pytest

from kadmit.kube import Client, NotFound, Obj, replaced_by, update, update_unless_gone, without_finalizer
from kadmit.kube.resources import CONFIG_MAPS
from kadmit.localcluster.cluster import LocalCluster


@pytest.fixture
async def kube() -> AsyncIterator[Client]:
    async with LocalCluster() as cluster:
        client = await cluster.api_client()
        async with client:
            yield Client(client)


def _config_map(name: str, finalizers: list[str] | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": "default"}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"a": "1"}}


async def test_replaced_by_writes_what_the_pure_function_returns_and_nothing_when_equal(kube: Client) -> None:
    current = await kube.create(CONFIG_MAPS, _config_map("one"))

    def add_b(obj: Obj) -> Obj:
        new = copy.deepcopy(obj)
        new["data"]["b"] = "2"
        return new

    written = await update(kube, CONFIG_MAPS, current, replaced_by(add_b))
    assert written is not None and written["data"] == {"a": "1", "b": "2"}
    # the same function again changes nothing: no write, and the object keeps its resourceVersion
    assert await update(kube, CONFIG_MAPS, written, replaced_by(add_b)) is None
    assert await update(kube, CONFIG_MAPS, written, replaced_by(lambda _: None)) is None
    fresh = await kube.get(CONFIG_MAPS, "default", "one")
    assert fresh["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]


async def test_without_finalizer_drops_only_that_finalizer(kube: Client) -> None:
    current = await kube.create(CONFIG_MAPS, _config_map("two", ["example.com/keep", "example.com/drop"]))
    written = await update(kube, CONFIG_MAPS, current, without_finalizer("example.com/drop"))
    assert written is not None and written["metadata"]["finalizers"] == ["example.com/keep"]
    assert await update(kube, CONFIG_MAPS, written, without_finalizer("example.com/drop")) is None


async def test_update_unless_gone_is_none_for_a_deleted_object_and_update_raises(kube: Client) -> None:
    current = await kube.create(CONFIG_MAPS, _config_map("three"))
    await kube.delete(CONFIG_MAPS, "default", "three")
    drop_a = replaced_by(lambda obj: {**obj, "data": {}})
    assert await update_unless_gone(kube, CONFIG_MAPS, current, drop_a) is None
    with pytest.raises(NotFound):
        await update(kube, CONFIG_MAPS, current, drop_a)
