"""The fault suite's fixtures: a local cluster with simulated nodes, a fault injector in front of
it, Kueue's CRDs, two ClusterQueues in a cohort, and an invariant checker on its store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from kadmit.localcluster.faults import FaultInjector
from tests.chaos.harness import ChaosWorld, Invariants, chaos_world
from tests.e2e.conftest import Env


@dataclass
class Chaos:
    env: Env
    faults: FaultInjector
    invariants: Invariants
    world: ChaosWorld


@pytest.fixture
async def chaos() -> AsyncIterator[Chaos]:
    async with chaos_world(seed=23) as world:
        env = Env(world.cluster, world.api)
        try:
            yield Chaos(env, world.faults, world.invariants, world)
        finally:
            for manager in list(env.managers):
                await manager.stop()
