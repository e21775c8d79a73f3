"""A workload that finishes while it is being preempted keeps no quota: the race, many times.

The preemption's change is judged on the newest copy of the Workload: a finished one is never
evicted, and the quota a finished workload held goes back at once. Checked after every round
through the engine's own books and the API (a finished workload is charged nowhere), and at the
end: nothing is reserved once everything finished.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from kadmit.controller.manager import Manager
from kadmit.kube import Conflict
from kadmit.kube.resources import WORKLOADS
from tests.e2e.conftest import Env, eventually
from tests.e2e.helpers import apply_small_setup

Obj = dict[str, Any]
ROUNDS = 12


PRIORITIES = {"low": 10, "high": 1000}  # the WorkloadPriorityClasses of the small setup


def workload(name: str, priority_class: str) -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "queueName": "small",
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                 "name": priority_class},
            "priority": PRIORITIES[priority_class],
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
            }}}],
        },
    }


def true(obj: Obj, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


async def finish(env: Env, name: str, delay: float) -> None:
    """What a job's controller does when the job is done: Finished=True, with conflict retries."""
    await asyncio.sleep(delay)
    while True:
        wl = await env.kube.get(WORKLOADS, "default", name)
        if true(wl, "Finished"):
            return
        conditions = list(wl["status"].get("conditions") or [])
        conditions.append({"type": "Finished", "status": "True", "reason": "Succeeded",
                           "message": "done", "lastTransitionTime": "2026-11-25T00:00:00Z"})
        wl["status"]["conditions"] = conditions
        try:
            await env.kube.replace_status(WORKLOADS, wl)
            return
        except Conflict:
            continue


def no_finished_workload_holds_quota(manager: Manager) -> None:
    """The invariant: a Workload the API says is Finished is charged nowhere in the engine."""
    for wl in manager.workloads.list():
        if true(wl, "Finished"):
            meta = wl["metadata"]
            held = manager.engine.status(meta["namespace"], meta["name"]).cluster_queue
            assert held is None, f"finished {meta['name']} still holds quota in {held}"


async def test_finish_and_preemption_race_leaves_no_quota_held(env: Env) -> None:
    manager = await env.start_manager()
    await apply_small_setup(env)
    rng = random.Random(7)
    violations: list[str] = []

    def never_evicted_once_finished(event: str, new: Obj, old: Obj | None) -> None:
        """Checked on every committed change, in the API's order."""
        if old is not None and true(old, "Finished") and true(new, "Evicted") and not true(old, "Evicted"):
            violations.append(new["metadata"]["name"])

    manager.workloads.add_handler(never_evicted_once_finished)
    raced: list[str] = []
    writes = manager.scheduler.writes
    replace = writes.client.replace

    async def finish_first(resource: Any, obj: Obj, *, subresource: str | None = None) -> Obj:
        """Half of the preemptions meet a victim that finished an instant before they land."""
        name = obj["metadata"]["name"]
        if name.startswith("low-") and true(obj, "Evicted") and name not in raced and rng.random() < 0.5:
            raced.append(name)
            await finish(env, name, 0.0)
        return await replace(resource, obj, subresource=subresource)

    writes.client = _Intercepted(writes.client, finish_first)  # type: ignore[assignment]
    for round_ in range(ROUNDS):
        lows = [f"low-{round_}-{i}" for i in range(4)]  # the ClusterQueue's 4 cpu, full
        for name in lows:
            await env.kube.create(WORKLOADS, workload(name, "low"))

        def all_reserved(names: list[str] = lows) -> bool:
            found = [manager.workloads.get("default", n) for n in names]
            return all(wl is not None and true(wl, "Admitted") for wl in found)

        await eventually(lambda: _value(all_reserved()), what=f"round {round_}: the low workloads admitted")
        high = f"high-{round_}"
        await env.kube.create(WORKLOADS, workload(high, "high"))  # preempts one of them

        def admitted(name: str = high) -> bool:
            wl = manager.workloads.get("default", name)
            return wl is not None and true(wl, "Admitted")

        def decided(names: list[str] = lows) -> bool:
            """The high one got in (its victim finished first) or a low one is being evicted."""
            evicted = (true(manager.workloads.get("default", n) or {}, "Evicted") for n in names)
            return admitted() or any(evicted)

        await eventually(lambda: _value(decided()), what=f"round {round_}: the preemption decided")
        # Standalone Workloads have no job to stop: the evicted one's "job" completes instead.
        await asyncio.gather(*(finish(env, name, rng.uniform(0.0, 0.02)) for name in lows))
        await eventually(lambda: _value(admitted()), what=f"round {round_}: the high workload admitted")
        no_finished_workload_holds_quota(manager)
        assert not violations, f"evicted after they finished: {violations}"
        await finish(env, high, 0.0)
    await eventually(lambda: _value(manager.engine.reservation_count() == 0),
                     what="every reservation released")
    no_finished_workload_holds_quota(manager)
    assert len(raced) >= ROUNDS // 4, raced  # the race did happen, several times


class _Intercepted:
    """The pipeline's client, with its status PUTs going through ``replace`` first."""

    def __init__(self, client: Any, replace: Any) -> None:
        self._client = client
        self.replace = replace

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


async def _value(value: bool) -> bool:
    return value
