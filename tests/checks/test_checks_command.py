"""``kadmit checks``: the command a user runs beside Kueue, as a real process against a real API server."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from kadmit.checks.discovery import load_all
from kadmit.controller.checks_service import ChecksService, LeaderElection, serve
from kadmit.controller.cli import CommandError, main
from kadmit.kube import Client
from kadmit.kube.resources import ADMISSION_CHECKS, WORKLOADS
from kadmit.localcluster.cluster import LocalCluster
from tests.checks.conftest import NAMESPACE, NAMESPACES, KueueCluster, active_is, has_state


async def kadmit(*args: str) -> asyncio.subprocess.Process:
    # The console script, as a user runs it (``python -m controller.cli`` would load cli.py twice).
    return await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("kadmit")),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def test_checks_run_serves_a_check_until_terminated(kueue: KueueCluster) -> None:
    await kueue.admission_check("rq", "kadmit.dev/resourcequota")
    await kueue.cluster_queue("cq", [{"name": "rq"}])
    wl = await kueue.workload("wl", pods=2)
    process = await kadmit(
        "checks", "run", "--enable", "resourcequota", "--kubeconfig", kueue.cluster.kubeconfig
    )
    try:
        await kueue.wait_for(ADMISSION_CHECKS, None, "rq", active_is("True"), within=20.0)
        await kueue.reserve(wl, "cq")
        await kueue.wait_for(WORKLOADS, NAMESPACE, "wl", has_state("rq", "Ready"))
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=20.0)
    assert process.returncode == 0, stderr.decode()
    assert b"running admission checks: kadmit.dev/resourcequota" in stderr


async def test_a_cluster_without_the_kueue_api_is_refused_before_anything_runs() -> None:
    async with LocalCluster(admission_plugins=[]) as bare:
        api_client = await bare.api_client()
        async with api_client:
            with pytest.raises(CommandError) as refused:
                await serve(Client(api_client), load_all(["resourcequota"]), asyncio.Event())
    assert (
        str(refused.value)
        == "the cluster does not serve workloads.kueue.x-k8s.io/v1beta2: install its CRD first"
    )


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["checks", "run"], 2, "kadmit: error: no check enabled: pass --enable NAME (available: "),
        (
            ["checks", "run", "-e", "nosuch"],
            2,
            "kadmit: error: no admission-check plugin named 'nosuch' (available: ",
        ),
        (
            ["checks", "run", "-e", "collections:OrderedDict"],
            2,
            "kadmit: error: collections:OrderedDict: OrderedDict has no",
        ),
        (
            ["checks", "run", "-e", "resourcequota", "-e", "kadmit.checks.resourcequota:ResourceQuotaCheck"],
            2,
            "kadmit: error: 'kadmit.checks.resourcequota:ResourceQuotaCheck' and 'resourcequota' both claim",
        ),
        (
            ["checks", "run", "-e", "resourcequota", "--metrics-bind-address", "8080"],
            2,
            "kadmit: error: --metrics-bind-address: invalid bind address '8080'",
        ),
        (
            ["checks", "run", "-e", "multikueue", "--config", "/nonexistent/config.yaml"],
            1,
            "kadmit: error: config /nonexistent/config.yaml: cannot read: No such file or directory",
        ),
        (
            ["checks", "run", "-e", "resourcequota", "--kubeconfig", "/nonexistent/kubeconfig"],
            1,
            "kadmit: error: cannot configure access to the cluster: ",
        ),
        (
            ["checks", "run", "-e", "kadmit_test_no_such_module:Check"],
            1,
            "kadmit: error: cannot load check plugin 'kadmit_test_no_such_module:Check': ModuleNotFoundError",
        ),
    ],
)
def test_bad_runs_exit_with_one_line(
    args: list[str], code: int, message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """2 when the command line names no plugin or a bad value; 1 when a file, plugin or cluster fails."""
    assert main(args) == code
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(message), err


def test_list_shows_the_installed_plugins(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["checks", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "resourcequota\tkadmit.dev/resourcequota\tkadmit.checks.resourcequota:ResourceQuotaCheck" in lines
    provisioning = "kadmit.checks.provisioning:ProvisioningCheck"
    assert f"provisioning\tkueue.x-k8s.io/provisioning-request\t{provisioning}" in lines


async def until(condition: Callable[[], bool], within: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        assert loop.time() < deadline, "condition never held"
        await asyncio.sleep(0.05)


async def test_with_leader_election_one_replica_acts_and_a_clean_stop_hands_over(kueue: KueueCluster) -> None:
    await kueue.create(NAMESPACES, {"metadata": {"name": "kadmit-system"}})
    await kueue.admission_check("rq", "kadmit.dev/resourcequota")
    await kueue.cluster_queue("cq", [{"name": "rq"}])
    first_wl, second_wl = await kueue.workload("first"), await kueue.workload("second")

    def replica(identity: str) -> ChecksService:
        election = LeaderElection(
            namespace="kadmit-system",
            identity=identity,
            lease_duration=3.0,
            renew_deadline=2.0,
            retry_period=0.2,
        )
        return ChecksService(kueue.api, load_all(["resourcequota"]), leader_election=election)

    first, second = replica("first"), replica("second")
    stop_first, stop_second = asyncio.Event(), asyncio.Event()
    first_run = asyncio.create_task(first.run(stop_first))
    await until(lambda: first.leading)
    second_run = asyncio.create_task(second.run(stop_second))
    try:
        await kueue.reserve(first_wl, "cq")
        await kueue.wait_for(WORKLOADS, NAMESPACE, "first", has_state("rq", "Ready"))
        await asyncio.sleep(0.6)  # three of the follower's tries
        assert first.leading and not second.leading
        stop_first.set()
        await first_run
        await until(lambda: second.leading, within=5.0)  # the Lease was handed over, not left to expire
        await kueue.reserve(second_wl, "cq")
        await kueue.wait_for(WORKLOADS, NAMESPACE, "second", has_state("rq", "Ready"))
    finally:
        stop_first.set()
        stop_second.set()
        await asyncio.gather(first_run, second_run)
    lease = await kueue.api.request(
        "GET", "/apis/coordination.k8s.io/v1/namespaces/kadmit-system/leases/kadmit-checks"
    )
    assert lease["spec"]["holderIdentity"] == ""  # released on the clean stop


async def test_metrics_count_verdicts_and_writes(kueue: KueueCluster) -> None:
    await kueue.admission_check("rq", "kadmit.dev/resourcequota")
    await kueue.cluster_queue("cq", [{"name": "rq"}])
    wl = await kueue.workload("wl")
    service = ChecksService(kueue.api, load_all(["resourcequota"]), metrics_address=("127.0.0.1", 0))
    stop = asyncio.Event()
    running = asyncio.create_task(service.run(stop))
    try:
        await kueue.reserve(wl, "cq")
        await kueue.wait_for(WORKLOADS, NAMESPACE, "wl", has_state("rq", "Ready"))
        url = f"http://127.0.0.1:{service.metrics_port}/metrics"
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            assert response.status == 200
            text = await response.text()
    finally:
        stop.set()
        await running
    assert (
        'kadmit_admission_check_verdicts_total{controller="kadmit.dev/resourcequota",state="Ready"} 1.0'
        in text
    )
    assert 'kadmit_admission_check_status_writes_total{result="written"}' in text
    assert "kadmit_admission_check_evaluation_duration_seconds_count" in text
