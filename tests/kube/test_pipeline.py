"""The write pipeline against a real API server (the local cluster's): coalescing, slots, and
nothing lost when a write fails."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kadmit.kube import Client, Obj
from kadmit.kube.errors import ApiError
from kadmit.kube.pipeline import Change, LastWritten, WritePipeline
from kadmit.kube.resources import CONFIG_MAPS
from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.faults import FaultInjector
from tests.kube.pacing import Gate, until


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


async def test_the_copy_read_after_a_conflict_is_the_newest_known_while_the_cache_lags(
    kube: Client,
) -> None:
    """A change that declines on the fresh copy (someone else moved the object on) is dropped, and
    that copy, newer than the cache, is what ``latest`` answers until the cache catches up."""
    created = await kube.create(CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                              "metadata": {"name": "cm", "namespace": "default"},
                                              "data": {"value": "0"}})
    moved = await kube.replace(CONFIG_MAPS, {**created, "data": {"value": "done"}})
    cache = {("default", "cm"): created}  # a watch event behind
    pipeline = WritePipeline(kube, CONFIG_MAPS, lambda ns, name: cache.get((ns, name)), subresource=None)
    await pipeline.start()

    def unless_done(obj: Obj) -> bool:
        if obj["data"]["value"] == "done":
            return False  # the decision no longer fits the object
        obj["data"]["value"] = "1"
        return True

    dropped: list[BaseException | None] = []
    pipeline.submit("default", "cm", Change(unless_done, on_dropped=dropped.append))
    await asyncio.wait_for(pipeline.drain(), 10)

    assert dropped == [None] and pipeline.conflicts == 1
    newest = pipeline.latest("default", "cm")
    assert newest is not None and newest["data"]["value"] == "done"
    assert newest["metadata"]["resourceVersion"] == moved["metadata"]["resourceVersion"]
    cache[("default", "cm")] = moved  # the watch delivers it
    assert pipeline.latest("default", "cm") is moved
    await pipeline.stop()


async def test_a_conflict_whose_reread_fails_is_told_as_not_written() -> None:
    """A write meets a 409, and the read of the fresh copy then fails (503): the change is dropped
    with that error, so its submitter decides again. It was lost before: neither written nor
    dropped, which left a reservation assumed in the engine for good (the chaos e2e test's hang)."""
    faults = FaultInjector(seed=1)
    async with LocalCluster(middlewares=[faults.middleware]) as cluster:
        client = await cluster.api_client()
        async with client:
            kube = Client(client)
            created = await kube.create(CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                                      "metadata": {"name": "cm", "namespace": "default"},
                                                      "data": {"value": "0"}})
            await kube.replace(CONFIG_MAPS, {**created, "data": {"value": "moved"}})
            # The pipeline's cache still has the first version: its write conflicts.
            pipeline = WritePipeline(kube, CONFIG_MAPS, lambda ns, name: created, subresource=None)
            await pipeline.start()
            faults.fail(1.0, 503, for_requests=1, verbs=["get"], resources=["configmaps"], retry_after=0)
            told = Told()
            pipeline.submit("default", "cm", told.change("first", "1"))
            await asyncio.wait_for(pipeline.drain(), 10)
            await pipeline.stop()

            assert faults.counts.failed == 1
            assert told.written == []
            [(label, error)] = told.dropped
            assert label == "first"
            assert isinstance(error, ApiError) and error.status == 503
            assert (await kube.get(CONFIG_MAPS, "default", "cm"))["data"]["value"] == "moved"


async def test_a_change_that_raises_waits_for_the_retry_and_is_never_lost(kube: Client) -> None:
    pipeline = await _pipeline(kube)
    told = Told()
    calls = 0
    good = told.change("flaky", "1")

    def flaky(obj: Obj) -> bool:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("a bug in the change, once")
        return good.mutate(obj)

    pipeline.submit("default", "cm", Change(flaky, good.on_written, good.on_dropped))
    await asyncio.wait_for(pipeline.drain(), 10)  # the workers retry after their backoff
    await pipeline.stop()

    assert calls == 2
    assert told.written == [("flaky", "1")]
    assert told.dropped == []
    assert (await kube.get(CONFIG_MAPS, "default", "cm"))["data"]["value"] == "1"


async def _two_config_maps(kube: Client, pace: Gate) -> WritePipeline:
    cache: dict[tuple[str | None, str], Obj] = {}
    for name in ("cm", "other"):
        cache[("default", name)] = await kube.create(CONFIG_MAPS, {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"value": "0"},
        })  # fmt: skip
    pipeline = WritePipeline(kube, CONFIG_MAPS, lambda ns, name: cache.get((ns, name)),
                             subresource=None, background_pace=pace)  # fmt: skip
    await pipeline.start()
    return pipeline


async def test_background_writes_wait_for_the_pace_and_urgent_ones_do_not(kube: Client) -> None:
    gate = Gate()
    pipeline = await _two_config_maps(kube, gate)
    told = Told()
    pipeline.submit("default", "cm", told.change("waiting", "1", slot="w"), urgent=False)
    await until(lambda: gate.waiting == 1)
    # Decided again while the first waits: the newer state replaces it, unwritten.
    pipeline.submit("default", "cm", told.change("newer", "2", slot="w"), urgent=False)
    pipeline.submit("default", "other", told.change("urgent", "u"))
    await until(lambda: told.written == [("urgent", "u")])
    assert (await kube.get(CONFIG_MAPS, "default", "cm"))["data"]["value"] == "0", "held by the pace"

    gate.open()
    await asyncio.wait_for(pipeline.drain(), 10)
    await pipeline.stop()
    assert (await kube.get(CONFIG_MAPS, "default", "cm"))["data"]["value"] == "2"
    assert told.written == [("urgent", "u"), ("newer", "2")]
    assert told.dropped == [("waiting", None)]
    assert pipeline.writes == 2


async def test_an_urgent_change_carries_what_waits_and_a_withdrawn_change_is_never_written(
    kube: Client,
) -> None:
    gate = Gate()
    pipeline = await _two_config_maps(kube, gate)
    told = Told()
    pipeline.submit("default", "cm", told.change("waiting", "1", slot="w"), urgent=False)
    await until(lambda: gate.waiting == 1)
    pipeline.submit("default", "cm", told.change("urgent", "u"))  # takes the waiting change along
    await until(lambda: len(told.written) == 2)
    assert told.written == [("waiting", "u"), ("urgent", "u")]

    pipeline.submit("default", "other", told.change("moot", "m", slot="w"), urgent=False)
    pipeline.withdraw("default", "other", "w")  # decided away before its turn
    await asyncio.wait_for(pipeline.drain(), 10)  # nothing is left to write: drained at once
    gate.open()
    await pipeline.stop()
    assert (await kube.get(CONFIG_MAPS, "default", "other"))["data"]["value"] == "0"
    assert told.dropped == [("moot", None)]
    assert pipeline.writes == 1
