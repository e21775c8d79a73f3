"""Properties over random quotas and workloads (hypothesis).

* no node of the cohort tree ever holds more than its quota and limits allow;
* a workload is never half admitted;
* releasing every workload returns usage to exactly zero;
* the outcome does not depend on the order in which objects were loaded.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kadmit.engine import Engine
from kadmit.engine.quota import available, potential_available
from tests.engine.conftest import cluster_queue, cohort, flavor, local_queue, pod_set, workload

FLAVORS = ["f1", "f2"]
# Derandomized: CI runs the same examples every time (a failing CI run must mean a change broke
# something). A random search also finds scenarios that never settle: partial admission with fair
# sharing alternates two workloads' preemptions, as Kueue's rules do (minimised in
# test_fair_sharing.py::test_partial_admission_and_fair_sharing_alternate_as_in_kueue).
PROPERTY_SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


@st.composite
def scenarios(draw: st.DrawFn) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [flavor(f) for f in [*FLAVORS, "m1"]]
    cohorts = draw(st.sampled_from([[], ["root"], ["root", "child"]]))
    if "root" in cohorts:
        objects.append(cohort("root"))
    if "child" in cohorts:
        limit = draw(st.one_of(st.none(), st.integers(0, 4)))
        resources = [{"name": "cpu", "nominalQuota": draw(st.integers(0, 3))}]
        if limit is not None:
            resources[0]["borrowingLimit"] = limit
        objects.append(
            cohort(
                "child",
                parent="root",
                groups=[{"coveredResources": ["cpu"], "flavors": [{"name": "f1", "resources": resources}]}],
            )
        )
    n_queues = draw(st.integers(1, 4))
    for q in range(n_queues):
        home = draw(st.sampled_from([None, *cohorts]))
        flavors = []
        for f in draw(st.sampled_from([["f1"], ["f2"], ["f1", "f2"], ["f2", "f1"]])):
            res: dict[str, Any] = {"name": "cpu", "nominalQuota": draw(st.integers(0, 6))}
            if home is not None:
                if draw(st.booleans()):
                    res["borrowingLimit"] = draw(st.integers(0, 4))
                if draw(st.booleans()):
                    res["lendingLimit"] = draw(st.integers(0, res["nominalQuota"]))
            flavors.append({"name": f, "resources": [res]})
        preemption = {
            "withinClusterQueue": draw(
                st.sampled_from(["Never", "LowerPriority", "LowerOrNewerEqualPriority"])
            ),
            "reclaimWithinCohort": draw(st.sampled_from(["Never", "LowerPriority", "Any"])),
        }
        fungibility = {"whenCanBorrow": draw(st.sampled_from(["MayStopSearch", "TryNextFlavor"]))}
        groups: list[dict[str, Any]] = [{"coveredResources": ["cpu"], "flavors": flavors}]
        if draw(st.booleans()):  # a second resource group, for memory
            memory = f"{draw(st.integers(0, 8))}Gi"
            groups.append(
                {
                    "coveredResources": ["memory"],
                    "flavors": [{"name": "m1", "resources": [{"name": "memory", "nominalQuota": memory}]}],
                }
            )
        objects.append(
            cluster_queue(
                f"cq{q}",
                groups,
                cohort=home,
                preemption=preemption,
                flavorFungibility=fungibility,
                queueingStrategy=draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"])),
            )
        )
        objects.append(local_queue(f"lq{q}", f"cq{q}"))
    for w in range(draw(st.integers(1, 14))):
        sets = []
        for p in range(draw(st.integers(1, 2))):
            count = draw(st.integers(1, 4))
            min_count = draw(st.one_of(st.none(), st.integers(1, count))) if p == 0 else None
            requests = {"cpu": str(draw(st.integers(0, 3)))}
            if draw(st.booleans()):
                requests["memory"] = f"{draw(st.integers(0, 3))}Gi"
            sets.append(pod_set(count, name=f"ps{p}", min_count=min_count, requests=requests))
        objects.append(
            workload(
                f"w{w}",
                f"lq{draw(st.integers(0, n_queues - 1))}",
                pod_sets=sets,
                priority=draw(st.integers(0, 3)),
                created=draw(st.integers(0, 5)),
            )
        )
    return objects


def check_tree(engine: Engine) -> None:
    for node in engine.nodes():
        for fr in set(node.usage) | set(node.subtree):
            assert available(node, fr) >= 0 or node.usage.get(fr, 0) == 0, (node.name, fr)
            if not node.is_cohort:
                assert node.usage.get(fr, 0) <= potential_available(node, fr), (node.name, fr)
            limit = node.borrowing_limit.get(fr)
            if limit is not None and node.parent is not None:
                assert node.usage.get(fr, 0) <= node.subtree.get(fr, 0) + limit, (node.name, fr)


def check_whole(reservations: list[Any], objects: list[dict[str, Any]]) -> None:
    specs = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Workload"}
    for reservation in reservations:
        spec = specs[reservation.workload[1]]
        assignments = reservation.admission["podSetAssignments"]
        assert [a["name"] for a in assignments] == [p["name"] for p in spec["podSets"]]
        for assignment, wanted in zip(assignments, spec["podSets"], strict=True):
            assert wanted.get("minCount", wanted["count"]) <= assignment["count"] <= wanted["count"]
            assert set(assignment["flavors"]) == set(assignment["resourceUsage"])
            requests = wanted["template"]["spec"]["containers"][0]["resources"]["requests"]
            nonzero = {r for r, q in requests.items() if q not in ("0", "0Gi")}
            assert nonzero <= set(assignment["flavors"]) <= set(requests)


def settle(engine: Engine, objects: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Run to a settled state, stopping preempted jobs at once; returns every decision made."""
    log: list[tuple[Any, ...]] = []
    for cycle in range(60):
        decisions = engine.schedule(1000.0 + cycle)
        check_tree(engine)
        check_whole(decisions.reservations, objects)
        log += [("reserve", r.workload, repr(r.admission)) for r in decisions.reservations]
        log += [("preempt", p.victim, p.preemptor, p.reason) for p in decisions.preemptions]
        for preemption in decisions.preemptions:
            engine.release(*preemption.victim)
        check_tree(engine)
        if not decisions.reservations and not decisions.preemptions:
            return log
    raise AssertionError("did not settle")


@PROPERTY_SETTINGS
@given(scenarios(), st.booleans())
def test_quota_is_never_exceeded_and_nothing_is_half_admitted(
    objects: list[dict[str, Any]], fair: bool
) -> None:
    engine = Engine(fair_sharing=fair)
    for obj in objects:
        engine.upsert(obj)
    settle(engine, objects)


@PROPERTY_SETTINGS
@given(scenarios())
def test_releasing_everything_returns_usage_to_zero(objects: list[dict[str, Any]]) -> None:
    engine = Engine()
    for obj in objects:
        engine.upsert(obj)
    settle(engine, objects)
    for namespace, name in engine.workload_keys():
        engine.finish(namespace, name)
    for node in engine.nodes():
        assert node.usage == {}, node.name


@PROPERTY_SETTINGS
@given(scenarios(), st.randoms(use_true_random=False), st.booleans())
def test_outcome_does_not_depend_on_load_order(objects: list[dict[str, Any]], rnd: Any, fair: bool) -> None:
    first = Engine(fair_sharing=fair)
    for obj in objects:
        first.upsert(obj)
    shuffled = list(objects)
    rnd.shuffle(shuffled)
    second = Engine(fair_sharing=fair)
    for obj in shuffled:
        second.upsert(obj)
    assert settle(first, objects) == settle(second, objects)


@PROPERTY_SETTINGS
@given(scenarios())
def test_workloads_arriving_one_by_one_never_overbook(objects: list[dict[str, Any]]) -> None:
    engine = Engine()
    for obj in objects:
        if obj["kind"] != "Workload":
            engine.upsert(obj)
    for index, obj in enumerate(o for o in objects if o["kind"] == "Workload"):
        engine.upsert(obj)
        decisions = engine.schedule(float(index))
        check_tree(engine)
        check_whole(decisions.reservations, objects)
        for preemption in decisions.preemptions:
            engine.release(*preemption.victim)
