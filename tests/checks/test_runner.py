"""The runner against a real API server: Active conditions, check states, conflicts, errors, timers."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

from kadmit.checks.plugin import AdmissionCheckPlugin, CheckContext, ClusterView, ParametersError
from kadmit.checks.verdict import Pending, PodSetUpdate, Ready, Verdict
from kadmit.kube import Resource
from kadmit.kube.resources import ADMISSION_CHECKS, EVENTS, PROVISIONING_REQUEST_CONFIGS, WORKLOADS
from tests.checks.conftest import NAMESPACE, KueueCluster, active_is, has_state, state_of

Obj = dict[str, Any]
Action = Verdict | Exception | float | Callable[[int], Verdict]


class Scripted(AdmissionCheckPlugin[Any]):
    """Answers per workload name what the test scripted; Ready("ok") by default."""

    controller_name = "test.kadmit.dev/scripted"

    def __init__(self) -> None:
        self.actions: dict[str, Action] = {}
        self.calls: Counter[str] = Counter()
        self.released: list[str] = []
        self.parameters_seen: list[Any] = []

    async def evaluate(self, workload: Obj, context: CheckContext[Any]) -> Verdict:
        name = workload["metadata"]["name"]
        self.calls[name] += 1
        self.parameters_seen.append(context.parameters)
        action = self.actions.get(name, Ready("ok"))
        if isinstance(action, Exception):
            raise action
        if isinstance(action, float):
            await asyncio.sleep(action)
            return Ready("slow but sure")
        if callable(action):
            return action(self.calls[name])
        return action

    async def release(self, workload: Obj, cluster: ClusterView) -> None:
        self.released.append(workload["metadata"]["name"])


class WithParameters(Scripted):
    controller_name = "test.kadmit.dev/with-parameters"
    parameters_kind: Resource | None = PROVISIONING_REQUEST_CONFIGS

    def parse_parameters(self, obj: Obj) -> str:
        name = (obj.get("spec") or {}).get("provisioningClassName", "")
        if name == "bad.example.com":
            raise ParametersError("bad.example.com is not allowed")
        return str(name)


async def test_owned_checks_become_active_and_get_states_while_others_are_left_alone(
    kueue: KueueCluster,
) -> None:
    plugin = Scripted()
    await kueue.admission_check("mine", plugin.controller_name)
    await kueue.admission_check("theirs", "example.com/someone-else")
    await kueue.admission_check("gpu-only", plugin.controller_name)
    await kueue.cluster_queue(
        "cq",
        [{"name": "mine"}, {"name": "theirs"}, {"name": "gpu-only", "onFlavors": ["gpu"]}],
        flavors=("default", "gpu"),
    )
    waiting = await kueue.workload("waiting")
    reserved = await kueue.workload("reserved")
    async with kueue.running([plugin]):
        await kueue.wait_for(ADMISSION_CHECKS, None, "mine", active_is("True"))
        await kueue.reserve(reserved, "cq", flavor="default")
        wl = await kueue.wait_for(WORKLOADS, NAMESPACE, "reserved", has_state("mine", "Ready"))
        ac = await kueue.get(ADMISSION_CHECKS, None, "mine")
        event = await kueue.wait_for(
            EVENTS, NAMESPACE, None, lambda e: e["reason"] == "AdmissionCheckUpdated"
        )
    [active] = ac["status"]["conditions"]
    assert (active["reason"], active["message"]) == ("Active", "The admission check is active")
    assert "status" not in await kueue.get(ADMISSION_CHECKS, None, "theirs") or not (
        await kueue.get(ADMISSION_CHECKS, None, "theirs")
    )["status"].get("conditions")
    entry = state_of(wl, "mine")
    assert entry is not None and entry["message"] == "ok" and entry["lastTransitionTime"]
    assert state_of(wl, "theirs") is None  # another controller's check: never written by us
    assert state_of(wl, "gpu-only") is None  # onFlavors [gpu], the workload got "default"
    assert event["message"] == "Admission check mine updated state from Pending to Ready with message: ok"
    assert event["involvedObject"]["name"] == "reserved" and event["involvedObject"]["kind"] == "Workload"
    assert plugin.calls["waiting"] == 0  # no quota reserved: nothing to check
    assert state_of(await kueue.get(WORKLOADS, NAMESPACE, waiting["metadata"]["name"]), "mine") is None


class Quiet(Scripted):
    """Tells users itself, as Kueue's MultiKueue does: no AdmissionCheckUpdated Events."""

    controller_name = "test.kadmit.dev/quiet"
    state_events = False


async def test_a_plugin_may_leave_the_state_events_out(kueue: KueueCluster) -> None:
    loud, quiet = Scripted(), Quiet()
    await kueue.admission_check("loud", loud.controller_name)
    await kueue.admission_check("quiet", quiet.controller_name)
    await kueue.cluster_queue("cq", [{"name": "quiet"}, {"name": "loud"}])
    wl = await kueue.workload("both")
    async with kueue.running([loud, quiet]):
        await kueue.wait_for(ADMISSION_CHECKS, None, "quiet", active_is("True"))
        await kueue.wait_for(ADMISSION_CHECKS, None, "loud", active_is("True"))
        await kueue.reserve(wl, "cq")
        both_ready = lambda w: has_state("loud", "Ready")(w) and has_state("quiet", "Ready")(w)  # noqa: E731
        done = await kueue.wait_for(WORKLOADS, NAMESPACE, "both", both_ready)
        await kueue.wait_for(EVENTS, NAMESPACE, None, lambda e: "check loud updated" in e["message"])
    assert state_of(done, "quiet") is not None
    events = await kueue.listed(EVENTS, NAMESPACE)
    told = [e["message"] for e in events if e["reason"] == "AdmissionCheckUpdated"]
    assert told == ["Admission check loud updated state from Pending to Ready with message: ok"]


async def test_a_plugin_that_raises_or_hangs_yields_pending_and_the_runner_goes_on(
    kueue: KueueCluster,
) -> None:
    plugin = Scripted()
    plugin.actions = {
        "boom": RuntimeError("the budget service is down"),
        "slow": 30.0,
        "typo": Ready("", (PodSetUpdate("mian", labels={"a": "b"}),)),
    }
    await kueue.admission_check("mine", plugin.controller_name)
    await kueue.cluster_queue("cq", [{"name": "mine"}])
    workloads = [await kueue.workload(name) for name in ("boom", "slow", "fine", "typo")]
    async with kueue.running([plugin], call_timeout=0.5):
        for wl in workloads:
            await kueue.reserve(wl, "cq")
        boom = await kueue.wait_for(WORKLOADS, NAMESPACE, "boom", has_state("mine", "Pending"))
        slow = await kueue.wait_for(WORKLOADS, NAMESPACE, "slow", has_state("mine", "Pending"))
        await kueue.wait_for(WORKLOADS, NAMESPACE, "fine", has_state("mine", "Ready"))
        typo = await kueue.wait_for(WORKLOADS, NAMESPACE, "typo", has_state("mine", "Pending"))
    assert (state_of(typo, "mine") or {})[
        "message"
    ] == "check mine returned podSetUpdates for unknown pod sets: mian"
    assert (state_of(boom, "mine") or {})[
        "message"
    ] == "check mine failed: RuntimeError: the budget service is down"
    assert (state_of(slow, "mine") or {})["message"] == "check mine timed out after 0.5s"


async def test_a_concurrent_writer_is_never_overwritten(kueue: KueueCluster) -> None:
    plugin = Scripted()
    plugin.actions = {"contended": 0.6}  # slow enough for another controller to write meanwhile
    await kueue.admission_check("mine", plugin.controller_name)
    await kueue.admission_check("theirs", "example.com/someone-else")
    await kueue.cluster_queue("cq", [{"name": "mine"}, {"name": "theirs"}])
    wl = await kueue.workload("contended")
    async with kueue.running([plugin]) as runner:
        await kueue.reserve(wl, "cq")
        await asyncio.sleep(0.2)

        def theirs_ready(status: Obj) -> None:
            status["admissionChecks"] = [
                e for e in status.get("admissionChecks") or [] if e["name"] != "theirs"
            ]
            status["admissionChecks"].append(
                {
                    "name": "theirs",
                    "state": "Ready",
                    "message": "from the other one",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            )

        await kueue.update_status(WORKLOADS, NAMESPACE, "contended", theirs_ready)
        done = await kueue.wait_for(WORKLOADS, NAMESPACE, "contended", has_state("mine", "Ready"))
        assert runner.conflicts >= 1
    assert (state_of(done, "theirs") or {}).get("message") == "from the other one"
    assert [e["name"] for e in done["status"]["admissionChecks"]] == ["mine", "theirs"]


async def _run_to_release(kueue: KueueCluster, plugin: Scripted, wl: Obj) -> None:
    """Reserve ``wl`` in ClusterQueue ``cq``, wait for check ``mine`` to be Ready, finish the
    workload and wait (up to 5 s) for the plugin to be told to release it."""
    name = wl["metadata"]["name"]
    await kueue.reserve(wl, "cq")
    await kueue.wait_for(WORKLOADS, NAMESPACE, name, has_state("mine", "Ready"))
    await kueue.set_condition(
        WORKLOADS, NAMESPACE, name, {"type": "Finished", "status": "True", "reason": "Succeeded"}
    )
    for _ in range(50):
        if plugin.released:
            break
        await asyncio.sleep(0.1)


async def test_pending_with_recheck_after_is_evaluated_again_and_release_follows_finish(
    kueue: KueueCluster,
) -> None:
    plugin = Scripted()
    plugin.actions = {
        "later": lambda calls: Pending("not yet", recheck_after=0.3) if calls == 1 else Ready("now")
    }
    await kueue.admission_check("mine", plugin.controller_name)
    await kueue.cluster_queue("cq", [{"name": "mine"}])
    wl = await kueue.workload("later")
    async with kueue.running([plugin]):
        await _run_to_release(kueue, plugin, wl)
    assert plugin.calls["later"] == 2
    assert plugin.released == ["later"]


async def test_a_finished_workload_is_released_once_whatever_follows(kueue: KueueCluster) -> None:
    """A finished workload keeps its check entries: the events after its release (another status
    write, its deletion) must not release it again in the plugin that evaluated it."""
    plugin = Scripted()
    await kueue.admission_check("mine", plugin.controller_name)
    await kueue.cluster_queue("cq", [{"name": "mine"}])
    wl = await kueue.workload("done")
    async with kueue.running([plugin]):
        await _run_to_release(kueue, plugin, wl)
        assert plugin.released == ["done"]
        await kueue.set_condition(
            WORKLOADS, NAMESPACE, "done", {"type": "Evicted", "status": "True", "reason": "Whatever"}
        )
        await kueue.api.delete(WORKLOADS, NAMESPACE, "done")
        await kueue.wait_gone(WORKLOADS, NAMESPACE, "done")
        await asyncio.sleep(0.5)  # the syncs of both events: the old code released on each, at once
    assert plugin.released == ["done"]


async def test_parameters_are_resolved_and_a_bad_reference_makes_the_check_inactive(
    kueue: KueueCluster,
) -> None:
    plugin = WithParameters()
    ref = {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig", "name": "cfg"}
    await kueue.admission_check("no-ref", plugin.controller_name)
    await kueue.admission_check("with-ref", plugin.controller_name, ref)
    await kueue.cluster_queue("cq", [{"name": "with-ref"}])
    wl = await kueue.workload("wl")
    async with kueue.running([plugin]):
        no_ref = await kueue.wait_for(ADMISSION_CHECKS, None, "no-ref", active_is("False"))
        missing = await kueue.wait_for(ADMISSION_CHECKS, None, "with-ref", active_is("False"))
        await kueue.reserve(wl, "cq")
        pending = await kueue.wait_for(WORKLOADS, NAMESPACE, "wl", has_state("with-ref", "Pending"))
        await kueue.create(
            PROVISIONING_REQUEST_CONFIGS,
            {"metadata": {"name": "cfg"}, "spec": {"provisioningClassName": "good.example.com"}},
        )
        await kueue.wait_for(ADMISSION_CHECKS, None, "with-ref", active_is("True"))
        await kueue.wait_for(WORKLOADS, NAMESPACE, "wl", has_state("with-ref", "Ready"))
    assert no_ref["status"]["conditions"][0]["reason"] == "BadParametersRef"
    assert no_ref["status"]["conditions"][0]["message"] == "missing parameters reference"
    assert (
        missing["status"]["conditions"][0]["message"]
        == 'provisioningrequestconfigs.kueue.x-k8s.io "cfg" not found'
    )
    assert (state_of(pending, "with-ref") or {})["message"] == "the check is not active"
    assert plugin.parameters_seen[-1] == "good.example.com"


class ExternalApproval(AdmissionCheckPlugin[None]):
    """Approvals arrive from outside the cluster (a ticketing system): no watch shows them."""

    controller_name = "test.kadmit.dev/approval"

    def __init__(self) -> None:
        self.approved: set[str] = set()
        self.cluster: ClusterView | None = None

    async def evaluate(self, workload: Obj, context: CheckContext[None]) -> Verdict:
        self.cluster = context.cluster
        if workload["metadata"]["name"] in self.approved:
            return Ready("approved by the ticket system")
        return Pending("waiting for approval")

    def approve(self, namespace: str, name: str) -> None:
        self.approved.add(name)
        assert self.cluster is not None
        self.cluster.requeue(namespace, name)


async def test_a_plugin_can_ask_for_an_evaluation_when_something_outside_the_cluster_changed(
    kueue: KueueCluster,
) -> None:
    plugin = ExternalApproval()
    await kueue.admission_check("approval", plugin.controller_name)
    await kueue.cluster_queue("cq", [{"name": "approval"}])
    wl = await kueue.workload("ticketed")
    async with kueue.running([plugin], resync_period=3600):
        await kueue.reserve(wl, "cq")
        await kueue.wait_for(WORKLOADS, NAMESPACE, "ticketed", has_state("approval", "Pending"))
        plugin.approve(NAMESPACE, "ticketed")
        await kueue.wait_for(WORKLOADS, NAMESPACE, "ticketed", has_state("approval", "Ready"), within=5.0)


async def test_every_evaluation_is_told_even_unchanged_and_a_failing_observer_changes_nothing(
    kueue: KueueCluster,
) -> None:
    plugin = Scripted()
    plugin.actions = {
        "steady": lambda calls: Pending("waiting", recheck_after=0.2) if calls < 3 else Ready("done")
    }
    told: list[tuple[str, str, str]] = []

    def observe(wl: Obj, entry: Obj) -> None:
        told.append((wl["metadata"]["name"], entry["state"], entry["message"]))
        raise RuntimeError("a bug in the observer")

    await kueue.admission_check("mine", plugin.controller_name)
    await kueue.cluster_queue("cq", [{"name": "mine"}])
    wl = await kueue.workload("steady")
    async with kueue.running([plugin], on_evaluated=observe):
        await kueue.reserve(wl, "cq")
        await kueue.wait_for(WORKLOADS, NAMESPACE, "steady", has_state("mine", "Ready"))
    # the second Pending changed nothing (no write), yet the observer heard of it
    assert told.count(("steady", "Pending", "waiting")) >= 2
    assert told[-1] == ("steady", "Ready", "done")


class CountingPace:
    """A pace that lets every event go and counts them."""

    def __init__(self) -> None:
        self.waits = 0

    async def wait(self) -> None:
        self.waits += 1


class Telling(Scripted):
    """Tells the user about each evaluation through the plugin's own view of the cluster."""

    controller_name = "test.kadmit.dev/telling"

    async def evaluate(self, workload: Obj, context: CheckContext[Any]) -> Verdict:
        context.cluster.events.emit(workload, "Normal", "FromPlugin", "looked at it")
        return await super().evaluate(workload, context)


async def test_the_runner_and_its_plugins_tell_events_through_one_recorder_at_its_pace(
    kueue: KueueCluster,
) -> None:
    """`kadmit run` hands the runner its controllers' event budget: the plugins' events spend it too."""
    plugin = Telling()
    pace = CountingPace()
    await kueue.admission_check("told", plugin.controller_name)
    await kueue.cluster_queue("cq", [{"name": "told"}], flavors=("default",))
    wl = await kueue.workload("told")
    async with kueue.running([plugin], event_pace=pace) as runner:
        assert runner.cluster.events is runner.events
        await kueue.reserve(wl, "cq", flavor="default")
        await kueue.wait_for(WORKLOADS, NAMESPACE, "told", has_state("told", "Ready"))
        for reason in ("FromPlugin", "AdmissionCheckUpdated"):
            await kueue.wait_for(EVENTS, NAMESPACE, None, lambda e, r=reason: e["reason"] == r)
    assert pace.waits >= 2


class SlowPace:
    """A pace that holds each event back a while, as a spent budget does."""

    async def wait(self) -> None:
        await asyncio.sleep(0.3)


async def test_the_events_told_before_a_stop_are_written_by_the_time_it_returns(kueue: KueueCluster) -> None:
    plugin = Telling()
    await kueue.admission_check("told", plugin.controller_name)
    await kueue.cluster_queue("cq", [{"name": "told"}], flavors=("default",))
    wl = await kueue.workload("told")
    async with kueue.running([plugin], event_pace=SlowPace()):
        await kueue.reserve(wl, "cq", flavor="default")
        await kueue.wait_for(WORKLOADS, NAMESPACE, "told", has_state("told", "Ready"))
    reasons = {e["reason"] for e in await kueue.listed(EVENTS, NAMESPACE)}
    assert {"FromPlugin", "AdmissionCheckUpdated"} <= reasons
