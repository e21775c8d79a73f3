"""The fault knobs a plan file or ``--faults`` reaches: narrowed by verb and resource, hung requests,
writes committed whose answer is lost, watches answered 410 or cut; plans read and refused."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kadmit.controller.cli import main
from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.faults import FaultInjector, FaultPlanError, load_plan, parse_plan

Obj = dict[str, Any]
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def configmap(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


@pytest.fixture
def faults() -> FaultInjector:
    return FaultInjector(seed=3)


@pytest.fixture
async def served(faults: FaultInjector) -> AsyncIterator[tuple[LocalCluster, aiohttp.ClientSession]]:
    async with LocalCluster(middlewares=[faults.middleware]) as cluster, aiohttp.ClientSession(
        cluster.url, timeout=aiohttp.ClientTimeout(total=5)
    ) as session:
        yield cluster, session


async def status_of(session: aiohttp.ClientSession, method: str, path: str, body: Obj | None = None) -> int:
    async with session.request(method, path, json=body) as response:
        await response.read()
        return response.status


async def test_errors_narrowed_to_a_verb_and_a_resource(
    served: tuple[LocalCluster, aiohttp.ClientSession], faults: FaultInjector
) -> None:
    _, session = served
    faults.fail(1.0, [503], verbs=["create"], resources=["configmaps"], for_seconds=30, retry_after=0)
    assert await status_of(session, "GET", CONFIGMAPS) == 200  # a list: not narrowed to it
    assert await status_of(session, "POST", "/api/v1/namespaces/default/secrets",
                           {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}) == 201
    assert await status_of(session, "POST", CONFIGMAPS, configmap("a")) == 503
    assert faults.counts.by_status == {503: 1}


async def test_a_group_qualified_subresource_matches_only_itself(faults: FaultInjector) -> None:
    faults.fail(1.0, 500, resources=["leases.coordination.k8s.io"], for_seconds=30)
    async with LocalCluster(middlewares=[faults.middleware]) as cluster, \
            aiohttp.ClientSession(cluster.url) as s:
        lease_path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
        assert await status_of(s, "GET", lease_path) == 500
        assert await status_of(s, "GET", lease_path + "/x") == 500
        assert await status_of(s, "GET", CONFIGMAPS) == 200
        assert await status_of(s, "GET", "/version") == 200


async def test_a_hung_request_is_cut_and_never_committed(
    served: tuple[LocalCluster, aiohttp.ClientSession], faults: FaultInjector
) -> None:
    cluster, session = served
    faults.hang(1.0, 0.3, verbs=["create"], for_requests=1)
    started = asyncio.get_running_loop().time()
    with pytest.raises(aiohttp.ClientError):
        await status_of(session, "POST", CONFIGMAPS, configmap("hung"))
    # uvloop's clock counts whole milliseconds, read once per turn of the loop: allow one tick
    assert asyncio.get_running_loop().time() - started >= 0.3 - 0.002
    assert cluster.store.get("", "configmaps", "default", "hung") is None
    assert faults.counts.hung == 1
    assert await status_of(session, "POST", CONFIGMAPS, configmap("hung")) == 201  # the bound is spent


@pytest.mark.parametrize("mode", ["reset", "500"])
async def test_a_lost_reply_leaves_the_write_committed(
    served: tuple[LocalCluster, aiohttp.ClientSession], faults: FaultInjector, mode: str
) -> None:
    cluster, session = served
    faults.lose_reply(1.0, mode, resources=["configmaps"], for_requests=1)  # type: ignore[arg-type]
    if mode == "reset":
        with pytest.raises(aiohttp.ClientError):
            await status_of(session, "POST", CONFIGMAPS, configmap("landed"))
    else:
        assert await status_of(session, "POST", CONFIGMAPS, configmap("landed")) == 500
    assert cluster.store.get("", "configmaps", "default", "landed") is not None
    assert faults.counts.lost_replies == 1
    # the client that tries again finds it there
    assert await status_of(session, "POST", CONFIGMAPS, configmap("landed")) == 409


async def test_a_failed_write_is_not_turned_into_a_lost_reply(
    served: tuple[LocalCluster, aiohttp.ClientSession], faults: FaultInjector
) -> None:
    _, session = served
    faults.lose_reply(1.0, "500", for_requests=5)
    assert await status_of(session, "GET", CONFIGMAPS) == 200  # reads are never touched
    assert await status_of(session, "PUT", CONFIGMAPS + "/missing", configmap("missing")) == 404
    assert faults.counts.lost_replies == 0


async def test_watches_answered_410_or_cut(
    served: tuple[LocalCluster, aiohttp.ClientSession], faults: FaultInjector
) -> None:
    _, session = served
    faults.gone_watches(1.0)
    async with session.get(CONFIGMAPS, params={"watch": "1", "resourceVersion": "1"}) as response:
        event = json.loads(await response.read())
    assert event["type"] == "ERROR" and event["object"]["code"] == 410
    faults.clear()
    faults.cut_watches(0.2)
    with pytest.raises(aiohttp.ClientError):
        async with session.get(CONFIGMAPS, params={"watch": "1", "timeoutSeconds": "30"},
                               timeout=aiohttp.ClientTimeout(total=3)) as response:
            await response.read()
    assert faults.counts.cut == 1


async def test_a_plan_sets_its_knobs_for_as_long_as_the_server_runs(tmp_path: Path) -> None:
    plan_file = tmp_path / "faults.yaml"
    plan_file.write_text(
        "seed: 5\n"
        "errors: {fraction: 1.0, statuses: [429], retryAfterSeconds: 2,\n"
        "         verbs: [list], resources: [configmaps]}\n"
        "loseReply: {fraction: 1.0, mode: '500', resources: [secrets]}\n"
    )
    faults = FaultInjector()
    faults.apply(load_plan(plan_file))
    async with LocalCluster(middlewares=[faults.middleware]) as cluster, \
            aiohttp.ClientSession(cluster.url) as s:
        for _ in range(3):
            async with s.get(CONFIGMAPS) as response:
                assert response.status == 429 and response.headers["Retry-After"] == "2"
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
        assert await status_of(s, "POST", "/api/v1/namespaces/default/secrets", secret) == 500
        assert cluster.store.get("", "secrets", "default", "s") is not None


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([1], "a fault plan is a mapping"),
        ({"errrors": {}}, "unknown key 'errrors'"),
        ({"errors": {"statuses": [500]}}, "errors: fraction is required"),
        ({"errors": {"fraction": 2}}, "errors: fraction must be in (0, 1]"),
        ({"errors": {"fraction": 0.1, "statuses": [404]}}, "errors: status must be one of [429, 500, 503]"),
        ({"errors": {"fraction": 0.1, "verbs": ["destroy"]}}, "errors: unknown verb 'destroy'"),
        ({"hang": {"fraction": 0.1, "seconds": "long"}}, "hang.seconds must be a number"),
        ({"loseReply": {"fraction": 0.1, "verbs": ["get"]}}, "loseReply: a lost reply needs a write"),
        ({"loseReply": {"fraction": 0.1, "mode": "drop"}}, "loseReply: mode must be 'reset' or '500'"),
        ({"cutWatches": {"withinSeconds": 0}}, "cutWatches: within must be in"),
        ({"latency": {"seconds": 1, "often": 2}}, "latency: unknown key 'often'"),
        ({"seed": "x"}, "seed must be an integer"),
    ],
)
def test_a_wrong_plan_is_one_clear_line(document: Any, message: str) -> None:
    with pytest.raises(FaultPlanError) as refused:
        parse_plan(document)
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_kadmit_local_refuses_a_wrong_plan_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tmp_path / "faults.yaml"
    plan.write_text("hang: {fraction: 0.5}\n")
    code = main(["local", "--api-only", "--kubeconfig", str(tmp_path / "kc"), "--faults", str(plan)])
    err = capsys.readouterr().err.strip()
    assert code == 1, err
    assert err == f"kadmit: error: --faults {plan}: hang: seconds is required"
    assert not (tmp_path / "kc").exists()


async def test_kadmit_local_injects_the_plan_and_reports_it(tmp_path: Path) -> None:
    plan = tmp_path / "faults.yaml"
    plan.write_text("errors: {fraction: 1.0, statuses: [503], verbs: [create], resources: [configmaps]}\n")
    kubeconfig = tmp_path / "kc"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kadmit", "local", "--api-only", "--kubeconfig", str(kubeconfig),
        "--faults", str(plan), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        assert "API server ready at" in line, line
        kubectl = await asyncio.create_subprocess_exec(
            "kubectl", "--kubeconfig", str(kubeconfig), "create", "configmap", "c", "--from-literal=a=b",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(kubectl.communicate(), 30)
        assert kubectl.returncode == 1 and "unable to handle the request" in err.decode(), err.decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0
    report = next(line for line in err.decode().splitlines() if "faults injected:" in line)
    counts = json.loads(report.split("faults injected: ", 1)[1])
    assert counts["byStatus"] == {"503": counts["failed"]} and counts["failed"] >= 1
