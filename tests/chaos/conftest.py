"""The fault suite's fixtures: a local cluster with simulated nodes, a fault injector in front of
it, Kueue's CRDs, two ClusterQueues in a cohort, and an invariant checker on its store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import yaml

from kadmit.controller.apply import Applier
from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.faults import FaultInjector
from kadmit.localcluster.sim import default_addons
from tests.chaos.harness import SETUP, Invariants
from tests.e2e.conftest import Env, node_config


@dataclass
class Chaos:
    env: Env
    faults: FaultInjector
    invariants: Invariants


@pytest.fixture
async def chaos() -> AsyncIterator[Chaos]:
    faults = FaultInjector(seed=23)
    async with LocalCluster(token=True, addons=default_addons(node_config(), seed=9),
                            middlewares=[faults.middleware]) as cluster, await cluster.api_client() as client:
        env = Env(cluster, client)
        invariants = Invariants(cluster)
        await env.install_crds()
        await Applier(env.kube).apply_all([d for d in yaml.safe_load_all(SETUP) if d])
        try:
            yield Chaos(env, faults, invariants)
        finally:
            faults.clear()
            for manager in list(env.managers):
                await manager.stop()
