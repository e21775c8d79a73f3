"""The informer against a fake server: list, watch, resume, bookmarks, 410 → relist, errors, pages."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kadmit.kube import Client, Informer, InformerStopped, Resource
from tests.kube.fakeapi import FakeApiServer

THINGS = "/apis/example.com/v1/namespaces/ns/things"


def thing(name: str, value: int = 0) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": name, "namespace": "ns"}, "spec": {"value": value}}


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, Any, Any]] = []
        self.changed = asyncio.Event()

    async def __call__(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        self.events.append((kind, new["metadata"]["name"], new.get("spec", {}).get("value"),
                            None if old is None else old.get("spec", {}).get("value")))
        self.changed.set()

    async def wait_for(self, count: int) -> None:
        async with asyncio.timeout(5):
            while len(self.events) < count:
                self.changed.clear()
                await self.changed.wait()


async def synced(inf: Informer) -> None:
    async with asyncio.timeout(5):
        await inf.wait_synced()


def informer(client: Client) -> Informer:
    return Informer(client, Resource("example.com", "v1", "things", "Thing"), namespace="ns",
                    backoff_initial=0.01, backoff_max=0.05)


async def test_list_then_watch_delivers_every_change(fake_api: tuple[FakeApiServer, str],
                                                     fake_client: Client) -> None:
    fake, _ = fake_api
    await fake.put(THINGS, thing("a", 1))
    inf = informer(fake_client)
    rec = Recorder()
    inf.add_handler(rec)
    await inf.start()
    await synced(inf)
    assert [o["metadata"]["name"] for o in inf.list()] == ["a"]
    assert inf.get("ns", "a")["kind"] == "Thing"  # list items get their kind back
    await fake.put(THINGS, thing("b", 2))
    await fake.put(THINGS, thing("a", 3))
    await fake.delete(THINGS, "ns", "b")
    await rec.wait_for(4)
    assert rec.events == [("ADDED", "a", 1, None), ("ADDED", "b", 2, None), ("MODIFIED", "a", 3, 1),
                          ("DELETED", "b", 2, 2)]
    assert inf.get("ns", "b") is None
    assert inf.get("ns", "a")["spec"]["value"] == 3
    assert inf.list("other") == []
    await inf.stop()


async def test_cut_watch_resumes_from_last_version_without_relisting(
        fake_api: tuple[FakeApiServer, str], fake_client: Client) -> None:
    fake, _ = fake_api
    inf = informer(fake_client)
    rec = Recorder()
    inf.add_handler(rec)
    await inf.start()
    await synced(inf)
    await fake.put(THINGS, thing("a", 1))
    await rec.wait_for(1)
    fake.cut_watches()
    await fake.put(THINGS, thing("a", 2))
    await rec.wait_for(2)
    assert rec.events[1] == ("MODIFIED", "a", 2, 1)
    assert fake.list_calls == 1 and inf.relists == 1
    assert fake.watch_calls >= 2
    await inf.stop()


async def test_bookmark_moves_the_resume_point(fake_api: tuple[FakeApiServer, str],
                                               fake_client: Client) -> None:
    fake, _ = fake_api
    inf = informer(fake_client)
    await inf.start()
    await synced(inf)
    await fake.bookmark(THINGS)
    for _ in range(100):
        if inf.resource_version == str(fake.rv):
            break
        await asyncio.sleep(0.01)
    assert inf.resource_version == str(fake.rv)
    assert len(inf) == 0
    await inf.stop()


async def _relist_after_gone(fake: FakeApiServer, client: Client) -> Recorder:
    await fake.put(THINGS, thing("keep", 1))
    await fake.put(THINGS, thing("change", 1))
    await fake.put(THINGS, thing("vanish", 1))
    inf = informer(client)
    rec = Recorder()
    inf.add_handler(rec)
    await inf.start()
    await synced(inf)
    await rec.wait_for(3)
    fake.cut_watches()
    # While the informer reconnects, the changes happen and their history is compacted away.
    fake.silently_change(THINGS, thing("change", 2))
    fake.silently_change(THINGS, thing("appear", 1))
    fake.silently_change(THINGS, None, delete=("ns", "vanish"))
    await rec.wait_for(6)
    assert sorted(rec.events[3:]) == [("ADDED", "appear", 1, None), ("DELETED", "vanish", 1, 1),
                                      ("MODIFIED", "change", 2, 1)]
    assert sorted(o["metadata"]["name"] for o in inf.list()) == ["appear", "change", "keep"]
    assert inf.relists == 2
    await fake.put(THINGS, thing("after", 5))
    await rec.wait_for(7)  # watching again after the relist
    await inf.stop()
    return rec


async def test_http_410_relists_and_emits_the_differences(fake_api: tuple[FakeApiServer, str],
                                                          fake_client: Client) -> None:
    await _relist_after_gone(fake_api[0], fake_client)


async def test_410_error_event_relists_too(fake_api: tuple[FakeApiServer, str],
                                           fake_client: Client) -> None:
    fake_api[0].gone_as_event = True
    await _relist_after_gone(fake_api[0], fake_client)


async def test_errors_back_off_and_recover(fake_api: tuple[FakeApiServer, str],
                                           fake_client: Client) -> None:
    fake, _ = fake_api
    await fake.put(THINGS, thing("a", 1))
    fake.fail_next = [500, 503, 429]
    inf = informer(fake_client)
    await inf.start()
    await synced(inf)
    assert inf.get("ns", "a") is not None
    assert not fake.fail_next
    await inf.stop()


async def test_paginated_list_is_complete(fake_api: tuple[FakeApiServer, str],
                                          fake_client: Client) -> None:
    fake, _ = fake_api
    fake.page_size = 2
    for i in range(5):
        await fake.put(THINGS, thing(f"t{i}", i))
    inf = informer(fake_client)
    await inf.start()
    await synced(inf)
    assert len(inf) == 5
    await inf.stop()


async def test_a_failing_handler_does_not_stop_the_others(fake_api: tuple[FakeApiServer, str],
                                                          fake_client: Client) -> None:
    fake, _ = fake_api
    seen: list[str] = []

    def broken(kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        raise RuntimeError("boom")

    def sync_handler(kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        seen.append(new["metadata"]["name"])

    inf = informer(fake_client)
    inf.add_handler(broken)
    inf.add_handler(sync_handler)
    await inf.start()
    await synced(inf)
    await fake.put(THINGS, thing("x"))
    for _ in range(200):
        if seen:
            break
        await asyncio.sleep(0.01)
    assert seen == ["x"]
    await inf.stop()


async def test_wait_synced_times_out_while_the_server_fails(fake_api: tuple[FakeApiServer, str],
                                                            fake_client: Client) -> None:
    fake, _ = fake_api
    fake.fail_next = [500] * 1000
    inf = informer(fake_client)
    await inf.start()
    try:
        async with asyncio.timeout(0.2):
            await inf.wait_synced()
    except TimeoutError:
        assert not inf.synced
    else:
        raise AssertionError("wait_synced returned although no list succeeded")
    finally:
        await inf.stop()


async def test_wait_synced_raises_when_stopped_first(fake_api: tuple[FakeApiServer, str],
                                                    fake_client: Client) -> None:
    fake, _ = fake_api
    fake.fail_next = [500] * 1000
    inf = informer(fake_client)
    await inf.start()
    waiting = asyncio.ensure_future(inf.wait_synced())
    await asyncio.sleep(0.05)
    await inf.stop()
    try:
        await waiting
    except InformerStopped:
        pass
    else:
        raise AssertionError("wait_synced returned for an informer that never synced")


async def test_index_follows_every_change(fake_api: tuple[FakeApiServer, str],
                                          fake_client: Client) -> None:
    fake, _ = fake_api
    await fake.put(THINGS, thing("a", 1))
    inf = informer(fake_client)
    inf.add_index("value", lambda o: [str(o["spec"]["value"])])
    rec = Recorder()
    inf.add_handler(rec)
    await inf.start()
    await synced(inf)
    assert [o["metadata"]["name"] for o in inf.by_index("value", "1")] == ["a"]
    await fake.put(THINGS, thing("b", 1))
    await fake.put(THINGS, thing("a", 2))
    await rec.wait_for(3)
    assert [o["metadata"]["name"] for o in inf.by_index("value", "1")] == ["b"]
    assert [o["metadata"]["name"] for o in inf.by_index("value", "2")] == ["a"]
    await fake.delete(THINGS, "ns", "b")
    await rec.wait_for(4)
    assert inf.by_index("value", "1") == []
    assert inf.by_index("value", "9") == []
    late = informer(fake_client)
    await late.start()
    await synced(late)
    late.add_index("value", lambda o: [str(o["spec"]["value"])])  # added after the sync: built from the cache
    assert [o["metadata"]["name"] for o in late.by_index("value", "2")] == ["a"]
    await late.stop()
    await inf.stop()


async def test_a_burst_of_events_hands_the_loop_back_every_few_milliseconds(
        fake_api: tuple[FakeApiServer, str], fake_client: Client) -> None:
    """A list of many objects, or a watch chunk of many events, is not dispatched in one turn of
    the event loop: a webhook request arriving meanwhile would wait for all of it."""
    fake, _ = fake_api
    for i in range(60):
        await fake.put(THINGS, thing(f"listed-{i}", i))
    order: list[str] = []
    all_seen = asyncio.Event()

    def slow_handler(kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        until = time.perf_counter() + 0.001  # each event costs 1 ms of the loop's time
        while time.perf_counter() < until:
            pass
        order.append("event")
        if order.count("event") == 120:
            all_seen.set()

    async def ticker() -> None:
        while True:
            order.append("tick")
            await asyncio.sleep(0)

    inf = informer(fake_client)
    inf.add_handler(slow_handler)
    ticking = asyncio.create_task(ticker())
    await inf.start()
    await synced(inf)
    for i in range(60):
        await fake.put(THINGS, thing(f"watched-{i}", i))
    async with asyncio.timeout(10):
        await all_seen.wait()
    ticking.cancel()
    await inf.stop()
    runs = [len(run) for run in "".join("e" if o == "event" else " " for o in order).split()]
    # 2 ms per turn: two or three events, then the loop's other work (here, the ticker) runs
    assert max(runs) <= 10, runs
