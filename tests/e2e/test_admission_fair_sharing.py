"""Admission Fair Sharing through the API on a local cluster: two LocalQueues share one
ClusterQueue; once quota frees up, the LocalQueue that used less recently goes first, and each
LocalQueue's ``status.fairSharing.admissionFairSharingStatus`` shows its consumed resources
growing while it runs and decaying afterwards."""

from __future__ import annotations

import itertools
from typing import Any

from kadmit.engine.admission_fair_sharing import AdmissionFairSharing
from kadmit.engine.quantity import to_nano
from kadmit.engine.timestamps import parse_time
from kadmit.kube.resources import JOBS, LOCAL_QUEUES
from tests.e2e.conftest import Env, eventually, fast_config
from tests.e2e.helpers import is_complete, is_running, job, wait_job
from tests.e2e.test_kueue_semantics import _cq, _flavor, _lq

Obj = dict[str, Any]


async def _consumed(env: Env, lq: str) -> tuple[int, float] | None:
    """The LocalQueue's consumed cpu (nano-cores) and its ``lastUpdate``, as the API shows them."""
    obj = await env.kube.get(LOCAL_QUEUES, "default", lq)
    afs = ((obj.get("status") or {}).get("fairSharing") or {}).get("admissionFairSharingStatus")
    if afs is None:
        return None
    return to_nano(afs["consumedResources"].get("cpu", "0")), parse_time(afs["lastUpdate"])


async def test_the_local_queue_that_used_less_goes_first(env: Env) -> None:
    afs = AdmissionFairSharing(usage_half_life=2.0, sampling_interval=0.5)
    await env.start_manager(fast_config(admission_fair_sharing=afs))
    await env.applier.apply_all(
        [
            _flavor(),
            _cq("shared", 2, admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"}),
            _lq("lq-a", "shared"),
            _lq("lq-b", "shared"),
        ]
    )
    await env.kube.create(JOBS, job("a1", cpu="1", parallelism=2, runtime="4s", queue="lq-a"))
    await wait_job(env, "a1", is_running, "admitted at once: the ClusterQueue is empty")

    async def a_consumes() -> tuple[int, float] | None:
        found = await _consumed(env, "lq-a")
        return found if found is not None and found[0] > 0 else None

    await eventually(a_consumes, within=10, what="lq-a's consumed cpu grows while a1 runs")
    idle = await _consumed(env, "lq-b")
    assert idle is None or idle[0] == 0

    # Both wait while a1 holds the whole ClusterQueue; a2 is older and as high in priority.
    await env.kube.create(JOBS, job("a2", cpu="1", parallelism=2, runtime="3s", queue="lq-a"))
    await env.kube.create(JOBS, job("b1", cpu="1", parallelism=2, runtime="3s", queue="lq-b"))
    await wait_job(env, "a1", is_complete, "a1 runs to completion", within=20)
    await wait_job(env, "b1", is_running, "lq-b used less recently: its job goes first", within=15)
    a2 = await env.kube.get(JOBS, "default", "a2")
    assert a2["spec"]["suspend"] is True, "a2 must wait for b1: lq-a used more recently"
    await wait_job(env, "a2", is_running, "a2 once b1 is done", within=20)
    await wait_job(env, "a2", is_complete, "a2 runs to completion", within=20)

    # Nothing runs in lq-a any more: its consumed cpu decays, one sample after the other.
    seen: list[tuple[int, float]] = []

    async def decayed_twice() -> bool:
        found = await _consumed(env, "lq-a")
        assert found is not None
        if not seen or found[1] > seen[-1][1]:
            seen.append(found)
        falling = [later[0] < earlier[0] for earlier, later in itertools.pairwise(seen)]
        return len(falling) >= 2 and all(falling[-2:]) and seen[-1][0] > 0

    await eventually(decayed_twice, within=10, what="lq-a's consumed cpu decays after its jobs finish")
