"""clientConnection's token bucket: client-go's accounting, and every request of a Client paced by it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from kadmit.controller.app import KadmitApp
from kadmit.controller.config import Configuration as KadmitConfiguration
from kadmit.kube import Client
from kadmit.kube.ratelimit import TokenBucket
from kadmit.kube.resources import CONFIG_MAPS


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_goes_at_once_then_each_request_waits_for_its_own_token_in_order() -> None:
    clock = Clock()
    bucket = TokenBucket(qps=2, burst=3, clock=clock)
    assert [bucket.reserve() for _ in range(5)] == [0.0, 0.0, 0.0, 0.5, 1.0]
    clock.now += 1.0  # the two reserved tokens came due; none is left over
    assert bucket.reserve() == 0.5
    clock.now += 60.0  # an idle minute refills the bucket to its burst, not beyond
    assert [bucket.reserve() for _ in range(4)] == [0.0, 0.0, 0.0, 0.5]


@pytest.mark.parametrize(("qps", "burst"), [(0, 1), (-1, 1), (1, 0)])
def test_a_bucket_that_could_never_refill_or_hold_a_token_is_refused(qps: float, burst: int) -> None:
    with pytest.raises(ValueError):
        TokenBucket(qps, burst)


async def test_every_request_of_a_client_waits_for_the_bucket(aiohttp_server: Any) -> None:
    loop = asyncio.get_running_loop()
    arrivals: list[float] = []

    async def get(request: web.Request) -> web.Response:
        arrivals.append(loop.time())
        return web.json_response({"kind": "ConfigMap", "metadata": {"name": request.match_info["name"]}})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{ns}/configmaps/{name}", get)
    server = await aiohttp_server(app)
    async with ApiClient(Configuration(host=str(server.make_url("")).rstrip("/"))) as api_client:
        client = Client(api_client, rate_limiter=TokenBucket(qps=20, burst=2))
        began = loop.time()
        got = await asyncio.gather(*(client.get(CONFIG_MAPS, "default", f"c{i}") for i in range(6)))
    assert [obj["metadata"]["name"] for obj in got] == [f"c{i}" for i in range(6)]
    # Two at once, then one every 50 ms: the sixth cannot have been sent before 200 ms.
    assert sorted(arrivals)[-1] - began >= 0.2 - 0.005


async def test_the_app_gives_its_client_the_configured_bucket_and_its_lease_none() -> None:
    for config, expected in [
        (KadmitConfiguration(client_qps=50.0, client_burst=100), (50.0, 100)),
        (KadmitConfiguration(), None),
    ]:
        async with ApiClient(Configuration(host="https://127.0.0.1:1")) as api_client:
            client = Client(api_client)
            app = KadmitApp(client, config)
            limiter = client.rate_limiter
            assert (None if limiter is None else (limiter.qps, limiter.burst)) == expected
            # The Lease's renewals never queue behind the work they guard.
            assert app.elector is not None
            assert app.elector.client.rate_limiter is None
            assert app.elector.client.api_client is api_client


async def test_unpaced_is_the_same_connection_without_the_bucket() -> None:
    async with ApiClient(Configuration(host="https://127.0.0.1:1")) as api_client:
        plain = Client(api_client)
        assert plain.unpaced() is plain
        paced = Client(api_client, timeout=7.0, rate_limiter=TokenBucket(1, 1))
        unpaced = paced.unpaced()
        assert (unpaced.rate_limiter, unpaced.api_client, unpaced.timeout) == (None, api_client, 7.0)
        assert paced.rate_limiter is not None
