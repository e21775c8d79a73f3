"""Throughput of the embedded API server: creates/s, status patches/s and watch events/s,
through raw aiohttp and through kubernetes-asyncio.

    python bench/apiserver.py [--count 3000] [--concurrency 32] [--in-process]

By default the server runs in its own process (``python -m kadmit.localcluster --no-nodes``), as
it does beside kadmit, so client and server do not share one core. Prints one line per figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

# `python bench/X.py` puts bench/ first on sys.path, where bench/webhook.py would shadow the webhook
# package (bench/engine.py the engine one): drop bench/ and import kadmit from the repository root.
# ruff: noqa: E402 (so kadmit's imports come after this)
HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

import aiohttp
from kubernetes_asyncio import client, config

MERGE = "application/merge-patch+json"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.bench.example"},
    "spec": {
        "group": "bench.example",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
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


SERVER_PID: int | None = None


def server_cpu_seconds() -> float:
    """CPU time the server process has used so far (this process's when it runs in process)."""
    if SERVER_PID is None:
        return time.process_time()
    fields = Path(f"/proc/{SERVER_PID}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.asynccontextmanager
async def server(in_process: bool) -> AsyncIterator[tuple[str, str]]:
    """(url, kubeconfig path) of a running API server."""
    workdir = Path(tempfile.mkdtemp(prefix="kadmit-bench-"))
    kubeconfig = workdir / "kubeconfig"
    if in_process:
        from kadmit.localcluster.cluster import LocalCluster

        async with LocalCluster(kubeconfig=kubeconfig, admission_plugins=[]) as cluster:
            yield cluster.url, str(kubeconfig)
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
        url = line.split(" at ", 1)[1].split()[0]
        yield url, str(kubeconfig)
    finally:
        proc.send_signal(signal.SIGTERM)
        await proc.wait()


async def timed(label: str, count: int, concurrency: int, op: Callable[[int], Awaitable[Any]]) -> float:
    queue = iter(range(count))

    async def worker() -> None:
        for i in queue:
            await op(i)

    started, cpu = time.perf_counter(), server_cpu_seconds()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    rate = count / (time.perf_counter() - started)
    per_core = count / max(server_cpu_seconds() - cpu, 1e-9)
    print(
        f"{label:<47} {rate:>7.0f} /s wall, {per_core:>7.0f} /s per server CPU-second "
        f"({count} requests, {concurrency} concurrent)",
        flush=True,
    )
    return rate


async def watch_rate(
    label: str,
    url: str,
    count: int,
    concurrency: int,
    session: aiohttp.ClientSession,
    writer: Callable[[int], Awaitable[Any]],
    path: str,
) -> None:
    """Events/s seen by one watcher while ``count`` writes happen."""
    async with session.get(f"{url}{path}?watch=true&resourceVersion=0") as resp:
        seen = 0
        started = time.perf_counter()
        writes = asyncio.create_task(timed(f"  (writes during {label})", count, concurrency, writer))
        while seen < count:
            line = await resp.content.readline()
            if not line:
                break
            if json.loads(line)["type"] in ("ADDED", "MODIFIED"):
                seen += 1
        elapsed = time.perf_counter() - started
        await writes
    print(f"{label:<45} {seen / elapsed:>9.0f} /s  ({seen} events)", flush=True)


async def raw(url: str, count: int, concurrency: int) -> None:
    connector = aiohttp.TCPConnector(limit=concurrency * 2)
    async with aiohttp.ClientSession(connector=connector) as session:
        async with session.post(
            f"{url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=CRD
        ) as resp:
            assert resp.status == 201, await resp.text()
        base = f"{url}/apis/bench.example/v1/namespaces/default/widgets"

        async def create(i: int) -> None:
            body = {
                "apiVersion": "bench.example/v1",
                "kind": "Widget",
                "metadata": {"name": f"w{i}"},
                "spec": {"size": i},
            }
            async with session.post(base, json=body) as r:
                assert r.status == 201, await r.text()

        async def patch_status(i: int) -> None:
            async with session.patch(
                f"{base}/w{i}/status",
                data=json.dumps({"status": {"phase": f"p{i}"}}),
                headers={"Content-Type": MERGE},
            ) as r:
                assert r.status == 200, await r.text()

        async def create_cm(i: int) -> None:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"c{i}"},
                "data": {"i": str(i)},
            }
            async with session.post(f"{url}/api/v1/namespaces/default/configmaps", json=body) as r:
                assert r.status == 201, await r.text()

        await timed("raw aiohttp: creates (custom resource)", count, concurrency, create)
        await timed("raw aiohttp: status patches (custom resource)", count, concurrency, patch_status)
        await watch_rate(
            "raw aiohttp: watch events (ConfigMap creates)",
            url,
            count,
            concurrency,
            session,
            create_cm,
            "/api/v1/namespaces/default/configmaps",
        )


async def with_client(kubeconfig: str, count: int, concurrency: int) -> None:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    configuration.connection_pool_maxsize = concurrency * 2
    async with client.ApiClient(configuration) as api:
        custom = client.CustomObjectsApi(api)
        core = client.CoreV1Api(api)

        async def create(i: int) -> None:
            body = {
                "apiVersion": "bench.example/v1",
                "kind": "Widget",
                "metadata": {"name": f"k{i}"},
                "spec": {"size": i},
            }
            await custom.create_namespaced_custom_object("bench.example", "v1", "default", "widgets", body)

        async def patch_status(i: int) -> None:
            await custom.patch_namespaced_custom_object_status(
                "bench.example",
                "v1",
                "default",
                "widgets",
                f"k{i}",
                {"status": {"phase": "x"}},
                _content_type=MERGE,
            )

        async def create_cm(i: int) -> None:
            await core.create_namespaced_config_map(
                "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"k{i}"), data={"i": str(i)})
            )

        await timed("kubernetes-asyncio: creates (custom resource)", count, concurrency, create)
        await timed("kubernetes-asyncio: status patches", count, concurrency, patch_status)
        from kubernetes_asyncio import watch

        w = watch.Watch()
        seen = 0
        started = time.perf_counter()
        writes = asyncio.create_task(
            timed("  (writes during kubernetes-asyncio watch)", count, concurrency, create_cm)
        )
        async for event in w.stream(core.list_namespaced_config_map, "default", timeout_seconds=120):
            if event["type"] == "ADDED" and event["raw_object"]["metadata"]["name"].startswith("k"):
                seen += 1
                if seen == count:
                    break
        elapsed = time.perf_counter() - started
        w.stop()
        await w.close()
        await writes
        print(
            f"{'kubernetes-asyncio: watch events':<45} {seen / elapsed:>9.0f} /s  ({seen} events)", flush=True
        )


async def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=3000, help="requests per figure (default 3000)")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight (default 32)")
    parser.add_argument("--in-process", action="store_true", help="run the server in this process")
    args = parser.parse_args()
    if args.count < 1 or args.concurrency < 1:
        print("bench/apiserver.py: --count and --concurrency must be at least 1", file=sys.stderr)
        return 2
    async with server(args.in_process) as (url, kubeconfig):
        print(f"server {url} ({'in process' if args.in_process else 'own process'})", flush=True)
        await raw(url, args.count, args.concurrency)
        await with_client(kubeconfig, args.count, args.concurrency)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
