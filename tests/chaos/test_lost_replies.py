"""A write that commits but whose reply is lost (the connection reset, or a 500 although the write is
stored): kadmit reads the object back and finds its write landed, so the reservation it assumed
stays assumed (it is not forgotten, which would offer the same quota to another Workload until the
informer caught up); the quota is never booked twice and every Job runs once to completion.

Before, aiohttp replayed a PUT cut on a kept-alive connection: the replay, with the same
resourceVersion, came back 409, and the landed reservation was dropped as "the Workload changed".
"""

from __future__ import annotations

import logging

import pytest

from kadmit.kube.resources import JOBS
from tests.chaos.conftest import Chaos
from tests.e2e.helpers import job


@pytest.mark.parametrize("mode", ["reset", "500"])
async def test_kadmit_survives_replies_lost_after_commit(
    chaos: Chaos, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    env, faults, invariants = chaos.env, chaos.faults, chaos.invariants
    caplog.set_level(logging.INFO, logger="kadmit")
    await env.start_manager()
    # Every Workload status write of kadmit's (reservations, admissions, finishing) commits and
    # then loses its answer, for the first 12 of them.
    faults.lose_reply(1.0, mode, verbs=["update", "patch"], resources=["workloads/status"],  # type: ignore[arg-type]
                      for_requests=12)
    names = [f"lost-{i}" for i in range(6)]
    for i, name in enumerate(names):
        await env.kube.create(JOBS, job(name, cpu="1", parallelism=2, runtime="300ms",
                                        queue=("team-a", "team-b")[i % 2]))
    problems = await invariants.settled(within=60)
    assert not problems, problems
    assert faults.counts.lost_replies >= 6, faults.counts.as_dict()
    assert invariants.starts == len(names)  # each Job started once: no write was applied twice
    landed = [r for r in caplog.records if "the answer was lost, but the write landed" in r.getMessage()]
    assert landed, "the pipeline never checked whether a write without an answer had landed"
    forgotten = [r for r in caplog.records if "not written (the Workload changed)" in r.getMessage()]
    assert not forgotten, [r.getMessage() for r in forgotten]
