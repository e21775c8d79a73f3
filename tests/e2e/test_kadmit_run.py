"""``kadmit run`` as the Deployment runs it: a real process against a cluster's kubeconfig, with a
Kueue Configuration file; it wins the Lease, admits a Job, logs JSON, and stops cleanly on SIGTERM
handing the Lease back."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import signal
import socket
import ssl
import sys
from pathlib import Path

import pytest

from kadmit.certs.authority import issue_ca, issue_serving
from kadmit.controller import local_setup
from kadmit.controller.app import KadmitApp
from kadmit.controller.cli import main
from kadmit.controller.config import LeaderElection, load
from kadmit.kube import Client
from kadmit.kube.resources import JOBS, LEASES, NAMESPACES
from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.kubeconfig import kubeconfig_dict, write_kubeconfig
from tests.e2e.conftest import Env, eventually, fast_config
from tests.e2e.helpers import apply_small_setup, is_running, job, wait_job
from tests.handshake import client as handshake_client
from tests.handshake import handshake, refusal

COMMAND = [sys.executable, "-m", "kadmit"]

CONFIG = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kadmit-system
webhook: {port: 0, host: 127.0.0.1}
metrics: {bindAddress: "127.0.0.1:0"}
health: {healthProbeBindAddress: "127.0.0.1:0"}
visibilityServer: {bindPort: 0, bindAddress: 127.0.0.1}
leaderElection: {leaderElect: true, leaseDuration: 3s, renewDeadline: 2s, retryPeriod: 500ms}
waitForPodsReady: {timeout: 30s}
"""


async def test_kadmit_run_leads_admits_and_hands_over(env: Env, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    await env.kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kadmit-system"}}
    )
    await apply_small_setup(env)
    proc = await asyncio.create_subprocess_exec(
        *COMMAND,
        "run",
        "--kubeconfig",
        env.cluster.kubeconfig,
        "--config",
        str(config),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await env.kube.create(JOBS, job("via-run", cpu="1", parallelism=1, queue="small"))
        await wait_job(env, "via-run", is_running, "started by kadmit run", within=40)

        async def held() -> str:
            lease = await env.kube.get(LEASES, "kadmit-system", "c1f6bfd2.kadmit.dev")
            return str(lease["spec"].get("holderIdentity") or "")

        holder = await eventually(held, what="the Lease held")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert holder
    assert await held() == ""  # released on a clean stop
    records = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    assert records and all({"ts", "level", "logger", "msg"} <= set(r) for r in records)
    assert any("became the leader" in r["msg"] for r in records)


async def test_cert_manager_mode_serves_the_mounted_pair(env: Env, tmp_path: Path) -> None:
    """``--cert-mode files`` (the cert-manager overlay): the webhook serves tls.crt/tls.key from the
    directory, and kadmit issues no Secret of its own."""
    ca = issue_ca()
    pair = issue_serving(ca, "kadmit-webhook-service", "kadmit-system")
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    config = dataclasses.replace(
        fast_config(), internal_cert_management=False, leader_election=LeaderElection(leader_elect=False)
    )
    app = KadmitApp(
        env.kube, local_setup.on_loopback(config, metrics=False, health=False), cert_dir=str(tmp_path),
    )
    await app.start()
    try:
        assert app.certificates is None
        async with asyncio.timeout(10):
            await local_setup.wait_until(app.ready)
        context = ssl.create_default_context(cadata=ca.cert_pem.decode())
        _, writer = await asyncio.open_connection(
            "127.0.0.1",
            app.webhook_port,
            ssl=context,
            server_hostname="kadmit-webhook-service.kadmit-system.svc",
        )
        writer.close()
    finally:
        await app.stop()


TLS12, TLS13 = ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3
TLS_CONFIG = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kadmit-system
internalCertManagement: {enable: false}
leaderElection: {leaderElect: false}
"""


@pytest.mark.parametrize(("block", "refused", "reason", "served"), [
    ("tls: {minVersion: VersionTLS13}", handshake_client(maximum=TLS12), "UNSUPPORTED_PROTOCOL",
     [(handshake_client(minimum=TLS13), "TLSv1.3")]),
    ("tls: {cipherSuites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]}",
     handshake_client(maximum=TLS12, ciphers="ECDHE-ECDSA-AES256-GCM-SHA384"), "NO_SHARED_CIPHER",
     [(handshake_client(maximum=TLS12, ciphers="ECDHE-ECDSA-AES128-GCM-SHA256"), "TLSv1.2"),
      (handshake_client(minimum=TLS13), "TLSv1.3")]),
])
async def test_the_tls_block_holds_on_the_webhook_metrics_and_visibility_servers(
    env: Env,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    block: str,
    refused: ssl.SSLContext,
    reason: str,
    served: list[tuple[ssl.SSLContext, str]],
) -> None:
    """Kueue applies ``tls`` to all three of its HTTPS servers; a client the block rules out is
    refused by each, one it allows is served."""
    ca = issue_ca()
    pair = issue_serving(ca, "kadmit-webhook-service", "kadmit-system")
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    (tmp_path / "config.yaml").write_text(f"{TLS_CONFIG}{block}\n")
    config = load(tmp_path / "config.yaml")
    app = KadmitApp(
        env.kube, local_setup.on_loopback(config, health=False), cert_dir=str(tmp_path), metrics_secure=True,
    )
    await app.start()
    try:
        async with asyncio.timeout(10):
            await local_setup.wait_until(app.ready)
        ports = {"webhook": app.webhook_port, "visibility": app.visibility_port, "metrics": app.metrics_port}
        for server, port in ports.items():
            assert port is not None, server
            assert await refusal(port, refused, caplog) == reason, server
            for context, version in served:
                assert (await handshake(port, context))[0] == version, server
    finally:
        await app.stop()


def test_cert_dir_needs_files_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--cert-mode", "secret", "--cert-dir", "/x"]) == 2
    assert "--cert-dir is read only with --cert-mode files" in capsys.readouterr().err


async def test_a_cluster_without_kueues_crds_is_one_clear_line(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.replace("leaderElect: true", "leaderElect: false"))
    async with LocalCluster(token=True) as cluster:  # no CRDs installed
        proc = await asyncio.create_subprocess_exec(
            *COMMAND, "run", "--kubeconfig", cluster.kubeconfig, "--config", str(config),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 1
    last = err.decode().strip().splitlines()[-1]
    assert last.startswith("kadmit: error: the cluster does not serve ") and "install Kueue's CRDs" in last


async def _run_fails(kubeconfig: str, config: Path) -> tuple[int | None, str]:
    proc = await asyncio.create_subprocess_exec(
        *COMMAND, "run", "--kubeconfig", kubeconfig, "--config", str(config),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode, err.decode().strip().splitlines()[-1]


async def test_runtime_failures_exit_1_with_one_clear_line(tmp_path: Path) -> None:
    """Not a usage error (2): the command line is right, the world is not."""
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.replace("leaderElect: true", "leaderElect: false"))
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    nowhere = tmp_path / "nowhere.kubeconfig"
    write_kubeconfig(nowhere, kubeconfig_dict(f"https://127.0.0.1:{port}", token="t"))
    code, last = await _run_fails(str(nowhere), config)
    assert code == 1 and last.startswith("kadmit: error: cannot reach the cluster: "), last
    assert f"Cannot connect to host 127.0.0.1:{port}" in last, last
    async with LocalCluster(token=True) as cluster:
        stranger = cluster.kubeconfig_for("not-a-token-it-knows")
        code, last = await _run_fails(stranger, config)
        assert code == 1 and last.startswith("kadmit: error: the cluster refused a request: "), last
        assert "401" in last and "Unauthorized" in last, last
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = tmp_path / "busy.yaml"
            busy.write_text(config.read_text().replace("port: 0", f"port: {taken.getsockname()[1]}"))
            code, last = await _run_fails(cluster.kubeconfig, busy)
        assert code == 1 and last.startswith("kadmit: error: cannot listen: "), last
        assert last.endswith("address already in use"), last


async def test_caches_that_never_sync_stop_kadmit_with_one_line(tmp_path: Path) -> None:
    """``controller.cacheSyncTimeout``: kadmit on a ServiceAccount no role lets list anything waits
    that long for its caches, then exits 1 naming what never synced (a controller-runtime manager
    fails its start the same way, to be restarted), rather than wait forever."""
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.replace("leaderElect: true", "leaderElect: false")
                      + "controller: {cacheSyncTimeout: 2s}\n")
    async with LocalCluster(token=True) as cluster, await cluster.api_client() as api_client:
        admin = Client(api_client)
        await local_setup.install_crds(admin)
        await local_setup.ensure_namespace(admin, "kadmit-system")
        await local_setup.ensure_service_account(admin, "kadmit-system")  # no RBAC bound to it
        token = await local_setup.service_account_token(admin, "kadmit-system")
        powerless = tmp_path / "powerless.kubeconfig"
        write_kubeconfig(powerless, local_setup.kubeconfig_with_token(cluster.kubeconfig, token))
        code, last = await _run_fails(str(powerless), config)
    assert code == 1, last
    assert last.startswith("kadmit: error: caches not synced within 2s (controller.cacheSyncTimeout): "), last
    assert "workloads.kueue.x-k8s.io/v1beta2" in last and "jobs.batch/v1" in last, last
