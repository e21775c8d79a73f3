"""Two replicas whose clocks jump up to 20 s either way and whose leader's Lease requests hang: at
no moment do two of them act. Every write either makes is checked against the Lease's holder at
the moment the write was committed (ordered by resourceVersion, as the server committed them)."""

from __future__ import annotations

import pytest

from kadmit.kube import LeaderElector
from tests.chaos.harness import LEASE, Acting, chaos_world, run_leadership


async def test_one_leader_acts_at_a_time_through_skew_and_hung_renewals() -> None:
    acting = Acting(LEASE)
    async with chaos_world(seed=31, acting=acting) as world:
        report = await run_leadership(world, acting, trials=5, seed=3)
    assert report.two_leaders == [], report.two_leaders
    assert not report.problems, report.problems
    assert report.writes > 20 and report.hung_requests > 0
    assert report.takeovers >= 1  # the Lease did change hands: the check was exercised
    assert {who for _, who, _ in acting.writes} == {"a", "b"}


async def test_the_check_sees_two_leaders_when_a_hung_renewal_holds_the_old_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The control: with the old elector, whose renewal had no deadline (the reliability issue's
    item 2), the hung leader keeps acting after the other replica took the Lease, and the check says so."""

    async def unbounded(self: LeaderElector) -> bool:
        return await self._try()

    monkeypatch.setattr(LeaderElector, "_bounded_try", unbounded)
    acting = Acting(LEASE)
    async with chaos_world(seed=31, acting=acting) as world:
        report = await run_leadership(world, acting, trials=3, seed=3)
    assert report.takeovers >= 1
    assert report.two_leaders, "two replicas acted at once, and the check did not notice"
