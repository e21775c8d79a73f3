"""The plugin authors' testing kit: a real ``kadmit local`` subprocess, plugins run in this process.

One kit serves the module (starting kadmit local costs seconds); the tests that need a kit of
their own are the ones about starting and stopping it.
"""

from __future__ import annotations

import re
import signal
import tempfile
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from kadmit.checks import (
    AdmissionCheckPlugin,
    CheckContext,
    ParametersError,
    Pending,
    PodSetUpdate,
    Ready,
    Rejected,
    Resource,
    Verdict,
)
from kadmit.checks.testing import LocalKueue, LocalKueueError
from kadmit.kube.resources import ADMISSION_CHECKS

Obj = dict[str, Any]
NOON = datetime(2030, 6, 3, 12, 0, tzinfo=UTC)
BUDGETS = Resource("example.com", "v1", "budgets", "Budget", namespaced=False)
BUDGET_CRD: Obj = {
    "metadata": {"name": "budgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Cluster",
        "names": {"plural": "budgets", "singular": "budget", "kind": "Budget", "listKind": "BudgetList"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


def pods_of(workload: Obj) -> int:
    return sum(int(ps.get("count", 1)) for ps in workload["spec"]["podSets"])


class Stamp(AdmissionCheckPlugin[None]):
    """Ready with the time it saw and a label for the pods; holds workloads of five pods or more."""

    controller_name = "test.kadmit.dev/stamp"

    async def evaluate(self, workload: Obj, context: CheckContext[None]) -> Verdict:
        if pods_of(workload) >= 5:
            return Pending(f"holding {pods_of(workload)} pods")
        update = PodSetUpdate(name="main", labels={"stamped": "yes"})
        return Ready(f"seen at {context.now.isoformat()}", pod_set_updates=(update,))


class Budget(AdmissionCheckPlugin[int]):
    """Reads its limit from a Budget object, a kind kadmit does not install."""

    controller_name = "test.kadmit.dev/budget"
    parameters_kind = BUDGETS

    def parse_parameters(self, obj: Obj) -> int:
        limit = (obj.get("spec") or {}).get("maxPods")
        if not isinstance(limit, int):
            raise ParametersError("spec.maxPods must be an integer")
        return limit

    async def evaluate(self, workload: Obj, context: CheckContext[int]) -> Verdict:
        assert context.parameters is not None
        if pods_of(workload) > context.parameters:
            return Rejected(f"{pods_of(workload)} pods exceed the budget of {context.parameters}")
        return Ready("within budget")


pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kueue() -> AsyncIterator[LocalKueue]:
    async with LocalKueue(Stamp(), Budget(), clock=NOON.timestamp, crds=[BUDGET_CRD]) as kueue:
        await kueue.admission_check("stamp", controller_name=Stamp.controller_name)
        await kueue.admission_check("budget", controller_name=Budget.controller_name,
                                    parameters={"spec": {"maxPods": 2}})
        await kueue.cluster_queue("stamped", checks=["stamp"])
        await kueue.cluster_queue("budgeted", checks=["budget"])
        directory = kueue.kubeconfig.parent
        yield kueue
    assert not directory.exists(), "the kit left its files behind"


async def test_a_ready_verdict_admits_and_the_job_starts_with_its_pod_set_updates(kueue: LocalKueue) -> None:
    wl = await kueue.submit_job("ready", pods=2, queue="stamped")
    entry = await kueue.check_state(wl, "stamp")
    assert (entry["state"], entry["message"]) == ("Ready", f"seen at {NOON.isoformat()}")
    assert entry["podSetUpdates"] == [{"name": "main", "labels": {"stamped": "yes"}}]
    await kueue.admitted(wl)
    job = await kueue.started(wl)
    assert job["spec"]["template"]["metadata"]["labels"]["stamped"] == "yes"


async def test_the_clock_can_move_between_jobs(kueue: LocalKueue) -> None:
    later = NOON.replace(hour=18)
    kueue.clock = later.timestamp
    try:
        wl = await kueue.submit_job("later", queue="stamped")
        assert (await kueue.check_state(wl, "stamp"))["message"] == f"seen at {later.isoformat()}"
    finally:
        kueue.clock = NOON.timestamp


async def test_parameters_come_from_an_object_of_the_plugins_own_kind(kueue: LocalKueue) -> None:
    budget = await kueue.client.get(BUDGETS, None, "budget")
    check = await kueue.client.get(ADMISSION_CHECKS, None, "budget")
    assert budget["spec"] == {"maxPods": 2}
    assert check["spec"]["parameters"] == {"apiGroup": "example.com", "kind": "Budget", "name": "budget"}
    small, big = (await kueue.submit_job("small", pods=2, queue="budgeted"),
                  await kueue.submit_job("big", pods=3, queue="budgeted"))
    assert (await kueue.check_state(small, "budget"))["state"] == "Ready"
    rejected = await kueue.check_state(big, "budget")
    assert (rejected["state"], rejected["message"]) == ("Rejected", "3 pods exceed the budget of 2")


async def test_a_decided_pending_is_told_and_a_wait_that_fails_says_what_it_saw(kueue: LocalKueue) -> None:
    wl = await kueue.submit_job("held", pods=5, queue="stamped")
    entry = await kueue.check_state(wl, "stamp")
    assert (entry["state"], entry["message"]) == ("Pending", "holding 5 pods")
    name = wl["metadata"]["name"]
    with pytest.raises(AssertionError) as failed:
        await kueue.admitted(wl, within=0.3)
    assert str(failed.value).startswith(f"waited 0.3s for Workload default/{name}: admitted; last seen: ")
    assert "QuotaReserved=True" in str(failed.value)
    assert "stamp=Pending (holding 5 pods)" in str(failed.value)


async def test_a_check_no_plugin_under_test_decides_is_reported_as_such(kueue: LocalKueue) -> None:
    await kueue.admission_check("foreign", controller_name="example.com/nobody")
    await kueue.cluster_queue("foreign", checks=["foreign"])
    wl = await kueue.submit_job("orphan", queue="foreign")
    with pytest.raises(AssertionError, match="no plugin under test evaluated it"):
        await kueue.check_state(wl, "foreign", within=0.3)
    with pytest.raises(ValueError, match="pass queue="):
        await kueue.submit_job("which")


@pytest.fixture
def temporary_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


async def test_a_kadmit_that_cannot_start_is_an_error_with_its_stderr(temporary_files: Path) -> None:
    with pytest.raises(LocalKueueError, match=r"(?s)exited with code 1 before it was ready; its stderr "
                                              r"ends with:\n.*unknown field 'surprise'"):
        async with LocalKueue(Stamp(), configuration={"surprise": True}):
            pass
    assert not any(temporary_files.iterdir())  # noqa: ASYNC240


async def test_a_kadmit_that_is_not_ready_in_time_is_stopped(temporary_files: Path) -> None:
    with pytest.raises(LocalKueueError, match=r"printed no ready line within 0\.1s"):
        async with LocalKueue(Stamp(), startup_timeout=0.1):
            pass
    assert not any(temporary_files.iterdir())  # noqa: ASYNC240


async def test_a_kind_the_cluster_does_not_serve_names_the_missing_crd() -> None:
    with pytest.raises(LocalKueueError, match=re.escape(
            f"the cluster does not serve {BUDGETS}, which a plugin reads: pass its "
            "CustomResourceDefinition as LocalKueue(crds=[...])")):
        async with LocalKueue(Budget()):
            pass


async def test_a_kadmit_that_dies_during_the_test_fails_the_waits_and_the_exit() -> None:
    with pytest.raises(LocalKueueError, match="exited with code -9 during the test"):
        async with LocalKueue(Stamp()) as kueue:
            await kueue.cluster_queue("cq", checks=["stamp"])
            wl = await kueue.submit_job("held", pods=5)
            assert kueue._process is not None
            kueue._process.send_signal(signal.SIGKILL)
            with pytest.raises(LocalKueueError, match=r"while waiting for Workload .*: admitted: kadmit "
                                                      r"local exited with code -9"):
                await kueue.admitted(wl)
