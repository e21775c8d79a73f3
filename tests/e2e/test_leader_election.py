"""Two replicas: one leads, the other keeps warm caches and writes nothing, and takes over within
the lease duration when the leader dies (or at once when it steps down cleanly)."""

from __future__ import annotations

import asyncio
import contextlib

from kadmit.controller.manager import Manager
from kadmit.kube.leader import LeaderElector, LeaseTiming
from kadmit.kube.resources import JOBS, LEASES
from tests.e2e.conftest import Env, eventually, fast_config
from tests.e2e.helpers import apply_small_setup, is_running, job, wait_job

LEASE = 2.0


async def replica(env: Env, identity: str) -> tuple[Manager, LeaderElector, asyncio.Task[None]]:
    manager = Manager(env.kube, fast_config())
    await manager.start_caches()
    elector = LeaderElector(env.kube, "default", "kadmit-test", identity, timing=LeaseTiming(LEASE, 1.5, 0.3),
                            on_started_leading=manager.start_loops,
                            on_stopped_leading=manager.stop_loops)
    return manager, elector, asyncio.create_task(elector.run())


async def crash(manager: Manager, task: asyncio.Task[None]) -> None:
    """Stop without releasing the Lease, as a killed process would."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await manager.stop()


async def test_follower_is_warm_and_takes_over_after_the_leader_dies(env: Env) -> None:
    await apply_small_setup(env)
    first, _, first_task = await replica(env, "first")
    await eventually(lambda: _true(first.leading), what="the first replica leading")
    second, _, second_task = await replica(env, "second")
    try:
        await env.kube.create(JOBS, job("before", cpu="1", parallelism=1, runtime="30s", queue="small"))
        await wait_job(env, "before", is_running, "started by the leader")
        await eventually(lambda: _true(second.engine.reservation_count() == 1),
                         what="the follower's engine charging the leader's reservation")
        assert not second.leading and second.scheduler.cycles == 0  # warm, but writes nothing
        await crash(first, first_task)
        died = asyncio.get_running_loop().time()
        await eventually(lambda: _true(second.leading), within=LEASE + 3, what="the follower taking over")
        took = asyncio.get_running_loop().time() - died
        # the Lease expires LEASE after the last renewal; the follower tries every 0.3 s
        assert took <= LEASE + 1.5, took
        lease = await env.kube.get(LEASES, "default", "kadmit-test")
        assert lease["spec"]["holderIdentity"] == "second"
        await env.kube.create(JOBS, job("after", cpu="1", parallelism=1, queue="small"))
        await wait_job(env, "after", is_running, "started by the new leader")
        assert second.engine.reservation_count() == 2  # the old admission kept, nothing doubled
    finally:
        await crash(second, second_task)


async def test_clean_stop_hands_over_at_once(env: Env) -> None:
    first, first_elector, first_task = await replica(env, "first")
    await eventually(lambda: _true(first.leading), what="the first replica leading")
    second, _, second_task = await replica(env, "second")
    try:
        first_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await first_task
        await first_elector.release()
        await first.stop()
        stopped = asyncio.get_running_loop().time()
        await eventually(lambda: _true(second.leading), within=LEASE, what="the follower taking over")
        assert asyncio.get_running_loop().time() - stopped < LEASE
    finally:
        await crash(second, second_task)


async def _true(value: bool) -> bool:
    return value
