"""The write pipeline against a real API server (the local cluster's): coalescing and slots."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kadmit.kube import Client, Obj
from kadmit.kube.pipeline import Change, LastWritten, WritePipeline
from kadmit.kube.resources import CONFIG_MAPS
from kadmit.localcluster.cluster import LocalCluster


@pytest.fixture
async def kube() -> AsyncIterator[Client]:
    async with LocalCluster() as cluster:
        client = await cluster.api_client()
        async with client:
            yield Client(client)


class Told:
    """What a pipeline told the submitter of each change."""

    def __init__(self) -> None:
        self.written: list[tuple[str, str]] = []
        self.dropped: list[tuple[str, BaseException | None]] = []

    def change(self, label: str, value: str, slot: str | None = None) -> Change:
        def mutate(obj: Obj) -> bool:
            if obj["data"].get("value") == value:
                return False
            obj["data"]["value"] = value
            return True

        def written(obj: Obj) -> None:
            self.written.append((label, obj["data"]["value"]))

        def dropped(error: BaseException | None) -> None:
            self.dropped.append((label, error))

        return Change(mutate, written, dropped, slot)


async def _pipeline(kube: Client) -> WritePipeline:
    created = await kube.create(CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                              "metadata": {"name": "cm", "namespace": "default"},
                                              "data": {"value": "0"}})
    pipeline = WritePipeline(kube, CONFIG_MAPS, lambda ns, name: created, subresource=None)
    await pipeline.start()
    return pipeline


async def test_a_newer_change_in_the_same_slot_replaces_one_still_waiting(kube: Client) -> None:
    pipeline = await _pipeline(kube)
    told = Told()
    # Submitted in one turn of the loop: all three wait together for the object's next write.
    pipeline.submit("default", "cm", told.change("first", "1", slot="pending"))
    pipeline.submit("default", "cm", told.change("other", "x"))
    pipeline.submit("default", "cm", told.change("second", "2", slot="pending"))
    await pipeline.drain()
    await pipeline.stop()

    stored = await kube.get(CONFIG_MAPS, "default", "cm")
    assert stored["data"]["value"] == "2"
    assert pipeline.writes == 1
    # Only the state written is told; the replaced change is dropped without an error.
    assert told.written == [("other", "2"), ("second", "2")]
    assert told.dropped == [("first", None)]


async def test_changes_without_a_slot_all_apply_in_order(kube: Client) -> None:
    pipeline = await _pipeline(kube)
    told = Told()
    pipeline.submit("default", "cm", told.change("first", "1"))
    pipeline.submit("default", "cm", told.change("second", "2"))
    await pipeline.drain()
    await pipeline.stop()

    assert (await kube.get(CONFIG_MAPS, "default", "cm"))["data"]["value"] == "2"
    assert pipeline.writes == 1
    assert told.written == [("first", "2"), ("second", "2")]
    assert told.dropped == []


def test_the_last_written_copy_is_used_until_the_cache_catches_up() -> None:
    cache: dict[tuple[str | None, str], Obj] = {}
    last = LastWritten(lambda namespace, name: cache.get((namespace, name)))
    key = ("default", "cm")

    def copy_at(version: str) -> Obj:
        return {"metadata": {"name": "cm", "namespace": "default", "resourceVersion": version}}

    cache[key] = copy_at("5")
    assert last.latest(key) is cache[key]
    written = copy_at("7")
    last.remember(key, written)
    assert last.latest(key) is written, "the cache is a watch event behind"
    cache[key] = copy_at("7")
    assert last.latest(key) is cache[key], "caught up"
    last.remember(key, copy_at("9"))
    cache[key] = copy_at("11")  # someone else wrote after us: theirs is newer
    assert last.latest(key) is cache[key]
    last.remember(key, copy_at("12"))
    del cache[key]
    assert last.latest(key) is None, "deleted"
