"""The client's transport: what a request carries and no longer looks up, proxies, errors, watch lines."""

from __future__ import annotations

import asyncio
import gc
import json
import warnings
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import aiohttp.client
import aiohttp.helpers
import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from kadmit.kube import ApiUnreachable, Client, Conflict, Resource

THINGS = Resource("example.com", "v1", "things", "Thing")


class Recording:
    """An API server stand-in that records each request and answers with a fixed JSON object."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []  # method, URL, headers, body
        self.answer: tuple[int, Any] = (200, {"kind": "Thing", "metadata": {"name": "a"}})
        self.app = web.Application()
        self.app.router.add_route("*", "/{tail:.*}", self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append((request.method, str(request.url), dict(request.headers), await request.read()))
        status, body = self.answer
        return web.json_response(body, status=status)


@pytest.fixture
async def recording(aiohttp_server: Any) -> AsyncIterator[tuple[Recording, str]]:
    fake = Recording()
    server = await aiohttp_server(fake.app)
    yield fake, str(server.make_url("")).rstrip("/")


async def test_requests_carry_json_and_the_token_and_look_nothing_up(
    recording: tuple[Recording, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, url = recording
    lookups: list[str] = []

    def proxy_lookup(*args: Any) -> Any:
        lookups.append("proxy")
        raise LookupError

    def netrc_lookup(*args: Any) -> Any:
        lookups.append("netrc")
        return None

    monkeypatch.setattr(aiohttp.client, "get_env_proxy_for_url", proxy_lookup)
    monkeypatch.setattr(aiohttp.client, "netrc_from_env", netrc_lookup)
    monkeypatch.setattr(aiohttp.helpers, "netrc_from_env", netrc_lookup)
    config = Configuration(host=url, api_key={"BearerToken": "secret"},
                           api_key_prefix={"BearerToken": "Bearer"})
    async with ApiClient(config) as api_client:
        client = Client(api_client)
        got = await client.get(THINGS, "ns", "a")
        assert lookups in ([], ["netrc"])  # the first request decides on a proxy, once
        lookups.clear()
        thing = {"metadata": {"name": "a", "namespace": "ns"}, "status": {"x": 1}}
        await client.get(THINGS, "ns", "a")
        await client.replace_status(THINGS, thing)
        await client.list(THINGS, "ns", label_selector="app in (a,b)", limit=5)
    assert got == {"kind": "Thing", "metadata": {"name": "a"}}
    assert lookups == []
    (get, _, get_headers, _), _, (put, put_url, put_headers, put_body), (_, list_url, _, _) = fake.requests
    assert (get, put) == ("GET", "PUT")
    assert put_url == f"{url}/apis/example.com/v1/namespaces/ns/things/a/status"
    assert json.loads(put_body) == {"metadata": {"name": "a", "namespace": "ns"}, "status": {"x": 1}}
    assert put_headers["Content-Type"] == "application/json"
    assert "Content-Type" not in get_headers
    assert get_headers["Accept"] == put_headers["Accept"] == "application/json"
    assert get_headers["Authorization"] == put_headers["Authorization"] == "Bearer secret"
    assert "Cookie" not in get_headers
    query = "labelSelector=app+in+%28a%2Cb%29&limit=5"
    assert list_url == f"{url}/apis/example.com/v1/namespaces/ns/things?{query}"


async def test_the_token_is_refreshed_through_the_configurations_hook(
    recording: tuple[Recording, str],
) -> None:
    """In-cluster and exec/OIDC kubeconfigs renew their token in ``refresh_api_key_hook``."""
    fake, url = recording
    config = Configuration(host=url, api_key={"BearerToken": "Bearer t0"})
    renewals = 0

    def renew(configuration: Configuration) -> None:
        nonlocal renewals
        renewals += 1
        configuration.api_key["BearerToken"] = f"Bearer t{renewals}"

    config.refresh_api_key_hook = renew
    async with ApiClient(config) as api_client:
        client = Client(api_client)
        for _ in range(3):
            await client.get(THINGS, "ns", "a")
    sent = [headers["Authorization"] for _, _, headers, _ in fake.requests]
    assert sent == ["Bearer t1", "Bearer t2", "Bearer t3"]


async def test_a_proxy_from_the_environment_is_read_once(
    recording: tuple[Recording, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy, proxy_url = recording
    monkeypatch.setenv("HTTP_PROXY", proxy_url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with ApiClient(Configuration(host="http://kube.invalid:6443")) as api_client:
        client = Client(api_client)
        await client.get(THINGS, "ns", "a")
        monkeypatch.delenv("HTTP_PROXY")  # too late: the client has decided
        await client.get(THINGS, "ns", "a")
    assert [headers["Host"] for _, _, headers, _ in proxy.requests] == ["kube.invalid:6443"] * 2
    assert proxy.requests[0][1].endswith("/apis/example.com/v1/namespaces/ns/things/a")


async def test_no_proxy_and_the_kubeconfigs_proxy_url_are_honoured(
    recording: tuple[Recording, str], aiohttp_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    target, target_url = recording
    proxy = Recording()
    proxy_url = str((await aiohttp_server(proxy.app)).make_url("")).rstrip("/")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    async with ApiClient(Configuration(host=target_url)) as api_client:
        await Client(api_client).get(THINGS, "ns", "a")  # NO_PROXY: straight to the server
    assert len(target.requests) == 1
    config = Configuration(host="http://kube.invalid:6443")
    config.proxy = proxy_url  # a kubeconfig's proxy-url wins over the environment
    async with ApiClient(config) as api_client:
        await Client(api_client).get(THINGS, "ns", "a")
    assert [headers["Host"] for _, _, headers, _ in proxy.requests] == ["kube.invalid:6443"]


async def test_errors_and_silence_are_api_errors(recording: tuple[Recording, str]) -> None:
    fake, url = recording
    fake.answer = (409, {"kind": "Status", "reason": "Conflict", "message": "the object has been modified"})
    async with ApiClient(Configuration(host=url)) as api_client:
        client = Client(api_client, timeout=0.5)
        with pytest.raises(Conflict, match="the object has been modified"):
            await client.get(THINGS, "ns", "a")
        fake.answer = (200, [1, 2])
        with pytest.raises(Exception, match="expected a JSON object"):
            await client.get(THINGS, "ns", "a")
    async with ApiClient(Configuration(host="http://127.0.0.1:9")) as api_client:
        with pytest.raises(ApiUnreachable, match=r"GET /apis/example\.com"):
            await Client(api_client, timeout=2).get(THINGS, "ns", "a")


async def test_watch_events_split_across_chunks_arrive_whole(aiohttp_server: Any) -> None:
    events = [
        {"type": "ADDED", "object": {"metadata": {"name": f"t{i}"}, "data": "x" * 50 * i}} for i in range(6)
    ]
    wire = b"".join(json.dumps(e).encode() + b"\n" for e in events) + b"\n"

    async def watch(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for start in range(0, len(wire), 37):
            await response.write(wire[start : start + 37])
            await asyncio.sleep(0)
        return response

    app = web.Application()
    app.router.add_get("/{tail:.*}", watch)
    url = str((await aiohttp_server(app)).make_url("")).rstrip("/")
    async with ApiClient(Configuration(host=url)) as api_client:
        got = [e async for e in Client(api_client).watch(THINGS, "ns", resource_version="1")]
    assert got == events


async def test_a_client_dropped_before_its_api_client_closes_leaves_no_warning(
    recording: tuple[Recording, str],
) -> None:
    _, url = recording
    async with ApiClient(Configuration(host=url)) as api_client:
        await Client(api_client).get(THINGS, "ns", "a")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            gc.collect()
        assert not [w for w in caught if "Unclosed" in str(w.message)]
        await Client(api_client).get(THINGS, "ns", "a")  # the pool is still the ApiClient's, and open


async def test_a_connected_client_closes_its_api_client(
    recording: tuple[Recording, str], tmp_path: Any
) -> None:
    _, url = recording
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": url}}],
        "users": [{"name": "u", "user": {"token": "abc"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    async with await Client.connect(kubeconfig) as client:
        assert (await client.get(THINGS, "ns", "a"))["kind"] == "Thing"
    assert client.api_client.rest_client.pool_manager.closed
    with pytest.raises((ApiUnreachable, RuntimeError)):
        await client.get(THINGS, "ns", "a")


async def test_the_session_is_not_the_api_clients(recording: tuple[Recording, str]) -> None:
    """Guard on the reason this client has its own session: kubernetes-asyncio's trusts the environment."""
    async with ApiClient(Configuration(host=recording[1])) as api_client:
        client = Client(api_client)
        await client.get(THINGS, "ns", "a")
        assert client._transport is not None
        session = client._transport.session
        assert api_client.rest_client.pool_manager.trust_env
        assert not session.trust_env
        assert session.connector is api_client.rest_client.pool_manager.connector
        assert isinstance(session.cookie_jar, aiohttp.DummyCookieJar)


def test_a_client_is_set_up_at_its_first_request() -> None:
    """Tests and wiring may hold a client that never talks (``Client(None)`` in tests/checks)."""
    Client(None)  # type: ignore[arg-type]
