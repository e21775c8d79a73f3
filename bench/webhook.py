"""The webhook against a trivial aiohttp handler, and what building the JSON patch costs.

    python bench/webhook.py [--duration 4] [--connections 16] [--rounds 7] [--client auto|wrk|asyncio]

Three HTTPS servers run, each in its own process, with the same certificate, the same TLS context
(:class:`kadmit.webhook.tls.ServingTLS`) and the same :class:`kadmit.webhook.server.WebhookServer`:

* **kadmit**: kadmit's webhook application as the manager builds it (every path, the metrics),
  answering ``/mutate-batch-v1-job`` for Kueue's sample Job from an in-memory view of the cluster;
* **trivial**: the least a correct webhook does, in one aiohttp handler: ``await request.json()``
  and ``web.json_response`` of a fixed AdmissionReview (kadmit's answer) carrying the request's uid
  (the API server refuses an answer with another uid);
* **floor**: reads the body and answers fixed bytes without decoding anything: what TLS, HTTP and
  aiohttp cost alone.

All three run on the event loop kadmit's commands run on (uvloop where installed;
``KADMIT_EVENT_LOOP=asyncio`` for the standard library's).

The same client drives both with keep-alive connections, as the API server does: ``wrk`` when it
is installed (``apt-get install wrk``), else an asyncio load generator in its own process. The
rounds alternate between the servers so that a busy neighbour hurts all alike; kadmit's share of
each other server's throughput is taken within each round and the median over the rounds is
given. Prints requests/s, latency p50 / p99 and the server's CPU per request for each round, then
the medians and kadmit's share of the trivial handler's throughput (the target: at least 90 %)
and of the floor's.
Then times the JSON patch for the same mutation built by :func:`kadmit.webhook.patch.diff` and by
``jsonpatch.make_patch``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import re
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# `python bench/X.py` puts bench/ first on sys.path, where bench/webhook.py would shadow the webhook
# package (bench/engine.py the engine one): drop bench/ and import kadmit from the repository root.
# ruff: noqa: E402 (so kadmit's imports come after this)
HERE = Path(__file__).resolve().parent
sys.path[:] = [str(HERE.parent), *(p for p in sys.path if Path(p or ".").resolve() != HERE)]

import aiohttp
import jsonpatch
from aiohttp import web

from kadmit.controller.cli import run_async
from kadmit.webhook.patch import diff

SERVICE, NAMESPACE = "kadmit-webhook-service", "kadmit-system"
PATH = "/mutate-batch-v1-job"
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
REVIEW: dict[str, Any] = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "requestKind": {"group": "batch", "version": "v1", "kind": "Job"},
        "requestResource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "operation": "CREATE",
        "namespace": "default",
        "name": "sample-job-x",
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": JOB,
        "oldObject": None,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
    },
}
BODY = json.dumps(REVIEW).encode()


# -- the servers (each runs in a process of its own: `bench/webhook.py --serve NAME --certs DIR`)


def kadmit_app() -> web.Application:
    from kadmit.webhook.app import create_webhook_app
    from kadmit.webhook.metrics import WebhookMetrics
    from tests.webhook.memview import MemoryView

    view = MemoryView(local_queues={("default", "user-queue"): "cluster-queue"})
    return create_webhook_app(view, metrics=WebhookMetrics())


def kadmit_answer() -> dict[str, Any]:
    from kadmit.webhook.review import Verdict, admission_response

    wanted = copy.deepcopy(JOB)
    wanted["spec"]["suspend"] = True
    return admission_response(REVIEW["request"]["uid"], Verdict(allowed=True, patch=diff(JOB, wanted)))


def trivial_app() -> web.Application:
    answer = kadmit_answer()

    async def handle(request: web.Request) -> web.Response:
        review = await request.json()
        response = {**answer["response"], "uid": review["request"]["uid"]}
        return web.json_response({**answer, "response": response})

    app = web.Application()
    app.router.add_post(PATH, handle)
    return app


def floor_app() -> web.Application:
    answer = json.dumps(kadmit_answer()).encode()

    async def handle(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=answer, content_type="application/json")

    app = web.Application()
    app.router.add_post(PATH, handle)
    return app


async def serve(name: str, certs: Path) -> None:
    from kadmit.webhook.server import WebhookServer
    from kadmit.webhook.tls import ServingTLS

    tls = ServingTLS()
    tls.load((certs / "tls.crt").read_bytes(), (certs / "tls.key").read_bytes())
    app = {"kadmit": kadmit_app, "trivial": trivial_app, "floor": floor_app}[name]()
    async with WebhookServer(app, tls.context, host="127.0.0.1", port=0) as server:
        print(f"port {server.port}", flush=True)
        await asyncio.Event().wait()


# -- the load generators


@dataclass
class Load:
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    server_cpu: float = 0.0

    @property
    def rate(self) -> float:
        return self.requests / self.seconds

    @property
    def cpu_us(self) -> float:
        return self.server_cpu / max(self.requests, 1) * 1e6

    def __str__(self) -> str:
        return (f"{self.rate:8.0f} requests/s   p50 {self.p50_ms:6.2f} ms   p99 {self.p99_ms:6.2f} ms   "
                f"server {self.cpu_us:4.0f} µs CPU/request")


WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = io.open(os.getenv("KADMIT_BENCH_BODY"), "rb"):read()
"""
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def _wrk_ms(text: str, percent: str) -> float:
    match = re.search(rf"^\s*{percent}%\s+([\d.]+)(us|ms|s)\s*$", text, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"wrk printed no {percent}% latency:\n{text}")
    return float(match[1]) * _UNITS[match[2]]


def wrk(url: str, connections: int, seconds: float, workdir: Path) -> Load:
    script, body = workdir / "review.lua", workdir / "review.json"
    script.write_text(WRK_SCRIPT)
    body.write_bytes(BODY)
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--latency", "-s", str(script), url],
        check=True, capture_output=True, text=True, env={**os.environ, "KADMIT_BENCH_BODY": str(body)},
    ).stdout
    total = re.search(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s)", out, re.MULTILINE)
    if total is None or "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk failed against {url}:\n{out}")
    seconds_taken = float(total[2]) * _UNITS[total[3]] / 1e3
    return Load(int(total[1]), seconds_taken, _wrk_ms(out, "50"), _wrk_ms(out, "99"))


async def asyncio_load(url: str, connections: int, seconds: float, ca_file: str) -> Load:
    """The fallback client: keep-alive connections, each sending one review after the other."""
    context = ssl.create_default_context(cafile=ca_file)
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def connection(session: aiohttp.ClientSession) -> None:
        while (started := time.perf_counter()) < deadline:
            async with session.post(url, data=BODY, headers={"Content-Type": "application/json"},
                                    server_hostname=f"{SERVICE}.{NAMESPACE}.svc") as response:
                await response.read()
                assert response.status == 200
            latencies.append(time.perf_counter() - started)

    connector = aiohttp.TCPConnector(ssl=context, limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        await asyncio.gather(*(connection(session) for _ in range(connections)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return Load(len(latencies), elapsed, latencies[len(latencies) // 2] * 1e3,
                latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))] * 1e3)


def run_load(client: str, url: str, connections: int, seconds: float, workdir: Path) -> Load:
    if client == "wrk":
        return wrk(url, connections, seconds, workdir)
    out = subprocess.run(
        [sys.executable, __file__, "--load", url, "--connections", str(connections),
         "--duration", str(seconds), "--certs", str(workdir)],
        check=True, capture_output=True, text=True,
    ).stdout
    return Load(**json.loads(out))


# -- the comparison


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def compare(duration: float, connections: int, rounds: int, client: str) -> None:
    from kadmit.certs.authority import issue_ca, issue_serving

    ca = issue_ca()
    serving = issue_serving(ca, SERVICE, NAMESPACE)
    with tempfile.TemporaryDirectory(prefix="kadmit-bench-webhook-") as directory:
        workdir = Path(directory)
        (workdir / "tls.crt").write_bytes(serving.cert_pem)
        (workdir / "tls.key").write_bytes(serving.key_pem)
        (workdir / "ca.crt").write_bytes(ca.cert_pem)
        servers: dict[str, tuple[subprocess.Popen[str], str]] = {}
        try:
            for name in ("floor", "trivial", "kadmit"):
                proc = subprocess.Popen([sys.executable, __file__, "--serve", name, "--certs", directory],
                                        stdout=subprocess.PIPE, text=True)
                assert proc.stdout is not None
                port = proc.stdout.readline().split()[1]
                servers[name] = proc, f"https://127.0.0.1:{port}{PATH}"
            print(f"{PATH}, Kueue's sample Job, {connections} keep-alive connections over TLS, "
                  f"client {client}, {duration:g} s per round, each server in its own process")
            loads: dict[str, list[Load]] = {name: [] for name in servers}
            for round_number in range(1, rounds + 1):
                for name, (proc, url) in servers.items():
                    if round_number == 1:
                        run_load(client, url, connections, min(2.0, duration), workdir)  # warm up
                    before = cpu_seconds(proc.pid)
                    load = run_load(client, url, connections, duration, workdir)
                    load.server_cpu = cpu_seconds(proc.pid) - before
                    print(f"  round {round_number}  {name:<8} {load}", flush=True)
                    loads[name].append(load)
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait()
    # Neighbours come and go within seconds: compare servers within each round, take the median
    # over rounds, and take each server's least disturbed CPU per request.
    print(f"median of {rounds} rounds (CPU: the least of them):")
    for name, runs in loads.items():
        print(f"  {name:<8} {statistics.median(r.rate for r in runs):8.0f} requests/s   "
              f"p50 {statistics.median(r.p50_ms for r in runs):6.2f} ms   "
              f"p99 {statistics.median(r.p99_ms for r in runs):6.2f} ms   "
              f"server {min(r.cpu_us for r in runs):4.0f} µs CPU/request")
    kadmit = loads["kadmit"]
    for name in ("trivial", "floor"):
        other = loads[name]
        share = statistics.median(k.rate / o.rate for k, o in zip(kadmit, other, strict=True))
        cpu = min(r.cpu_us for r in kadmit) / min(r.cpu_us for r in other)
        print(f"kadmit at {share:.0%} of the {name} handler's throughput (median of the rounds), "
              f"{cpu:.2f}x its CPU per request")


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
    parser.add_argument("--duration", type=float, default=4.0,
                        help="seconds per server per round (default 4)")
    parser.add_argument("--connections", type=int, default=16, help="keep-alive connections (default 16)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds per server, alternating (default 7)")
    parser.add_argument("--client", choices=("auto", "wrk", "asyncio"), default="auto",
                        help="the load generator (default: wrk when installed)")
    parser.add_argument("--serve", choices=("kadmit", "trivial", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--load", help=argparse.SUPPRESS)
    parser.add_argument("--certs", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        # Every server on the event loop kadmit's commands run on (uvloop where installed;
        # KADMIT_EVENT_LOOP=asyncio for the standard one), so the comparison is like for like.
        run_async(serve(args.serve, args.certs))
        return
    if args.load:
        ca_file = str(args.certs / "ca.crt")
        load = asyncio.run(asyncio_load(args.load, args.connections, args.duration, ca_file))
        print(json.dumps(load.__dict__))
        return
    if args.duration <= 0 or args.connections < 1 or args.rounds < 1:
        parser.error("--duration, --connections and --rounds must be positive")
    client = args.client if args.client != "auto" else ("wrk" if shutil.which("wrk") else "asyncio")
    compare(args.duration, args.connections, args.rounds, client)
    patch_cost()


if __name__ == "__main__":
    main()
