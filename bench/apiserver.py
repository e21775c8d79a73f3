"""The embedded API server and its clients: creates, GETs, status PUTs and merge patches of a custom
resource, and watch events, through raw aiohttp, through kubernetes-asyncio, and through kadmit's
own client (``kadmit.kube.Client``).

    python bench/apiserver.py [--count 3000] [--concurrency 32] [--in-process]

By default the server runs in its own process (``python -m kadmit.localcluster --no-nodes``), as
it does beside kadmit, so client and server do not share one core. Prints one line per figure.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import signal
import ssl
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

# `python bench/X.py` puts bench/ first on sys.path, where bench/webhook.py would shadow the webhook
# package (bench/engine.py the engine one): drop bench/ and import kadmit from the repository root.
# ruff: noqa: E402 (so kadmit's imports come after this)
HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

import aiohttp
import yaml
from kubernetes_asyncio import client, config, watch

from kadmit.kube import Client
from kadmit.kube.resources import Resource

MERGE = "application/merge-patch+json"
NS = "default"
GROUP, VERSION, PLURAL = "bench.example", "v1", "widgets"
WIDGETS = Resource(GROUP, VERSION, PLURAL, "Widget")
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": VERSION,
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                            "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
                        },
                    }
                },
            }
        ],
    },
}


def widget(name: str, i: int) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": i}}


def config_map(name: str, i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"i": str(i)}}


SERVER_PID: int | None = None


def server_cpu_seconds() -> float:
    """CPU time the server process has used so far (this process's when it runs in process)."""
    if SERVER_PID is None:
        return time.process_time()
    fields = Path(f"/proc/{SERVER_PID}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.asynccontextmanager
async def server(in_process: bool) -> AsyncIterator[str]:
    """The kubeconfig path of a running API server."""
    workdir = Path(tempfile.mkdtemp(prefix="kadmit-bench-"))
    kubeconfig = workdir / "kubeconfig"
    if in_process:
        from kadmit.localcluster.cluster import LocalCluster

        async with LocalCluster(kubeconfig=kubeconfig, admission_plugins=[], token=True):
            yield str(kubeconfig)
        return
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kadmit.localcluster",
        "--no-nodes",
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
    )
    global SERVER_PID
    SERVER_PID = proc.pid
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        if "ready" not in line:
            raise RuntimeError(f"kadmit local --api-only did not start: {line!r}")
        yield str(kubeconfig)
    finally:
        proc.send_signal(signal.SIGTERM)
        await proc.wait()


def raw_access(kubeconfig: str) -> tuple[str, ssl.SSLContext, dict[str, str]]:
    """URL, TLS context (the kubeconfig's CA) and Authorization header (its token), read by hand."""
    document = yaml.safe_load(Path(kubeconfig).read_text())
    cluster = document["clusters"][0]["cluster"]
    ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
    context = ssl.create_default_context(cadata=ca)
    token = document["users"][0]["user"].get("token")
    return cluster["server"], context, {"Authorization": f"Bearer {token}"} if token else {}


class Driver(Protocol):
    """One way to talk to the API server; ``i`` numbers the object (created before it is read)."""

    label: str
    config_map_prefix: str

    async def create(self, i: int) -> None: ...
    async def get(self, i: int) -> None: ...
    async def put_status(self, i: int) -> None: ...
    async def patch_status(self, i: int) -> None: ...
    async def create_config_map(self, i: int) -> None: ...
    def watch_config_maps(self) -> AsyncIterator[tuple[str, str]]:
        """(event type, object name) of the ConfigMap events from now on."""
        ...


async def timed(label: str, count: int, concurrency: int, op: Callable[[int], Awaitable[Any]]) -> None:
    queue = iter(range(count))

    async def worker() -> None:
        for i in queue:
            await op(i)

    started, server_cpu, client_cpu = time.perf_counter(), server_cpu_seconds(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    rate = count / (time.perf_counter() - started)
    per_core = count / max(server_cpu_seconds() - server_cpu, 1e-9)
    client_us = (time.process_time() - client_cpu) / count * 1e6
    in_process = " (client + server)" if SERVER_PID is None else ""
    print(
        f"{label:<52} {rate:>6.0f} /s wall, {per_core:>6.0f} /s per server CPU-second, "
        f"client {client_us:>4.0f} µs CPU/request{in_process}",
        flush=True,
    )


async def measure(driver: Driver, count: int, concurrency: int) -> None:
    name = driver.label
    await timed(f"{name}: creates", count, concurrency, driver.create)
    await timed(f"{name}: GETs", count, concurrency, driver.get)
    await timed(f"{name}: status PUTs", count, concurrency, driver.put_status)
    await timed(f"{name}: status merge patches", count, concurrency, driver.patch_status)
    seen = 0
    prefix = driver.config_map_prefix
    events = driver.watch_config_maps()
    first = asyncio.create_task(anext(events))  # the watch is open before the writes start
    await asyncio.sleep(0.2)
    started = time.perf_counter()
    writes = asyncio.create_task(timed(f"  (writes during the {name} watch)", count, concurrency,
                                       driver.create_config_map))
    event_type, object_name = await first
    while True:
        if event_type == "ADDED" and object_name.startswith(prefix):
            seen += 1
            if seen == count:
                break
        event_type, object_name = await anext(events)
    elapsed = time.perf_counter() - started
    await writes
    await events.aclose()  # type: ignore[attr-defined]
    print(f"{name + ': watch events':<52} {seen / elapsed:>6.0f} /s wall ({seen} events)", flush=True)


class RawAiohttp:
    """aiohttp with the kubeconfig's CA and token and nothing else: the floor."""

    label = "raw aiohttp"
    config_map_prefix = "r-cm-"

    def __init__(self, session: aiohttp.ClientSession, url: str, headers: dict[str, str]) -> None:
        self.session, self.url, self.headers = session, url, headers
        self.base = f"{url}/apis/{GROUP}/{VERSION}/namespaces/default/{PLURAL}"
        self.read: dict[int, Any] = {}

    async def _call(self, method: str, url: str, body: Any = None,
                    content_type: str = "application/json") -> Any:
        headers = {**self.headers, "Content-Type": content_type}
        data = None if body is None else json.dumps(body)
        async with self.session.request(method, url, data=data, headers=headers) as response:
            text = await response.read()
            assert 200 <= response.status < 300, text
            return json.loads(text)

    async def create(self, i: int) -> None:
        await self._call("POST", self.base, widget(f"r{i}", i))

    async def get(self, i: int) -> None:
        self.read[i] = await self._call("GET", f"{self.base}/r{i}")

    async def put_status(self, i: int) -> None:
        obj = self.read.pop(i)
        obj["status"] = {"phase": f"put{i}"}
        await self._call("PUT", f"{self.base}/r{i}/status", obj)

    async def patch_status(self, i: int) -> None:
        await self._call("PATCH", f"{self.base}/r{i}/status", {"status": {"phase": f"p{i}"}}, MERGE)

    async def create_config_map(self, i: int) -> None:
        body = config_map(f"{self.config_map_prefix}{i}", i)
        await self._call("POST", f"{self.url}/api/v1/namespaces/default/configmaps", body)

    async def watch_config_maps(self) -> AsyncIterator[tuple[str, str]]:
        url = f"{self.url}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0"
        async with self.session.get(url, headers=self.headers) as response:
            while line := await response.content.readline():
                event = json.loads(line)
                yield event["type"], event["object"]["metadata"]["name"]


class KubernetesAsyncio:
    """kubernetes-asyncio's generated API (CustomObjectsApi, CoreV1Api): its ApiClient.call_api path."""

    label = "kubernetes-asyncio"
    config_map_prefix = "t-cm-"

    def __init__(self, api: client.ApiClient) -> None:
        self.custom, self.core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        self.read: dict[int, Any] = {}

    async def create(self, i: int) -> None:
        await self.custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, widget(f"t{i}", i))

    async def get(self, i: int) -> None:
        self.read[i] = await self.custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, f"t{i}")

    async def put_status(self, i: int) -> None:
        obj = self.read.pop(i)
        obj["status"] = {"phase": f"put{i}"}
        await self.custom.replace_namespaced_custom_object_status(GROUP, VERSION, NS, PLURAL, f"t{i}", obj)

    async def patch_status(self, i: int) -> None:
        await self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, NS, PLURAL, f"t{i}", {"status": {"phase": f"p{i}"}}, _content_type=MERGE
        )

    async def create_config_map(self, i: int) -> None:
        metadata = client.V1ObjectMeta(name=f"{self.config_map_prefix}{i}")
        body = client.V1ConfigMap(metadata=metadata, data={"i": str(i)})
        await self.core.create_namespaced_config_map(NS, body)

    async def watch_config_maps(self) -> AsyncIterator[tuple[str, str]]:
        stream = watch.Watch()
        try:
            async for event in stream.stream(self.core.list_namespaced_config_map, NS, timeout_seconds=300):
                yield event["type"], event["raw_object"]["metadata"]["name"]
        finally:
            stream.stop()
            await stream.close()


class Kadmit:
    """kadmit's own client, as the controller and the check runner use it."""

    label = "kadmit Client"
    config_map_prefix = "c-cm-"

    def __init__(self, kube: Client) -> None:
        self.kube = kube
        self.read: dict[int, Any] = {}

    async def create(self, i: int) -> None:
        obj = widget(f"c{i}", i)
        obj["metadata"]["namespace"] = "default"
        await self.kube.create(WIDGETS, obj)

    async def get(self, i: int) -> None:
        self.read[i] = await self.kube.get(WIDGETS, "default", f"c{i}")

    async def put_status(self, i: int) -> None:
        obj = self.read.pop(i)
        obj["status"] = {"phase": f"put{i}"}
        await self.kube.replace_status(WIDGETS, obj)

    async def patch_status(self, i: int) -> None:
        await self.kube.patch(WIDGETS, NS, f"c{i}", {"status": {"phase": f"p{i}"}}, subresource="status")

    async def create_config_map(self, i: int) -> None:
        obj = config_map(f"{self.config_map_prefix}{i}", i)
        obj["metadata"]["namespace"] = "default"
        await self.kube.create(CONFIG_MAPS, obj)

    async def watch_config_maps(self) -> AsyncIterator[tuple[str, str]]:
        async for event in self.kube.watch(CONFIG_MAPS, "default", resource_version="0"):
            yield event["type"], event["object"]["metadata"]["name"]


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=3000, help="requests per figure (default 3000)")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight (default 32)")
    parser.add_argument("--in-process", action="store_true", help="run the server in this process")
    args = parser.parse_args()
    if args.count < 1 or args.concurrency < 1:
        print("bench/apiserver.py: --count and --concurrency must be at least 1", file=sys.stderr)
        return 2
    count, concurrency = args.count, args.concurrency
    async with server(args.in_process) as kubeconfig:
        url, context, headers = raw_access(kubeconfig)
        print(f"server {url} ({'in process' if args.in_process else 'own process'})", flush=True)
        connector = aiohttp.TCPConnector(limit=concurrency * 2, ssl=context)
        async with aiohttp.ClientSession(connector=connector) as session:
            raw = RawAiohttp(session, url, headers)
            await raw._call("POST", f"{url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
            await asyncio.sleep(0.5)  # the new resource is served
            await measure(raw, count, concurrency)
        configuration = client.Configuration()
        await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        configuration.connection_pool_maxsize = concurrency * 2
        async with client.ApiClient(configuration) as api:
            await measure(KubernetesAsyncio(api), count, concurrency)
        async with await Client.connect(kubeconfig) as kube:
            await measure(Kadmit(kube), count, concurrency)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
