"""Pod set groups (kueue-contract §5.3, Kueue's ``topologyRequest.podSetGroupName``).

"Pod sets sharing a topologyRequest.podSetGroupName are handled together": their requests are
summed, one flavor per resource group is chosen for the sum (it must suit every pod set of the
group), and each pod set gets the chosen flavors of the resources it requests itself.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from kadmit.engine import Engine, InvalidObject, parse
from kadmit.engine.flavors import FIT
from tests.engine.conftest import (
    admitted_names,
    admitted_status,
    cluster_queue,
    flavor,
    load,
    local_queue,
    pending_by_name,
    pod_set,
    quotas,
    two_flavors_full_of_low_priority_work,
    workload,
)

SPOT = {"key": "instance", "value": "spot", "effect": "NoSchedule"}
TOLERATES_SPOT = {"key": "instance", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}


def grouped(group: str | None, count: int = 1, name: str = "main", **spec: Any) -> dict[str, Any]:
    """A pod set in ``group`` (``topologyRequest.podSetGroupName``; None: no group)."""
    out = pod_set(count, name, **spec)
    if group is not None:
        out["topologyRequest"] = {"podSetGroupName": group}
    return out


def leader_and_workers(group: str | None, **worker: Any) -> list[dict[str, Any]]:
    """Kueue's leader worker set shape: 4 workers of 2 cpu, a leader of 1 cpu."""
    return [
        grouped(group, 4, "worker", requests={"cpu": "2"}, **worker),
        grouped(group, 1, "leader", requests={"cpu": "1"}),
    ]


def assignments(decisions: Any, name: str) -> list[dict[str, Any]]:
    [reservation] = [r for r in decisions.reservations if r.workload[1] == name]
    result: list[dict[str, Any]] = reservation.admission["podSetAssignments"]
    return result


def flavors_of(decisions: Any, name: str) -> dict[str, dict[str, str]]:
    return {psa["name"]: psa["flavors"] for psa in assignments(decisions, name)}


def _one_four_two_nine(**spec: Any) -> Engine:
    """Flavor one holds 4 cpu, two holds 9: the leader alone fits one, the group only two."""
    return load(
        flavor("one"),
        flavor("two"),
        cluster_queue("cq", quotas({"one": {"cpu": 4}, "two": {"cpu": 9}}), **spec),
        local_queue("lq", "cq"),
    )


# --- parsing -------------------------------------------------------------------------------


def test_the_group_name_is_read_from_the_topology_request() -> None:
    wl = parse.workload(workload("w", pod_sets=[grouped("g", name="a"), grouped(None, name="b")]))
    assert [ps.group_name for ps in wl.pod_sets] == ["g", None]


def test_a_group_name_that_is_not_a_string_is_refused_with_its_path() -> None:
    bad = grouped(None, name="b")
    bad["topologyRequest"] = {"podSetGroupName": 3}
    with pytest.raises(InvalidObject, match=r"spec\.podSets\[1\]\.topologyRequest\.podSetGroupName"):
        parse.workload(workload("w", pod_sets=[grouped("g", name="a"), bad]))


def test_a_topology_request_that_is_not_an_object_is_refused_with_its_path() -> None:
    bad = grouped(None)
    bad["topologyRequest"] = "g"
    with pytest.raises(InvalidObject, match=r"spec\.podSets\[0\]\.topologyRequest: must be an object"):
        parse.workload(workload("w", pod_sets=[bad]))


# --- one flavor for the group ---------------------------------------------------------------


def test_without_a_group_each_pod_set_takes_the_first_flavor_it_fits() -> None:
    engine = _one_four_two_nine()
    engine.upsert(workload("lws", pod_sets=leader_and_workers(None)))
    assert flavors_of(engine.schedule(1.0), "lws") == {"worker": {"cpu": "two"}, "leader": {"cpu": "one"}}


def test_a_group_gets_the_flavor_its_sum_fits_though_a_member_alone_fits_another() -> None:
    engine = _one_four_two_nine()
    engine.upsert(workload("lws", pod_sets=leader_and_workers("g")))
    decisions = engine.schedule(1.0)
    # Written per pod set: each its own count and usage, on the group's flavor.
    assert assignments(decisions, "lws") == [
        {"name": "worker", "flavors": {"cpu": "two"}, "resourceUsage": {"cpu": "8"}, "count": 4},
        {"name": "leader", "flavors": {"cpu": "two"}, "resourceUsage": {"cpu": "1"}, "count": 1},
    ]
    assert {fr: v for fr, v in engine.usage("cq").items() if v} == {("two", "cpu"): 9000}


def test_two_groups_and_a_pod_set_without_one_are_each_assigned_on_their_own() -> None:
    engine = _one_four_two_nine()
    sets = [
        grouped("a", 2, "a-worker", requests={"cpu": "1"}),
        grouped(None, 1, "solo", requests={"cpu": "1"}),
        grouped("a", 1, "a-leader", requests={"cpu": "1"}),
        grouped("b", 1, "b-worker", requests={"cpu": "3"}),
        grouped("b", 1, "b-leader", requests={"cpu": "1"}),
    ]
    engine.upsert(workload("w", pod_sets=sets))
    decisions = engine.schedule(1.0)
    # Group a (3 cpu) fits one, then solo fits what one has left; group b's 4 no longer
    # fits one, so both of its pod sets go to two. The assignments keep the spec's order.
    assert [(psa["name"], psa["flavors"]["cpu"]) for psa in assignments(decisions, "w")] == [
        ("a-worker", "one"),
        ("solo", "one"),
        ("a-leader", "one"),
        ("b-worker", "two"),
        ("b-leader", "two"),
    ]


def test_a_group_named_after_a_number_joins_the_pod_set_of_that_index_as_in_kueue() -> None:
    # Kueue keys a pod set without a group by its index; its job webhooks refuse numeric group
    # names for that reason, its Workload webhook does not.
    engine = _one_four_two_nine()
    sets = [
        grouped(None, 4, "worker", requests={"cpu": "2"}),
        grouped("0", 1, "leader", requests={"cpu": "1"}),
    ]
    engine.upsert(workload("w", pod_sets=sets))
    assert flavors_of(engine.schedule(1.0), "w") == {"worker": {"cpu": "two"}, "leader": {"cpu": "two"}}


# --- taints and node affinity of one member --------------------------------------------------


def _spot_then_on_demand() -> Engine:
    return load(
        flavor("spot", taints=[SPOT]),
        flavor("on-demand"),
        cluster_queue("cq", quotas({"spot": {"cpu": 20}, "on-demand": {"cpu": 20}})),
        local_queue("lq", "cq"),
    )


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        (None, {"worker": {"cpu": "spot"}, "leader": {"cpu": "on-demand"}}),
        ("g", {"worker": {"cpu": "on-demand"}, "leader": {"cpu": "on-demand"}}),
    ],
)
def test_a_taint_one_member_does_not_tolerate_excludes_the_flavor_for_the_group(
    group: str | None, expected: dict[str, dict[str, str]]
) -> None:
    engine = _spot_then_on_demand()
    engine.upsert(workload("lws", pod_sets=leader_and_workers(group, tolerations=[TOLERATES_SPOT])))
    assert flavors_of(engine.schedule(1.0), "lws") == expected


def _zones() -> Engine:
    return load(
        flavor("one", labels={"type": "one"}),
        flavor("two", labels={"type": "two"}),
        cluster_queue("cq", quotas({"one": {"cpu": 20}, "two": {"cpu": 20}})),
        local_queue("lq", "cq"),
    )


def test_a_node_selector_of_one_member_excludes_the_other_flavors_for_the_group() -> None:
    engine = _zones()
    sets = [
        grouped("g", 4, "worker", requests={"cpu": "2"}),
        grouped("g", 1, "leader", requests={"cpu": "1"}, nodeSelector={"type": "two"}),
    ]
    engine.upsert(workload("lws", pod_sets=sets))
    assert flavors_of(engine.schedule(1.0), "lws") == {"worker": {"cpu": "two"}, "leader": {"cpu": "two"}}


def test_a_group_no_flavor_suits_waits_with_kueues_message_for_each_member() -> None:
    engine = _zones()
    in_two = {"key": "type", "operator": "In", "values": ["two"]}
    terms = {"nodeSelectorTerms": [{"matchExpressions": [in_two]}]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}
    sets = [
        grouped("g", 4, "worker", requests={"cpu": "2"}, nodeSelector={"type": "one"}),
        grouped("g", 1, "leader", requests={"cpu": "1"}, affinity=affinity),
    ]
    engine.upsert(workload("lws", pod_sets=sets))
    decisions = engine.schedule(1.0)
    assert admitted_names(decisions) == []
    # The worker rules out two, the leader one: each flavor is reported once, for the group.
    both = "flavor one doesn't match node affinity, flavor two doesn't match node affinity"
    assert pending_by_name(decisions)["lws"] == (
        "NoMatchingFlavor",
        f"couldn't assign flavors to pod set worker: {both}; "
        f"couldn't assign flavors to pod set leader: {both}",
    )


# --- a member that does not request a resource of the group's flavor ------------------------


def _cpu_and_gpu() -> Engine:
    """Flavor one has cpu but no gpu, two has both (one resource group: Kueue's webhook
    refuses a resource covered by two groups)."""
    return load(
        flavor("one"),
        flavor("two"),
        cluster_queue(
            "cq",
            quotas(
                {"one": {"cpu": 10, "example.com/gpu": 0}, "two": {"cpu": 5, "example.com/gpu": 4}},
            ),
        ),
        local_queue("lq", "cq"),
    )


def _gpu_workers(group: str | None) -> list[dict[str, Any]]:
    return [
        grouped(group, 4, "worker", requests={"cpu": "1", "example.com/gpu": "1"}),
        grouped(group, 1, "leader", requests={"cpu": "1"}),
    ]


def test_a_member_without_the_gpu_gets_the_groups_flavor_for_what_it_requests() -> None:
    engine = _cpu_and_gpu()
    engine.upsert(workload("lws", pod_sets=_gpu_workers("g")))
    decisions = engine.schedule(1.0)
    assert assignments(decisions, "lws") == [
        {
            "name": "worker",
            "flavors": {"cpu": "two", "example.com/gpu": "two"},
            "resourceUsage": {"cpu": "4", "example.com/gpu": "4"},
            "count": 4,
        },
        # The leader requests no gpu: no gpu flavor and no gpu usage, but the group's cpu one.
        {"name": "leader", "flavors": {"cpu": "two"}, "resourceUsage": {"cpu": "1"}, "count": 1},
    ]


def test_without_a_group_the_member_without_the_gpu_takes_the_first_flavor() -> None:
    engine = _cpu_and_gpu()
    engine.upsert(workload("lws", pod_sets=_gpu_workers(None)))
    flavors = flavors_of(engine.schedule(1.0), "lws")
    assert flavors == {"worker": {"cpu": "two", "example.com/gpu": "two"}, "leader": {"cpu": "one"}}


def test_a_member_that_requests_nothing_of_a_second_resource_group_gets_none_of_it() -> None:
    engine = load(
        flavor("one"),
        flavor("two"),
        flavor("gpu-a"),
        cluster_queue(
            "cq",
            quotas({"one": {"cpu": 4}, "two": {"cpu": 9}}) + quotas({"gpu-a": {"example.com/gpu": 4}}),
        ),
        local_queue("lq", "cq"),
    )
    engine.upsert(workload("lws", pod_sets=_gpu_workers("g")))
    assert flavors_of(engine.schedule(1.0), "lws") == {
        "worker": {"cpu": "two", "example.com/gpu": "gpu-a"},
        "leader": {"cpu": "two"},
    }


def test_the_pods_resource_is_summed_over_the_group() -> None:
    engine = load(
        flavor("one"),
        flavor("two"),
        cluster_queue("cq", quotas({"one": {"pods": 4, "cpu": 100}, "two": {"pods": 5, "cpu": 100}})),
        local_queue("lq", "cq"),
    )
    engine.upsert(workload("lws", pod_sets=leader_and_workers("g")))
    decisions = engine.schedule(1.0)
    assert [(psa["flavors"], psa["resourceUsage"]) for psa in assignments(decisions, "lws")] == [
        ({"cpu": "two", "pods": "two"}, {"cpu": "8", "pods": "4"}),
        ({"cpu": "two", "pods": "two"}, {"cpu": "1", "pods": "1"}),
    ]


# --- preemption and partial admission --------------------------------------------------------


def test_a_group_preempts_for_its_sum_and_is_admitted_once_the_victim_is_gone() -> None:
    engine = _one_four_two_nine(preemption={"withinClusterQueue": "LowerPriority"})
    engine.upsert(
        workload("low", cpu="3", priority=0, status=admitted_status("cq", {"cpu": "two"}, {"cpu": "3"}))
    )
    engine.upsert(workload("lws", pod_sets=leader_and_workers("g"), priority=10, created=1.0))
    first = engine.schedule(1.0)
    # one cannot hold 9 cpu at all; two can, once low is gone.
    assert [(p.victim[1], p.reason) for p in first.preemptions] == [("low", "InClusterQueue")]
    assert pending_by_name(first)["lws"][0] == "WaitingForPreemptedWorkloads"
    engine.release("default", "low")
    second = engine.schedule(2.0)
    assert flavors_of(second, "lws") == {"worker": {"cpu": "two"}, "leader": {"cpu": "two"}}


def test_a_group_short_of_quota_waits_whole_with_a_message_for_each_member() -> None:
    engine = _one_four_two_nine()
    engine.upsert(
        workload("other", cpu="1", priority=0, status=admitted_status("cq", {"cpu": "two"}, {"cpu": "1"}))
    )
    engine.upsert(workload("lws", pod_sets=leader_and_workers("g"), priority=10, created=1.0))
    decisions = engine.schedule(1.0)
    # two has 8 cpu left, one holds 4 at most: the group's 9 fit neither, and the queue may
    # not preempt; alone, the leader would fit one.
    assert admitted_names(decisions) == [] and decisions.preemptions == []
    reason, message = pending_by_name(decisions)["lws"]
    assert reason == "WaitingForQuota"
    assert message.startswith("couldn't assign flavors to pod set worker: ")
    assert "; couldn't assign flavors to pod set leader: " in message


def test_partial_admission_scales_the_group_down_to_what_one_flavor_holds() -> None:
    engine = load(
        flavor("one"),
        flavor("two"),
        cluster_queue("cq", quotas({"one": {"cpu": 4}, "two": {"cpu": 7}})),
        local_queue("lq", "cq"),
    )
    sets = [
        grouped("g", 8, "worker", min_count=4, requests={"cpu": "1"}),
        grouped("g", 1, "leader", requests={"cpu": "1"}),
    ]
    engine.upsert(workload("lws", pod_sets=sets))
    decisions = engine.schedule(1.0)
    # 9 cpu fit nowhere; 6 workers and the leader fit two (without the group, 7 workers would
    # take two and the leader one).
    assert assignments(decisions, "lws") == [
        {"name": "worker", "flavors": {"cpu": "two"}, "resourceUsage": {"cpu": "6"}, "count": 6},
        {"name": "leader", "flavors": {"cpu": "two"}, "resourceUsage": {"cpu": "1"}, "count": 1},
    ]


# --- the walk's memory ------------------------------------------------------------------------


def test_the_walk_memory_is_kept_for_every_member_and_resumed_from_the_first() -> None:
    engine = two_flavors_full_of_low_priority_work()
    sets = [grouped("g", 1, name, requests={"cpu": "1"}) for name in ("worker", "leader")]
    engine.upsert(workload("high", pod_sets=sets, priority=10, created=1.0))
    first = engine.schedule(1.0)
    assert [p.victim[1] for p in first.preemptions] == ["low-a"]  # stopped at a
    walk = engine._entries[("default", "high")].walk
    assert walk is not None and walk.last == [{"cpu": 0}, {"cpu": 0}]
    engine.release("default", "low-a")
    second = engine.schedule(2.0)
    # As for a single pod set, the next cycle resumes after a: b needs preemption.
    assert [p.victim[1] for p in second.preemptions] == ["low-b"]


def test_a_member_is_remembered_only_for_the_resources_it_requests() -> None:
    engine = _cpu_and_gpu()
    engine.sync()
    assigner = engine._assigners["cq"]
    pod_sets = parse.workload(workload("w", pod_sets=_gpu_workers("g"))).pod_sets
    result = assigner.assign(pod_sets, [4, 1])
    assert result.mode == FIT
    assert result.last_tried == [{"cpu": -1, "example.com/gpu": -1}, {"cpu": -1}]


# --- a group of one is no group ---------------------------------------------------------------


def _random_objects(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A random queue (taints, labels, two resource groups, preemption, fungibility), usage
    held by low-priority workloads, and pending workloads of one to three pod sets."""
    labels = [{"zone": "a"}, {"zone": "b"}, {}]
    flavors = [
        flavor(f"f{i}", labels=rng.choice(labels), taints=[SPOT] if rng.random() < 0.3 else None)
        for i in range(4)
    ]
    cpu_flavors = {f"f{i}": {"cpu": rng.randint(2, 12), "memory": f"{rng.randint(1, 8)}Gi"} for i in range(3)}
    groups = quotas(cpu_flavors) + quotas({"f3": {"example.com/gpu": rng.randint(0, 4)}})
    spec: dict[str, Any] = {}
    if rng.random() < 0.5:
        spec["preemption"] = {"withinClusterQueue": "LowerPriority"}
    if rng.random() < 0.5:
        spec["flavorFungibility"] = {"whenCanPreempt": rng.choice(["MayStopSearch", "TryNextFlavor"])}
    setup = [*flavors, cluster_queue("cq", groups, **spec), local_queue("lq", "cq")]
    workloads = []
    for i in range(rng.randint(0, 3)):
        f = f"f{rng.randrange(3)}"
        cpu = rng.randint(1, 4)
        status = admitted_status("cq", {"cpu": f}, {"cpu": str(cpu)})
        workloads.append(workload(f"held-{i}", cpu=str(cpu), priority=0, status=status))
    for i in range(rng.randint(1, 4)):
        sets = []
        for j in range(rng.randint(1, 3)):
            requests = {"cpu": str(rng.randint(0, 3))}
            if rng.random() < 0.5:
                requests["memory"] = f"{rng.randint(0, 2)}Gi"
            if rng.random() < 0.3:
                requests["example.com/gpu"] = str(rng.randint(0, 2))
            extra: dict[str, Any] = {}
            if rng.random() < 0.3:
                extra["tolerations"] = [TOLERATES_SPOT]
            if rng.random() < 0.3:
                extra["nodeSelector"] = {"zone": rng.choice("ab")}
            count = rng.randint(1, 3)
            min_count = rng.randint(1, count) if j == 0 and rng.random() < 0.3 else None
            sets.append(pod_set(count, f"ps{j}", min_count, requests=requests, **extra))
        priority = rng.choice([0, 10])
        workloads.append(workload(f"w{i}", pod_sets=sets, priority=priority, created=float(i)))
    return setup, workloads


def _run(setup: list[dict[str, Any]], workloads: list[dict[str, Any]]) -> list[Any]:
    engine = load(*setup)
    for obj in workloads:
        engine.upsert(obj)
    seen: list[Any] = []
    for cycle in range(1, 4):
        decisions = engine.schedule(float(cycle))
        seen.append(
            (
                [(r.workload, r.admission) for r in decisions.reservations],
                [(p.victim, p.reason, p.message) for p in decisions.preemptions],
                [(p.workload, p.reason, p.message) for p in decisions.pending],
            )
        )
        for preemption in decisions.preemptions:
            engine.release(*preemption.victim)
    return seen


def _each_pod_set_its_own_group(obj: dict[str, Any]) -> dict[str, Any]:
    if "status" in obj:
        return obj
    sets = [
        {**ps, "topologyRequest": {"podSetGroupName": f"own-{ps['name']}"}} for ps in obj["spec"]["podSets"]
    ]
    return {**obj, "spec": {**obj["spec"], "podSets": sets}}


@pytest.mark.parametrize("seed", range(40))
def test_pod_sets_each_in_a_group_of_their_own_are_assigned_as_without_groups(seed: int) -> None:
    setup, workloads = _random_objects(random.Random(seed))
    plain = _run(setup, workloads)
    assert plain == _run(setup, [_each_pod_set_its_own_group(w) for w in workloads])
    assert any(reservations or pending for reservations, _, pending in plain)
