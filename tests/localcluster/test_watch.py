"""Watch through kubernetes-asyncio: resume, bookmarks, selectors, 410 then relist, disconnects."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client import ApiException

from kadmit.localcluster.cluster import LocalCluster


def cm(name: str, **labels: str) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels or None))


async def collect(stream: Any, count: int, within: float = 5) -> list[tuple[str, str]]:
    events: list[tuple[str, str]] = []

    async def run() -> None:
        async for event in stream:
            if event["type"] == "BOOKMARK":
                continue
            events.append((event["type"], event["raw_object"]["metadata"]["name"]))
            if len(events) == count:
                return

    await asyncio.wait_for(run(), within)
    return events


async def test_watch_from_resource_version_replays_history(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map("default", cm("before"))
    listed = await core.list_namespaced_config_map("default")
    await core.create_namespaced_config_map("default", cm("after"))
    await core.patch_namespaced_config_map("after", "default", {"data": {"a": "b"}})
    await core.delete_namespaced_config_map("before", "default")
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=5,
    )
    events = await collect(stream, 3)
    w.stop()
    assert events == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "before")]


async def test_watch_without_version_starts_with_current_state(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map("default", cm("a"))
    w = watch.Watch()
    stream = w.stream(core.list_namespaced_config_map, "default", timeout_seconds=5)

    async def later() -> None:
        await asyncio.sleep(0.1)
        await core.create_namespaced_config_map("default", cm("b"))

    task = asyncio.create_task(later())
    events = await collect(stream, 2)
    await task
    w.stop()
    assert events == [("ADDED", "a"), ("ADDED", "b")]


async def test_bookmarks_carry_the_latest_version(core: client.CoreV1Api, cluster: LocalCluster) -> None:
    listed = await core.list_namespaced_config_map("default")
    await core.create_namespaced_secret("default", client.V1Secret(metadata=client.V1ObjectMeta(name="s")))
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=listed.metadata.resource_version,
        allow_watch_bookmarks=True,
        timeout_seconds=5,
    )
    async for event in stream:
        assert event["type"] == "BOOKMARK"
        assert event["raw_object"]["metadata"]["resourceVersion"] == str(cluster.store.resource_version)
        break
    w.stop()


async def test_watch_timeout_ends_the_stream(core: client.CoreV1Api) -> None:
    w = watch.Watch()
    started = asyncio.get_running_loop().time()
    events = [
        e
        async for e in w.stream(
            core.list_namespaced_config_map, "default", resource_version="1", timeout_seconds=1
        )
    ]
    elapsed = asyncio.get_running_loop().time() - started
    assert events == [] and 0.9 <= elapsed < 3


async def test_selector_transitions_are_added_and_deleted(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map("default", cm("a", app="x"))
    listed = await core.list_namespaced_config_map("default", label_selector="app=x")
    await core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"app": "y"}}})
    await core.patch_namespaced_config_map("a", "default", {"metadata": {"labels": {"app": "x"}}})
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_config_map,
        "default",
        label_selector="app=x",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=5,
    )
    events = await collect(stream, 2)
    w.stop()
    assert events == [("DELETED", "a"), ("ADDED", "a")]


async def test_too_old_version_is_410_then_relist_and_resume(
    core: client.CoreV1Api, cluster: LocalCluster
) -> None:
    await core.create_namespaced_config_map("default", cm("a"))
    old = (await core.list_namespaced_config_map("default")).metadata.resource_version
    await core.create_namespaced_config_map("default", cm("b"))
    cluster.store.compact()
    w = watch.Watch()
    with pytest.raises(ApiException) as caught:
        async for _ in w.stream(
            core.list_namespaced_config_map, "default", resource_version=old, timeout_seconds=2
        ):
            pass
    assert caught.value.status == 410
    relisted = await core.list_namespaced_config_map("default")
    assert [c.metadata.name for c in relisted.items] == ["a", "b"]
    w = watch.Watch()
    stream = w.stream(
        core.list_namespaced_config_map,
        "default",
        resource_version=relisted.metadata.resource_version,
        timeout_seconds=5,
    )

    async def later() -> None:
        await asyncio.sleep(0.1)
        await core.create_namespaced_config_map("default", cm("c"))

    task = asyncio.create_task(later())
    assert await collect(stream, 1) == [("ADDED", "c")]
    await task
    w.stop()


async def test_history_window_forces_410() -> None:
    async with LocalCluster(admission_plugins=[], history_window=3) as cluster:
        api = await cluster.api_client()
        async with api:
            core = client.CoreV1Api(api)
            start = (await core.list_namespaced_config_map("default")).metadata.resource_version
            for i in range(5):
                await core.create_namespaced_config_map("default", cm(f"c{i}"))
            w = watch.Watch()
            with pytest.raises(ApiException) as caught:
                async for _ in w.stream(
                    core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=2
                ):
                    pass
            assert caught.value.status == 410


async def test_client_disconnect_closes_the_watcher(cluster: LocalCluster) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        resp = await http.get(
            f"{cluster.url}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=1"
        )
        for _ in range(100):
            if cluster.store.watcher_count("", "configmaps"):
                break
            await asyncio.sleep(0.01)
        assert cluster.store.watcher_count("", "configmaps") == 1
        resp.close()
    for _ in range(200):
        if not cluster.store.watcher_count("", "configmaps"):
            break
        await asyncio.sleep(0.01)
    assert cluster.store.watcher_count("", "configmaps") == 0


async def test_watch_one_object_by_its_path(cluster: LocalCluster, core: client.CoreV1Api) -> None:
    import json

    import aiohttp

    await core.create_namespaced_config_map("default", cm("a"))
    await core.create_namespaced_config_map("default", cm("b"))
    url = f"{cluster.url}/api/v1/namespaces/default/configmaps/a?watch=true&timeoutSeconds=1"
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        events = [json.loads(line) async for line in resp.content]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "a")]


async def test_version_from_the_future_must_relist(core: client.CoreV1Api, cluster: LocalCluster) -> None:
    future = str(cluster.store.resource_version + 1000)
    w = watch.Watch()
    with pytest.raises(ApiException) as caught:
        async for _ in w.stream(
            core.list_namespaced_config_map, "default", resource_version=future, timeout_seconds=1
        ):
            pass
    assert caught.value.status == 504
    await w.close()


async def test_stopping_the_cluster_ends_open_watches() -> None:
    import aiohttp

    cluster = LocalCluster(admission_plugins=[])
    await cluster.start()
    async with aiohttp.ClientSession() as http:
        resp = await http.get(f"{cluster.url}/api/v1/namespaces?watch=1")
        first = await resp.content.readline()
        assert first  # the initial ADDED events have arrived: the watch is open
        await asyncio.wait_for(cluster.stop(), 5)
        rest = await asyncio.wait_for(resp.content.read(), 5)  # the stream ends cleanly
        assert rest.count(b"\n") == 3  # the other three namespaces, then end of stream


async def test_a_bookmark_never_passes_an_event_not_yet_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    """An event committed as the wait for the next one times out stays queued (asyncio's wait_for
    gives up on the get, not on the item). The bookmark written then must not carry a version
    past it: a watch that ends right after would make the client resume beyond an event it
    never got (a Workload's last change lost for good, seen in Kueue's large-scale test)."""
    from kadmit.localcluster import watch as watch_module

    async with LocalCluster(admission_plugins=[], bookmark_interval=30) as cluster:
        api = await cluster.api_client()
        async with api:
            core = client.CoreV1Api(api)
            listed = await core.list_namespaced_config_map("default")
            real_wait_for = asyncio.wait_for
            raced = False

            async def racing_wait_for(awaitable: Any, timeout: float | None) -> Any:  # noqa: ASYNC109
                nonlocal raced
                if raced:
                    return await real_wait_for(awaitable, timeout)
                raced = True
                awaitable.close()  # the get never ran: the event below stays in the queue
                assert timeout is not None
                await asyncio.sleep(timeout)  # until the watch's deadline
                cluster.store.create("", "configmaps", {"metadata": {"name": "late", "namespace": "default"}})
                raise TimeoutError

            monkeypatch.setattr(watch_module.asyncio, "wait_for", racing_wait_for)
            w = watch.Watch()
            last_seen = listed.metadata.resource_version
            seen: list[str] = []
            async for event in w.stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=last_seen,
                allow_watch_bookmarks=True,
                timeout_seconds=1,
            ):
                last_seen = event["raw_object"]["metadata"]["resourceVersion"]
                if event["type"] != "BOOKMARK":
                    seen.append(event["raw_object"]["metadata"]["name"])
            monkeypatch.setattr(watch_module.asyncio, "wait_for", real_wait_for)
            if "late" not in seen:  # as an informer does: resume from the last version seen
                resumed = w.stream(
                    core.list_namespaced_config_map, "default", resource_version=last_seen, timeout_seconds=1
                )
                seen += [e["raw_object"]["metadata"]["name"] async for e in resumed]
            assert seen == ["late"]
