"""Webhook throughput and latency, and what building the JSON patch costs.

    python bench/webhook.py [--requests 2000] [--concurrency 8]

Sends Job CREATE AdmissionReviews (Kueue's sample Job) to ``/mutate-batch-v1-job`` over HTTPS on
loopback, with keep-alive connections as the API server uses, and prints requests/s and latency
percentiles. Then times the patch for the same mutation built by :func:`kadmit.webhook.patch.diff` and
by ``jsonpatch.make_patch``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import ssl
import statistics
import sys
import time
import timeit
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch

# `python bench/X.py` puts bench/ first on sys.path, where bench/webhook.py would shadow the webhook
# package (bench/engine.py the engine one): drop bench/ and import kadmit from the repository root.
# ruff: noqa: E402 (so kadmit's imports come after this)
HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

from kadmit.certs.authority import issue_ca, issue_serving
from kadmit.webhook.app import create_webhook_app
from kadmit.webhook.patch import diff
from kadmit.webhook.server import WebhookServer
from kadmit.webhook.tls import ServingTLS
from tests.webhook.memview import MemoryView

SERVICE, NAMESPACE = "kadmit-webhook-service", "kadmit-system"
JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "name": "sample-job-x",
        "namespace": "default",
        "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
    },
    "spec": {
        "parallelism": 3,
        "completions": 3,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "dummy-job",
                        "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                        "command": ["/bin/sh"],
                        "args": ["-c", "sleep 60"],
                        "resources": {"requests": {"cpu": "1", "memory": "200Mi"}},
                    }
                ],
                "restartPolicy": "Never",
            }
        },
    },
}


def review() -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "operation": "CREATE",
            "namespace": "default",
            "name": "sample-job-x",
            "userInfo": {"username": "alice"},
            "object": JOB,
        },
    }


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def serve_and_measure(requests: int, concurrency: int) -> None:
    ca = issue_ca()
    serving = issue_serving(ca, SERVICE, NAMESPACE)
    tls = ServingTLS()
    tls.load(serving.cert_pem, serving.key_pem)
    view = MemoryView(local_queues={("default", "user-queue"): "cluster-queue"})
    server = WebhookServer(create_webhook_app(view), tls.context, host="127.0.0.1", port=0)
    await server.start()
    url = f"https://127.0.0.1:{server.port}/mutate-batch-v1-job"
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    latencies: list[float] = []
    remaining = requests

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            body = review()
            started = time.perf_counter()
            async with session.post(url, json=body, server_hostname=f"{SERVICE}.{NAMESPACE}.svc") as resp:
                answer = await resp.json()
            latencies.append(time.perf_counter() - started)
            assert answer["response"]["allowed"] and answer["response"]["uid"] == body["request"]["uid"]

    try:
        connector = aiohttp.TCPConnector(ssl=context, limit=concurrency)
        async with aiohttp.ClientSession(connector=connector) as session:
            remaining = min(50, requests)  # warm up: handshakes, imports, caches
            await asyncio.gather(*(worker(session) for _ in range(concurrency)))
            latencies.clear()
            remaining = requests
            started = time.perf_counter()
            await asyncio.gather(*(worker(session) for _ in range(concurrency)))
            elapsed = time.perf_counter() - started
    finally:
        await server.stop()
    print(
        f"Job CREATE reviews over HTTPS (loopback, {concurrency} keep-alive connections, "
        "client in the same process)"
    )
    print(f"  requests     {len(latencies)}")
    print(f"  throughput   {len(latencies) / elapsed:8.0f} requests/s")
    print(f"  latency p50  {percentile(latencies, 50) * 1000:8.2f} ms")
    print(f"  latency p99  {percentile(latencies, 99) * 1000:8.2f} ms")
    print(f"  latency mean {statistics.fmean(latencies) * 1000:8.2f} ms")


def patch_cost() -> None:
    mutated = copy.deepcopy(JOB)
    mutated["spec"]["suspend"] = True
    mutated["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "default"
    assert jsonpatch.apply_patch(JOB, diff(JOB, mutated)) == mutated
    assert jsonpatch.apply_patch(JOB, jsonpatch.make_patch(JOB, mutated)) == mutated
    rounds = 5000
    ours = min(timeit.repeat(lambda: diff(JOB, mutated), number=rounds, repeat=3)) / rounds
    theirs = min(timeit.repeat(lambda: jsonpatch.make_patch(JOB, mutated), number=rounds, repeat=3)) / rounds
    print("JSON patch for the Job mutation (suspend + a label)")
    print(f"  webhook.patch.diff     {ours * 1e6:8.1f} µs")
    print(f"  jsonpatch.make_patch   {theirs * 1e6:8.1f} µs   ({theirs / ours:.1f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    if args.requests < 1 or args.concurrency < 1:
        parser.error("--requests and --concurrency must be at least 1")
    asyncio.run(serve_and_measure(args.requests, args.concurrency))
    patch_cost()


if __name__ == "__main__":
    main()
