"""The runner against a misbehaving API server: failed requests, cut and expired watches.

Another controller writes its own check on the same workloads meanwhile. Every workload must
end with both entries: nothing lost, nothing stuck, the runner alive.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kadmit.checks.plugin import AdmissionCheckPlugin, CheckContext
from kadmit.checks.verdict import Ready, Verdict
from kadmit.kube import ApiError
from kadmit.kube.resources import WORKLOADS
from kadmit.localcluster.faults import FaultInjector
from tests.checks.conftest import NAMESPACE, KueueCluster, kueue_cluster, state_of

Obj = dict[str, Any]
COUNT = 20


class Approve(AdmissionCheckPlugin[None]):
    controller_name = "test.kadmit.dev/approve"

    async def evaluate(self, workload: Obj, context: CheckContext[None]) -> Verdict:
        return Ready("approved")


async def other_controller_approves(kueue: KueueCluster, name: str) -> None:
    """What another check controller does: read, add its entry, write; retry on any failure."""
    while True:
        try:
            wl = await kueue.get(WORKLOADS, NAMESPACE, name)
            status = wl.setdefault("status", {})
            status["admissionChecks"] = [
                e for e in status.get("admissionChecks") or [] if e["name"] != "theirs"
            ]
            status["admissionChecks"].append(
                {
                    "name": "theirs",
                    "state": "Ready",
                    "message": "theirs",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            )
            await kueue.api.replace(WORKLOADS, wl, subresource="status")
            return
        except (ApiError, OSError):
            await asyncio.sleep(0.05)


async def test_faults_and_a_concurrent_writer_lose_nothing() -> None:
    faults = FaultInjector(seed=7)
    async with kueue_cluster(middlewares=[faults.middleware]) as kueue:
        await kueue.admission_check("mine", Approve.controller_name)
        await kueue.admission_check("theirs", "example.com/other")
        await kueue.cluster_queue("cq", [{"name": "mine"}, {"name": "theirs"}])
        names = [f"wl-{i}" for i in range(COUNT)]
        for name in names:
            await kueue.reserve(await kueue.workload(name), "cq")
        watcher = await kueue.pool.watch(WORKLOADS)
        await watcher.wait_synced()
        async with kueue.running([Approve()], error_backoff_initial=0.05, error_backoff_max=0.5) as runner:
            faults.fail(0.3, 503, for_seconds=3.0, retry_after=0)
            faults.force_gone(2)
            faults.drop_watches()
            await asyncio.gather(*(other_controller_approves(kueue, name) for name in names))
            both = asyncio.Event()

            def check(*_: object) -> None:
                if all(
                    (state_of(watcher.get(NAMESPACE, n) or {}, "mine") or {}).get("state") == "Ready"
                    and (state_of(watcher.get(NAMESPACE, n) or {}, "theirs") or {}).get("state") == "Ready"
                    for n in names
                ):
                    both.set()

            watcher.add_handler(check)
            check()
            await asyncio.wait_for(both.wait(), timeout=30.0)
        assert faults.counts.failed > 0
        assert runner.writes >= COUNT
