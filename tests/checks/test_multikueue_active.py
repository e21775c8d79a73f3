"""MultiKueue's AdmissionCheck ``Active`` (kueue-contract.md §7) and the plugin's life with the runner."""

from __future__ import annotations

import asyncio
from typing import Any

from kadmit.checks.multikueue import MultiKueueConfig, cluster_activity
from kadmit.checks.multikueue_remote import CONTROLLER_NAME
from kadmit.checks.runner import CheckRunner
from kadmit.kube.resources import ADMISSION_CHECKS, MULTIKUEUE_CLUSTERS, MULTIKUEUE_CONFIGS
from kadmit.workload import find_condition
from tests.checks.multikueue_fixtures import CHECK, CLUSTER_NAME, multikueue_env

Obj = dict[str, Any]
WORKER1 = CLUSTER_NAME["worker1"]


def active_of(obj: Obj) -> Obj:
    return find_condition(obj, "Active") or {}


def active(status: str, reason: str) -> Any:
    return lambda obj: (active_of(obj).get("status"), active_of(obj).get("reason")) == (status, reason)


def mkc(name: str, active_status: str | None) -> Obj:
    conditions = [] if active_status is None else [{"type": "Active", "status": active_status}]
    return {"metadata": {"name": name}, "status": {"conditions": conditions}}


def test_the_rule_over_missing_and_inactive_clusters() -> None:
    config = MultiKueueConfig("c", ("a", "b", "c"))
    every = cluster_activity(config, [mkc("a", "True"), mkc("b", "True"), mkc("c", "True")])
    assert (every.active, every.reason, every.message) == (True, "Active", "The admission check is active")
    some = cluster_activity(config, [mkc("a", "True"), mkc("c", None), mkc("unlisted", "False")])
    assert (some.active, some.reason) == (True, "SomeActiveClusters")
    assert some.message == "Missing clusters: [b], Inactive clusters: [c]"
    none = cluster_activity(config, [mkc("b", "False")])
    assert (none.active, none.reason) == (False, "NoUsableClusters")
    assert none.message == "Missing clusters: [a c], Inactive clusters: [b]"


async def test_active_follows_the_workers_and_a_stopped_runner_writes_nothing() -> None:
    async with multikueue_env({"worker1": 0}) as env:
        # Nothing submitted: the plugin connects its workers when the runner starts.
        await env.manager.wait_for(MULTIKUEUE_CLUSTERS, None, WORKER1, active("True", "Active"), within=10)
        ac = await env.manager.wait_for(ADMISSION_CHECKS, None, CHECK, active("True", "Active"), within=10)
        assert active_of(ac)["message"] == "The admission check is active"

        await env.manager.create(ADMISSION_CHECKS, {
            "metadata": {"name": "broken"},
            "spec": {"controllerName": CONTROLLER_NAME, "parameters": {
                "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "nope"}},
        })
        ac = await env.manager.wait_for(ADMISSION_CHECKS, None, "broken", active("False", "BadConfig"))
        assert active_of(ac)["message"] == (
            'Cannot load the AdmissionChecks parameters: multikueueconfigs.kueue.x-k8s.io "nope" not found')

        config = await env.manager.get(MULTIKUEUE_CONFIGS, None, "multikueue-test")
        config["spec"]["clusters"].append("ghost")
        await env.manager.api.replace(MULTIKUEUE_CONFIGS, config)
        ac = await env.manager.wait_for(ADMISSION_CHECKS, None, CHECK, active("True", "SomeActiveClusters"))
        assert active_of(ac)["message"] == "Missing clusters: [ghost]"

        await env.clusters.workers["worker1"].stop()
        ac = await env.manager.wait_for(
            ADMISSION_CHECKS, None, CHECK, active("False", "NoUsableClusters"), within=20)
        assert active_of(ac)["message"] == f"Missing clusters: [ghost], Inactive clusters: [{WORKER1}]"

        # Leadership lost: the runner stops, and so does the plugin. While it ran, every failed
        # reconnection rewrote the MultiKueueCluster's message; now nothing does.
        assert env.runner is not None
        await env.runner.stop()
        assert env.plugin.workers == {}
        before = await env.manager.get(MULTIKUEUE_CLUSTERS, None, WORKER1)
        await asyncio.sleep(1.0)  # five reconnection periods at reconnect_base=0.2
        after = await env.manager.get(MULTIKUEUE_CLUSTERS, None, WORKER1)
        assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


async def test_a_new_term_of_leadership_reconnects_the_workers_with_no_event() -> None:
    async with multikueue_env({"worker1": 0}) as env:
        await env.manager.wait_for(MULTIKUEUE_CLUSTERS, None, WORKER1, active("True", "Active"), within=10)
        assert env.runner is not None
        await env.runner.stop()  # leadership lost
        assert env.plugin.workers == {}
        # Another replica wrote meanwhile; this one, not leading, leaves it alone.
        await env.manager.set_condition(MULTIKUEUE_CLUSTERS, None, WORKER1, {
            "type": "Active", "status": "False", "reason": "ClientConnectionFailed", "message": "stale"})
        await asyncio.sleep(0.5)
        stale = await env.manager.get(MULTIKUEUE_CLUSTERS, None, WORKER1)
        assert active_of(stale)["message"] == "stale"
        # Leadership regained: a new runner starts the same plugin, which connects again.
        runner = CheckRunner(env.manager.api, [env.plugin], watches=env.manager.pool.watch)
        await runner.start()
        try:
            mkc = await env.manager.wait_for(
                MULTIKUEUE_CLUSTERS, None, WORKER1, active("True", "Active"), within=10)
            assert active_of(mkc)["message"] == "Connected"
            assert env.plugin.workers[WORKER1].connected
        finally:
            await runner.stop()
