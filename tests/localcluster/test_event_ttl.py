"""Events expire after the TTL since their last write, as on kube-apiserver (``--event-ttl``)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from kadmit.kube import Client, NotFound
from kadmit.kube.resources import EVENTS
from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.eventttl import EventExpiry
from kadmit.localcluster.store import Store


def _event(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Tested", "message": "m", "type": "Normal"}


def test_an_event_goes_ttl_seconds_after_its_last_write_and_watchers_see_it_deleted() -> None:
    now = [0.0]
    store = Store()
    expiry = EventExpiry(store, ttl=60.0, clock=lambda: now[0])
    store.create("", "events", _event("old"))
    now[0] = 30.0
    store.create("", "events", _event("renewed"))
    store.create("", "configmaps", {"metadata": {"name": "kept", "namespace": "default"}})
    now[0] = 50.0
    renewed = store.get("", "events", "default", "renewed")
    assert renewed is not None
    store.replace("", "events", {**renewed, "count": 2})  # a write renews its lease
    watcher, _ = store.watch(("", "events"), store.resource_version)
    now[0] = 60.0
    assert expiry.expire() == 1
    assert store.get("", "events", "default", "old") is None
    assert watcher.queue.get_nowait().type == "DELETED"
    now[0] = 109.0
    assert expiry.expire() == 0
    now[0] = 110.0
    assert expiry.expire() == 1
    assert store.count("", "events") == 0
    assert store.get("", "configmaps", "default", "kept") is not None, "only Events expire"


async def test_the_local_cluster_expires_the_events_it_serves_on_its_own() -> None:
    async with LocalCluster(event_ttl=1.0) as cluster:
        client = await cluster.api_client()
        async with client:
            kube = Client(client)
            await kube.create(EVENTS, _event("short-lived"))
            await kube.get(EVENTS, "default", "short-lived")
            for _ in range(50):  # its TTL, then the next sweep (every second here)
                await asyncio.sleep(0.1)
                if await kube.get_or_none(EVENTS, "default", "short-lived") is None:
                    break
            with pytest.raises(NotFound):
                await kube.get(EVENTS, "default", "short-lived")


def test_a_ttl_that_is_not_positive_is_a_usage_error(tmp_path: object) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "kadmit.localcluster", "--kubeconfig", f"{tmp_path}/kc", "--event-ttl", "0"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 2
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line == "localcluster: error: --event-ttl must be positive, got 0"
