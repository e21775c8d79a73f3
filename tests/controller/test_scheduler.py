"""Assume, then write in the background: a reservation that does not land is forgotten, so quota is
never promised twice; a change whose decision no longer fits the Workload declines."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from kadmit.controller.scheduler import Scheduler
from kadmit.engine import Decisions, Engine
from kadmit.kube import Conflict, Resource, ServerError
from tests.kube.pacing import Gate, until

Obj = dict[str, Any]
NOW = 1_700_000_000.0


class Store:
    """The API server's copy of the Workloads, with resourceVersions and injectable conflicts."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], Obj] = {}
        self.conflicts: set[str] = set()
        self.failures: set[str] = set()
        self.writes = 0

    def put(self, obj: Obj) -> None:
        obj["metadata"]["resourceVersion"] = str(len(self.objects) + 100)
        self.objects[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj

    # the Kube surface the scheduler uses
    async def replace(self, resource: Resource, obj: Obj, *, subresource: str | None = None) -> Obj:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if key[1] in self.conflicts:
            self.conflicts.discard(key[1])
            raise Conflict(409, "Conflict", "the object has been modified")
        if key[1] in self.failures:
            self.failures.discard(key[1])
            raise ServerError(500, "InternalError", "etcd is having a bad day")
        stored = self.objects[key]
        if stored["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]:
            raise Conflict(409, "Conflict", "stale resourceVersion")
        new = copy.deepcopy(obj)
        new["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) + 1)
        self.objects[key] = new
        self.writes += 1
        return copy.deepcopy(new)

    async def get(self, resource: Resource, namespace: str | None, name: str) -> Obj:
        return copy.deepcopy(self.objects[(namespace or "", name)])

    # the Informer surface
    def get_cached(self, namespace: str | None, name: str) -> Obj | None:
        found = self.objects.get((namespace or "", name))
        return copy.deepcopy(found) if found else None


class Cache:
    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, namespace: str | None, name: str) -> Obj | None:
        return self.store.get_cached(namespace, name)


def workload(name: str, created: str) -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns", "uid": name, "creationTimestamp": created},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}
                    },
                }
            ],
        },
    }


def setup() -> tuple[Engine, Store, Scheduler]:
    engine = Engine()
    engine.upsert(
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    )
    engine.upsert(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4"}]}],
                    }
                ],
            },
        }
    )
    engine.upsert(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"},
        }
    )
    store = Store()
    for wl in (workload("a", "2026-01-01T00:00:00Z"), workload("b", "2026-01-01T00:00:01Z")):
        store.put(wl)
        engine.upsert_workload(copy.deepcopy(wl))
    scheduler = Scheduler(engine, store, Cache(store), clock=lambda: NOW)  # type: ignore[arg-type]
    return engine, store, scheduler


def reserved(store: Store) -> list[str]:
    return sorted(n for (_, n), o in store.objects.items() if (o.get("status") or {}).get("admission"))


async def cycle(scheduler: Scheduler) -> Decisions:
    """One cycle and the writes it decided (the scheduler itself never waits for them)."""
    if not scheduler.writes.running:
        await scheduler.writes.start()
    decisions = await scheduler.cycle()
    await scheduler.settled()
    return decisions


async def test_a_failed_reservation_write_is_forgotten_and_retried() -> None:
    engine, store, scheduler = setup()
    store.failures.add("a")
    decisions = await cycle(scheduler)
    assert [r.workload for r in decisions.reservations] == [("ns", "a")]
    assert reserved(store) == []
    assert engine.reservation_count() == 0  # the assumption was dropped
    decisions = await cycle(scheduler)
    assert [r.workload for r in decisions.reservations] == [("ns", "a")]
    assert reserved(store) == ["a"]
    assert engine.reservation_count() == 1
    await cycle(scheduler)
    assert reserved(store) == ["a"]  # b does not fit: never two reservations for 4 CPUs
    b = store.objects[("ns", "b")]
    [quota] = [c for c in b["status"]["conditions"] if c["type"] == "QuotaReserved"]
    assert quota["status"] == "False"
    assert "insufficient unused quota" in quota["message"]


async def test_a_conflict_is_judged_again_on_the_fresh_copy() -> None:
    engine, store, scheduler = setup()
    store.conflicts.add("a")  # someone wrote "a" meanwhile, without changing what the decision needs
    await cycle(scheduler)
    assert reserved(store) == ["a"]
    assert scheduler.writes.conflicts == 1
    assert engine.reservation_count() == 1


async def test_a_reservation_declines_on_a_workload_that_changed_under_it() -> None:
    engine, store, scheduler = setup()
    # After the engine saw "a", its spec changed (a new generation): the decision no longer fits it.
    stale = copy.deepcopy(store.objects[("ns", "a")])
    store.objects[("ns", "a")]["metadata"]["resourceVersion"] = "999"
    store.objects[("ns", "a")]["metadata"]["generation"] = 2

    class StaleCache(Cache):
        def get(self, namespace: str | None, name: str) -> Obj | None:
            return copy.deepcopy(stale) if name == "a" else super().get(namespace, name)

    scheduler.workloads = StaleCache(store)  # type: ignore[assignment]
    scheduler.writes._written._read = scheduler.workloads.get
    await cycle(scheduler)
    assert reserved(store) == []
    assert engine.reservation_count() == 0


async def test_a_finished_workload_is_never_preempted() -> None:
    """Finish and preempt race: the preemption's change declines on the finished copy, whatever
    order the two writes land in, and the finished Workload keeps no quota."""
    from kadmit.engine import Preemption

    engine, store, scheduler = setup()
    await cycle(scheduler)
    assert reserved(store) == ["a"]
    before_finish = copy.deepcopy(store.objects[("ns", "a")])
    a = store.objects[("ns", "a")]
    a["metadata"]["resourceVersion"] = str(int(a["metadata"]["resourceVersion"]) + 1)
    a["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded",
                                      "message": "", "lastTransitionTime": "2026-01-01T00:00:09Z"})

    class NotYetFinished(Cache):  # the informer has not delivered the finish yet
        def get(self, namespace: str | None, name: str) -> Obj | None:
            return copy.deepcopy(before_finish) if name == "a" else super().get(namespace, name)

    scheduler.workloads = NotYetFinished(store)  # type: ignore[assignment]
    scheduler.writes._written._read = scheduler.workloads.get
    preemption = Preemption(victim=("ns", "a"), preemptor=("ns", "b"), reason="InClusterQueue",
                            message="Preempted to accommodate a workload", conditions=[])
    scheduler._preempt(preemption, NOW)
    await scheduler.settled()
    conditions = {c["type"]: c["status"] for c in store.objects[("ns", "a")]["status"]["conditions"]}
    assert conditions.get("Evicted") is None and conditions.get("Preempted") is None
    engine.upsert_workload(copy.deepcopy(store.objects[("ns", "a")]))
    assert engine.reservation_count() == 0  # a finished workload holds nothing


async def test_a_victim_found_finished_gives_its_quota_back_before_the_watch_says_so() -> None:
    """The preemption's write meets a conflict, and the fresh copy is finished: the engine is fed
    that copy at once, so the preemptor is reserved in the next cycle without a second preemption,
    while the cache still has the victim holding the quota."""
    engine, store, scheduler = preempting_setup()
    engine.upsert_workload(copy.deepcopy({**store.objects[("ns", "b")], "spec": {
        **store.objects[("ns", "b")]["spec"], "active": False}}))  # b waits until a holds the quota
    await cycle(scheduler)
    assert reserved(store) == ["a"]
    holding = copy.deepcopy(store.objects[("ns", "a")])
    engine.upsert_workload(copy.deepcopy(holding))  # the informer delivers the reservation
    engine.upsert_workload(copy.deepcopy(store.objects[("ns", "b")]))  # b becomes active
    a = store.objects[("ns", "a")]  # then a finishes; the watch has not delivered it
    a["metadata"]["resourceVersion"] = str(int(a["metadata"]["resourceVersion"]) + 1)
    a["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded",
                                      "message": "", "lastTransitionTime": "2026-01-01T00:00:09Z"})

    class NotYetFinished(Cache):
        def get(self, namespace: str | None, name: str) -> Obj | None:
            return copy.deepcopy(holding) if name == "a" else super().get(namespace, name)

    scheduler.workloads = NotYetFinished(store)  # type: ignore[assignment]
    scheduler.writes._written._read = scheduler.workloads.get
    decisions = await cycle(scheduler)
    assert [p.victim for p in decisions.preemptions] == [("ns", "a")]
    assert "Evicted" not in {c["type"] for c in store.objects[("ns", "a")]["status"]["conditions"]}
    assert engine.reservation_count() == 0  # the finished copy read after the conflict was fed
    decisions = await cycle(scheduler)
    assert decisions.preemptions == [] and [r.workload for r in decisions.reservations] == [("ns", "b")]
    assert reserved(store) == ["a", "b"]  # a finished with its admission kept, as Kueue keeps it


def test_a_cleared_reservation_drops_the_admission_but_never_an_admitted_one() -> None:
    from kadmit.controller.scheduler import _cleared_writer

    conditions = [
        {
            "type": "QuotaReserved",
            "status": "False",
            "reason": "Suspended",
            "message": "ClusterQueue cq is stopped",
        }
    ]
    status: Obj = {
        "admission": {"clusterQueue": "cq"},
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""}],
    }
    assert _cleared_writer(conditions, NOW)({"status": status})
    assert "admission" not in status
    assert status["conditions"][0]["reason"] == "Suspended"
    admitted: Obj = {
        "admission": {"clusterQueue": "cq"},
        "conditions": [{"type": "Admitted", "status": "True", "reason": "Admitted", "message": ""}],
    }
    assert not _cleared_writer(conditions, NOW)({"status": admitted})
    assert "admission" in admitted


def preempting_setup() -> tuple[Engine, Store, Scheduler]:
    """``a`` (priority 0) will hold the ClusterQueue's 4 CPUs; ``b`` (priority 100) needs them."""
    engine, store, scheduler = setup()
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}, "preemption": {"withinClusterQueue": "LowerPriority"},
                 "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                     {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]}]},
    }
    engine.upsert(cq)
    b = store.objects[("ns", "b")]
    b["spec"]["priority"] = 100
    engine.upsert_workload(copy.deepcopy(b))
    return engine, store, scheduler


async def test_a_failed_preemption_is_issued_again() -> None:
    engine, store, scheduler = preempting_setup()
    engine.upsert_workload(copy.deepcopy({**store.objects[("ns", "b")], "spec": {
        **store.objects[("ns", "b")]["spec"], "active": False}}))  # b waits until a holds the quota
    await cycle(scheduler)
    assert reserved(store) == ["a"]
    engine.upsert_workload(copy.deepcopy(store.objects[("ns", "a")]))  # the informer delivers it
    engine.upsert_workload(copy.deepcopy(store.objects[("ns", "b")]))  # b becomes active
    store.failures.add("a")  # the eviction's write fails once
    decisions = await cycle(scheduler)
    assert [p.victim for p in decisions.preemptions] == [("ns", "a")]
    assert "Evicted" not in {c["type"] for c in store.objects[("ns", "a")]["status"]["conditions"]}
    decisions = await cycle(scheduler)  # the engine was set back: the preemption is decided again
    assert [p.victim for p in decisions.preemptions] == [("ns", "a")]
    evicted = {c["type"]: c["status"] for c in store.objects[("ns", "a")]["status"]["conditions"]}
    assert evicted.get("Evicted") == "True" and evicted.get("Preempted") == "True"


async def test_a_reservation_cut_short_by_a_step_down_is_forgotten() -> None:
    engine, store, scheduler = setup()
    landed = asyncio.Event()
    replace = store.replace

    async def hanging(resource: Resource, obj: Obj, *, subresource: str | None = None) -> Obj:
        landed.set()
        await asyncio.Event().wait()  # the write hangs: the leader steps down meanwhile
        return await replace(resource, obj, subresource=subresource)

    store.replace = hanging  # type: ignore[method-assign]
    runner = asyncio.create_task(scheduler.run())
    scheduler.wake()
    await asyncio.wait_for(landed.wait(), 5)
    assert engine.reservation_count() == 1  # assumed while its write is in flight
    runner.cancel()  # losing the leadership cancels the loop and its writes
    await asyncio.gather(runner, return_exceptions=True)
    assert engine.reservation_count() == 0  # not held for ever: the next term decides afresh


class Recorder:
    """The EventRecorder surface the scheduler uses: what it was told to record, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str, str]] = []

    def emit(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        self.events.append((obj["metadata"]["name"], event_type, reason, message))


async def test_waiting_is_written_and_told_once_per_reason() -> None:
    engine, store, _ = setup()
    recorder = Recorder()
    cache = Cache(store)
    scheduler = Scheduler(engine, store, cache, clock=lambda: NOW, events=recorder)  # type: ignore[arg-type]
    for name in ("c", "d"):  # b, c and d have one shape: parked together, each told
        store.put(workload(name, "2026-01-01T00:00:02Z"))
        engine.upsert_workload(copy.deepcopy(store.objects[("ns", name)]))
    await cycle(scheduler)
    needed = (
        "couldn't assign flavors to pod set main: "
        "insufficient unused quota for cpu in flavor f, 4 more needed"
    )
    warnings = sorted(e for e in recorder.events if e[1] == "Warning")
    assert warnings == [(n, "Warning", "WaitingForQuota", needed) for n in ("b", "c", "d")]
    assert [e[2:] for e in recorder.events if e[0] == "a"] == [
        ("QuotaReserved", "Quota reserved in ClusterQueue cq, wait time since queued was 0s"),
        ("Admitted", "Admitted by ClusterQueue cq, wait time since reservation was 0s"),
    ]
    writes = store.writes
    for _ in range(3):  # nothing changed: nothing written, nothing told
        scheduler.wake()
        await cycle(scheduler)
    assert store.writes == writes
    assert len(recorder.events) == 5


async def test_a_workload_reserved_before_its_turn_to_be_told_it_waits_is_never_told() -> None:
    """Waiting conditions go at the scheduler's pace; one still held back when the Workload is
    reserved is withdrawn: no condition nor Event for a wait that is over."""
    engine, store, _ = setup()
    recorder = Recorder()
    gate = Gate()
    scheduler = Scheduler(engine, store, Cache(store), clock=lambda: NOW, events=recorder,  # type: ignore[arg-type]
                          waiting_pace=gate)  # fmt: skip
    await scheduler.writes.start()
    await scheduler.cycle()  # a is reserved; b waits, and its condition waits for the pace
    await until(lambda: gate.waiting == 1 and ("a", "Normal", "Admitted") in [e[:3] for e in recorder.events])
    assert "conditions" not in (store.objects[("ns", "b")].get("status") or {})

    engine.delete_workload("ns", "a")  # a is gone: b fits
    decisions = await scheduler.cycle()
    assert [r.workload for r in decisions.reservations] == [("ns", "b")]
    await scheduler.settled()
    gate.open()
    await scheduler.writes.stop()
    b = store.objects[("ns", "b")]
    assert b["status"]["admission"]["clusterQueue"] == "cq"
    told_b = [e[2] for e in recorder.events if e[0] == "b"]
    assert told_b == ["QuotaReserved", "Admitted"]
    assert not any(c.get("reason") == "WaitingForQuota" for c in b["status"]["conditions"])


async def test_a_preemption_of_a_reservation_the_cache_has_not_delivered_lands() -> None:
    """The victim's reservation is written, and the informer has not delivered it yet: the
    eviction is judged against the admission this scheduler wrote, not the cache's older copy
    (which has none, as if the victim had been released since the decision)."""
    engine, store, scheduler = preempting_setup()
    before_reservation = copy.deepcopy(store.objects[("ns", "a")])

    class Lagging(Cache):  # the informer has not delivered a's reservation
        def get(self, namespace: str | None, name: str) -> Obj | None:
            return copy.deepcopy(before_reservation) if name == "a" else super().get(namespace, name)

    scheduler.workloads = Lagging(store)  # type: ignore[assignment]
    scheduler.writes._written._read = scheduler.workloads.get
    engine.upsert_workload(copy.deepcopy({**store.objects[("ns", "b")], "spec": {
        **store.objects[("ns", "b")]["spec"], "active": False}}))  # b waits until a holds the quota
    await cycle(scheduler)
    assert reserved(store) == ["a"]
    engine.upsert_workload(copy.deepcopy(store.objects[("ns", "b")]))  # b becomes active
    decisions = await cycle(scheduler)
    assert [p.victim for p in decisions.preemptions] == [("ns", "a")]
    evicted = {c["type"]: c["status"] for c in store.objects[("ns", "a")]["status"]["conditions"]}
    assert evicted.get("Evicted") == "True" and evicted.get("Preempted") == "True"


async def test_a_preemption_decided_while_the_reservation_waits_lands_after_it() -> None:
    """The victim's reservation is not written yet when its preemption is decided: both go in
    order, and the eviction is judged against the admission the reservation writes."""
    engine, store, scheduler = preempting_setup()
    engine.upsert_workload(copy.deepcopy({**store.objects[("ns", "b")], "spec": {
        **store.objects[("ns", "b")]["spec"], "active": False}}))  # b waits until a holds the quota
    await scheduler.cycle()  # a's reservation is submitted; the pipeline has not started to write
    assert reserved(store) == []
    engine.upsert_workload(copy.deepcopy(store.objects[("ns", "b")]))  # b becomes active
    decisions = await scheduler.cycle()
    assert [p.victim for p in decisions.preemptions] == [("ns", "a")]
    await scheduler.writes.start()
    await scheduler.settled()
    assert reserved(store) == ["a"]
    evicted = {c["type"]: c["status"] for c in store.objects[("ns", "a")]["status"]["conditions"]}
    assert evicted.get("Evicted") == "True" and evicted.get("Preempted") == "True"
