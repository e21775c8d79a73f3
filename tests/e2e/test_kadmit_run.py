"""``kadmit run`` as the Deployment runs it: a real process against a cluster's kubeconfig, with a
Kueue Configuration file; it wins the Lease, admits a Job, logs JSON, and stops cleanly on SIGTERM
handing the Lease back."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

from controller.kube import JOBS, LEASES, NAMESPACES
from tests.e2e.conftest import Env, eventually
from tests.e2e.helpers import apply_small_setup, is_running, job, wait_job

COMMAND = [sys.executable, "-c", "import sys; from controller.cli import main; sys.exit(main(sys.argv[1:]))"]

CONFIG = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kadmit-system
webhook: {port: 0, host: 127.0.0.1}
metrics: {bindAddress: "127.0.0.1:0"}
health: {healthProbeBindAddress: "127.0.0.1:0"}
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
