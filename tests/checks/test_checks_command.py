"""``kadmit checks``: the command a user runs beside Kueue, as a real process against a real API server."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from checks.discovery import load_all
from checks.kinds import ADMISSION_CHECKS, WORKLOADS
from controller.cli import CommandError, main
from controller.commands.checks import serve
from localcluster.cluster import LocalCluster
from tests.checks.conftest import NAMESPACE, KueueCluster, active_is, has_state


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
                await serve(api_client, load_all(["resourcequota"]), asyncio.Event())
    assert (
        str(refused.value)
        == "the cluster does not serve workloads.kueue.x-k8s.io/v1beta2: install its CRD first"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["checks", "run"], "kadmit: error: no check enabled: pass --enable NAME (available: "),
        (
            ["checks", "run", "-e", "nosuch"],
            "kadmit: error: no admission-check plugin named 'nosuch' (available: ",
        ),
        (
            ["checks", "run", "-e", "collections:OrderedDict"],
            "kadmit: error: collections:OrderedDict: OrderedDict has no",
        ),
        (
            ["checks", "run", "-e", "resourcequota", "-e", "checks.resourcequota:ResourceQuotaCheck"],
            "kadmit: error: 'checks.resourcequota:ResourceQuotaCheck' and 'resourcequota' both claim",
        ),
        (
            ["checks", "run", "-e", "resourcequota", "--kubeconfig", "/nonexistent/kubeconfig"],
            "kadmit: error: cannot configure access to the cluster: ",
        ),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(message), err


def test_list_shows_the_installed_plugins(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["checks", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "resourcequota\tkadmit.dev/resourcequota\tchecks.resourcequota:ResourceQuotaCheck" in lines
    assert "provisioning\tkueue.x-k8s.io/provisioning-request\tchecks.provisioning:ProvisioningCheck" in lines
