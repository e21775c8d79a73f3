"""Optional plugin hooks: start/stop around each run, the plugin's Active condition, namespaced watches."""

from __future__ import annotations

from typing import Any

import pytest

from kadmit.checks import ActiveCondition, ActiveContext, AdmissionCheckPlugin, CheckContext, ClusterView
from kadmit.checks.runner import required_watches
from kadmit.checks.verdict import Ready, Verdict
from kadmit.kube import Resource
from kadmit.kube.resources import ADMISSION_CHECKS, WORKLOADS
from kadmit.workload import find_condition
from tests.checks.conftest import NAMESPACE, NAMESPACES, KueueCluster, has_state

Obj = dict[str, Any]
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")


class Gate(AdmissionCheckPlugin[None]):
    """Active while ConfigMap ``gate`` in the team namespace says ``open: "yes"``; records its life."""

    controller_name = "test.kadmit.dev/gate"
    watches = (CONFIG_MAPS,)

    def __init__(self) -> None:
        self.namespaced_watches = {CONFIG_MAPS: NAMESPACE}
        self.log: list[str] = []
        self.seen_namespaces: set[str] = set()

    async def start(self, cluster: ClusterView) -> None:
        self.log.append("start")

    async def stop(self) -> None:
        self.log.append("stop")

    async def evaluate(self, workload: Obj, context: CheckContext[None]) -> Verdict:
        self.log.append("evaluate")
        return Ready("through the gate")

    async def active_condition(self, admission_check: Obj, context: ActiveContext[None]) -> ActiveCondition:
        maps = context.cluster.list(CONFIG_MAPS)
        self.seen_namespaces |= {m["metadata"]["namespace"] for m in maps}
        gate = context.cluster.get(CONFIG_MAPS, NAMESPACE, "gate")
        if gate is not None and (gate.get("data") or {}).get("open") == "yes":
            return ActiveCondition(True, "GateOpen", "the gate is open")
        return ActiveCondition(False, "GateClosed", "ConfigMap team/gate does not say open: yes")


def active_of(ac: Obj) -> Obj:
    return find_condition(ac, "Active") or {}


def reason_is(reason: str) -> Any:
    return lambda ac: (find_condition(ac, "Active") or {}).get("reason") == reason


async def test_start_comes_before_any_evaluation_and_stop_with_the_runner(kueue: KueueCluster) -> None:
    gate = Gate()
    await kueue.cluster_queue("cq", checks=[{"name": "gate"}])
    await kueue.admission_check("gate", Gate.controller_name)
    wl = await kueue.workload("w1")
    await kueue.reserve(wl, "cq")
    async with kueue.running([gate]):
        await kueue.wait_for(WORKLOADS, NAMESPACE, "w1", has_state("gate", "Ready"))
        assert gate.log[0] == "start" and "evaluate" in gate.log and "stop" not in gate.log
    assert gate.log[-1] == "stop" and gate.log.count("start") == gate.log.count("stop") == 1


async def test_the_plugin_decides_active_and_it_follows_the_watched_kind(kueue: KueueCluster) -> None:
    gate = Gate()
    await kueue.create(NAMESPACES, {"metadata": {"name": "elsewhere"}})
    # Open in another namespace: the plugin watches only its own, so this neither counts nor shows.
    await kueue.create(CONFIG_MAPS, {"metadata": {"name": "gate", "namespace": "elsewhere"},
                                     "data": {"open": "yes"}})
    await kueue.admission_check("gate", Gate.controller_name)
    async with kueue.running([gate]):
        ac = await kueue.wait_for(ADMISSION_CHECKS, None, "gate", reason_is("GateClosed"))
        assert active_of(ac)["status"] == "False"
        await kueue.create(CONFIG_MAPS, {"metadata": {"name": "gate", "namespace": NAMESPACE},
                                         "data": {"open": "yes"}})
        ac = await kueue.wait_for(ADMISSION_CHECKS, None, "gate", reason_is("GateOpen"))
        assert active_of(ac)["status"] == "True"
        assert active_of(ac)["message"] == "the gate is open"
        closed = await kueue.get(CONFIG_MAPS, NAMESPACE, "gate")
        closed["data"] = {"open": "no"}
        await kueue.api.replace(CONFIG_MAPS, closed)
        await kueue.wait_for(ADMISSION_CHECKS, None, "gate", reason_is("GateClosed"))
    assert gate.seen_namespaces == {NAMESPACE}


class BrokenStart(Gate):
    controller_name = "test.kadmit.dev/broken-start"

    async def start(self, cluster: ClusterView) -> None:
        raise ConnectionError("cannot reach the approval service")


async def test_a_plugin_failing_to_start_fails_the_runner_and_stops_the_others(kueue: KueueCluster) -> None:
    gate, broken = Gate(), BrokenStart()
    with pytest.raises(ConnectionError, match="cannot reach the approval service"):
        async with kueue.running([gate, broken]):
            pass
    assert gate.log == ["start", "stop"]


def test_a_namespaced_watch_is_required_and_checked_in_its_namespace_only() -> None:
    kinds = {kind.plural: kind.path(namespace) for kind, namespace in required_watches([Gate()])}
    assert kinds["configmaps"] == "/api/v1/namespaces/team/configmaps"
    assert kinds["workloads"] == "/apis/kueue.x-k8s.io/v1beta2/workloads"

    class Everywhere(Gate):
        controller_name = "test.kadmit.dev/everywhere"

        def __init__(self) -> None:
            super().__init__()
            self.namespaced_watches = {}

    # Another plugin wants every ConfigMap: one cluster-wide watch serves both.
    watches = required_watches([Gate(), Everywhere()])
    kinds = {kind.plural: kind.path(namespace) for kind, namespace in watches}
    assert kinds["configmaps"] == "/api/v1/configmaps"
