"""Admission Fair Sharing: within a ClusterQueue, the LocalQueue that used less recently goes first
(Kueue's KEP 4136; the cases of Kueue's test/integration/singlecluster/scheduler/fairsharing
"Using AdmissionFairSharing at ClusterQueue level")."""

from __future__ import annotations

import math
from typing import Any

import pytest

from kadmit.engine import Engine
from kadmit.engine.admission_fair_sharing import (
    AdmissionFairSharing,
    UsageLedger,
    alpha_rate,
    decayed,
    weighted_usage,
)
from kadmit.engine.errors import InvalidObject
from kadmit.engine.quantity import NANO, format_nano
from kadmit.engine.timestamps import format_time
from tests.engine.conftest import (
    T0,
    admitted_names,
    cluster_queue,
    flavor,
    local_queue,
    quotas,
    workload,
)

AFS = AdmissionFairSharing(usage_half_life=2.0, sampling_interval=1.0)  # Kueue's integration suite


def _engine(
    afs: AdmissionFairSharing | None = AFS,
    mode: str = "UsageBasedAdmissionFairSharing",
    weights: dict[str, str] | None = None,
    cpu: int = 8,
) -> Engine:
    engine = Engine(admission_fair_sharing=afs)
    engine.upsert(flavor("default"))
    engine.upsert(
        cluster_queue("cq1", quotas({"default": {"cpu": cpu}}), admissionScope={"admissionMode": mode})
    )
    for name in ("lq-a", "lq-b", "lq-c"):
        spec: dict[str, Any] = {}
        if weights and name in weights:
            spec["fairSharing"] = {"weight": weights[name]}
        engine.upsert(local_queue(name, "cq1", **spec))
    return engine


def _confirm(engine: Engine, decisions: Any, at: float) -> None:
    """Write back what the engine decided, as the controller's status writes do."""
    for r in decisions.reservations:
        obj = workload(r.workload[1], _queues[r.workload[1]], created=_created[r.workload[1]], cpu="4")
        obj["status"] = {
            "admission": r.admission,
            "conditions": [{**c, "lastTransitionTime": format_time(T0 + at)} for c in r.conditions],
        }
        engine.upsert_workload(obj)


_queues: dict[str, str] = {}
_created: dict[str, float] = {}


def _submit(engine: Engine, name: str, queue: str, at: float) -> None:
    _queues[name] = queue
    _created[name] = at
    engine.upsert_workload(workload(name, queue, created=at, cpu="4"))


def test_the_math_is_kueues() -> None:
    assert alpha_rate(1, 2) == pytest.approx(1 - 0.5**0.5)
    assert alpha_rate(5, 0) == 0.0
    # half the old usage after one half-life, plus half the new
    assert decayed({"cpu": 4 * NANO}, {"cpu": 0}, 2, 2) == {"cpu": 2 * NANO}
    assert decayed({"cpu": 0}, {"cpu": 4 * NANO}, 2, 2) == {"cpu": 2 * NANO}
    assert weighted_usage({"cpu": 2 * NANO, "memory": NANO}, {"cpu": NANO}, 2.0, {"memory": 0.5}) == 1.75
    assert weighted_usage({"cpu": NANO}, {}, 0.0, {}) == math.inf
    assert format_nano(1_171_572_875) == "1171572875n"
    assert format_nano(1_500_000_000) == "1500m"
    assert format_nano(4 * NANO) == "4"


def test_configuration_is_validated() -> None:
    with pytest.raises(ValueError, match="usageSamplingInterval"):
        AdmissionFairSharing(usage_half_life=1, sampling_interval=0)
    with pytest.raises(ValueError, match=r"resourceWeights\.cpu"):
        AdmissionFairSharing(resource_weights={"cpu": -1})
    engine = Engine(admission_fair_sharing=AFS)
    with pytest.raises(InvalidObject, match="admissionMode"):
        scope = {"admissionMode": "Sometimes"}
        engine.upsert(cluster_queue("cq", quotas({"f": {"cpu": 1}}), admissionScope=scope))


def test_one_workload_from_each_local_queue_when_quota_is_limited() -> None:
    """Kueue: "admits one workload from each LocalQueue when quota is limited": the entry
    penalty of the first admission puts lq-a behind lq-b in the same cycle."""
    engine = _engine()
    for i, (name, queue) in enumerate([("a1", "lq-a"), ("a2", "lq-a"), ("b1", "lq-b"), ("b2", "lq-b")]):
        _submit(engine, name, queue, i)
    assert sorted(admitted_names(engine.schedule(T0 + 10))) == ["a1", "b1"]


def test_without_admission_fair_sharing_the_oldest_go_first() -> None:
    for engine in (_engine(afs=None), _engine(mode="NoAdmissionFairSharing")):
        for i, (name, queue) in enumerate([("a1", "lq-a"), ("a2", "lq-a"), ("b1", "lq-b"), ("b2", "lq-b")]):
            _submit(engine, name, queue, i)
        assert sorted(admitted_names(engine.schedule(T0 + 10))) == ["a1", "a2"]
        assert "fairSharing" not in engine.local_queue_status("default", "lq-a")


def test_the_less_active_local_queue_goes_first_once_quota_is_released() -> None:
    """Kueue: "prioritizes workloads from less active LocalQueues to maintain fairness"."""
    engine = _engine()
    engine.sample_admission_fair_sharing(T0)  # the first sample only starts the clock
    _submit(engine, "a1", "lq-a", 0)
    _submit(engine, "a2", "lq-a", 1)
    decisions = engine.schedule(T0 + 1)
    assert sorted(admitted_names(decisions)) == ["a1", "a2"]
    _confirm(engine, decisions, 1)
    for t in range(2, 12):
        engine.sample_admission_fair_sharing(T0 + t)
    assert engine.local_queue_usage("default", "lq-a") > 7.5  # 8 cpu, decayed towards it
    assert engine.local_queue_usage("default", "lq-b") == 0
    _submit(engine, "a3", "lq-a", 2)
    _submit(engine, "a4", "lq-a", 3)
    _submit(engine, "b1", "lq-b", 4)  # the newest, but from the idle LocalQueue
    assert admitted_names(engine.schedule(T0 + 12)) == []
    engine.finish("default", "a1")
    assert admitted_names(engine.schedule(T0 + 13)) == ["b1"]


def test_a_new_local_queue_goes_before_busy_ones() -> None:
    """Kueue: "admits workload from new LocalQueue when all others have high usage"."""
    engine = _engine()
    engine.sample_admission_fair_sharing(T0)
    _submit(engine, "a1", "lq-a", 0)
    _submit(engine, "b1", "lq-b", 1)
    decisions = engine.schedule(T0 + 1)
    _confirm(engine, decisions, 1)
    for t in range(2, 6):
        engine.sample_admission_fair_sharing(T0 + t)
    for i, (name, queue) in enumerate([("a2", "lq-a"), ("a3", "lq-a"), ("b2", "lq-b"), ("c1", "lq-c")]):
        _submit(engine, name, queue, 2 + i)
    engine.finish("default", "a1")
    assert admitted_names(engine.schedule(T0 + 7)) == ["c1"]


def _seeded(engine: Engine, name: str, cpu: str, **spec: Any) -> None:
    lq = local_queue(name, "cq1", **spec)
    lq["status"] = {
        "fairSharing": {
            "weightedShare": 0,
            "admissionFairSharingStatus": {"consumedResources": {"cpu": cpu}, "lastUpdate": format_time(T0)},
        }
    }
    engine.delete_local_queue("default", name)
    engine.upsert(lq)


def test_weight_divides_usage() -> None:
    """lq-a consumed twice what lq-b did, but with weight 4 its usage is half of lq-b's."""
    engine = _engine()
    _seeded(engine, "lq-a", "4", fairSharing={"weight": "4"})
    _seeded(engine, "lq-b", "2")
    assert engine.local_queue_usage("default", "lq-a") == 1.0
    assert engine.local_queue_usage("default", "lq-b") == 2.0
    _submit(engine, "b1", "lq-b", 0)
    _submit(engine, "a1", "lq-a", 1)
    engine.upsert(
        cluster_queue(
            "cq1",
            quotas({"default": {"cpu": 4}}),
            admissionScope={"admissionMode": "UsageBasedAdmissionFairSharing"},
        )
    )
    assert admitted_names(engine.schedule(T0 + 1)) == ["a1"]


def test_resource_weights() -> None:
    """``resourceWeights``: a resource weighted 0 does not count."""
    engine = _engine(
        afs=AdmissionFairSharing(usage_half_life=2, sampling_interval=1, resource_weights={"cpu": 0})
    )
    _seeded(engine, "lq-a", "8")
    assert engine.local_queue_usage("default", "lq-a") == 0.0


def test_status_shows_consumed_resources_decaying() -> None:
    engine = _engine()
    engine.sample_admission_fair_sharing(T0)
    status = engine.local_queue_status("default", "lq-a")["fairSharing"]["admissionFairSharingStatus"]
    assert status == {"consumedResources": {}, "lastUpdate": format_time(T0)}
    _submit(engine, "a1", "lq-a", 0)
    decisions = engine.schedule(T0)
    _confirm(engine, decisions, 0)  # admitted at T0: the penalty (4 cpu x alpha) settles
    alpha = 1 - 0.5**0.5
    ledger = engine._ledgers[("default", "lq-a")]
    assert ledger.pending == {}
    assert ledger.consumed["cpu"] == math.floor(4 * NANO * alpha)
    values = []
    for t in range(1, 4):
        assert engine.sample_admission_fair_sharing(T0 + t) == [
            ("default", "lq-a"),
            ("default", "lq-b"),
            ("default", "lq-c"),
        ]
        values.append(ledger.consumed["cpu"])
    assert values[0] < values[1] < values[2] < 4 * NANO  # towards the 4 cpu it uses
    engine.finish("default", "a1")
    for t in range(4, 7):
        engine.sample_admission_fair_sharing(T0 + t)
        values.append(ledger.consumed["cpu"])
    assert values[2] > values[3] > values[4] > values[5] > 0  # decays once it uses nothing
    assert values[5] == pytest.approx(values[2] * 0.5**1.5, rel=1e-6)
    status = engine.local_queue_status("default", "lq-a")["fairSharing"]["admissionFairSharingStatus"]
    assert status == {"consumedResources": {"cpu": format_nano(values[5])}, "lastUpdate": format_time(T0 + 6)}
    # not due yet: nothing sampled
    assert engine.sample_admission_fair_sharing(T0 + 6.5) == []


def test_status_seeds_the_ledger_after_a_restart() -> None:
    """Kueue: "should retain the LocalQueue's historical usage across a restart"."""
    engine = _engine(cpu=4)
    _seeded(engine, "lq-a", "6")
    assert engine.local_queue_usage("default", "lq-a") == 6.0
    _submit(engine, "a1", "lq-a", 0)
    _submit(engine, "b1", "lq-b", 1)
    assert admitted_names(engine.schedule(T0 + 1)) == ["b1"]


def test_penalty_dropped_when_the_reservation_is_rolled_back() -> None:
    engine = _engine()
    _submit(engine, "a1", "lq-a", 0)
    assert admitted_names(engine.schedule(T0)) == ["a1"]
    assert engine.local_queue_usage("default", "lq-a") > 0  # the entry penalty
    engine.forget("default", "a1")
    assert engine.local_queue_usage("default", "lq-a") == 0


def test_ledger_penalties_do_not_stack() -> None:
    """Kueue: "should not stack entry penalties when an evicted workload reserves quota again"."""
    ledger = UsageLedger()
    ledger.push(("ns", "w"), {"cpu": 10})
    ledger.push(("ns", "w"), {"cpu": 10})
    assert ledger.pending == {"cpu": 10}
    assert ledger.drop(("ns", "w")) == {"cpu": 10}
    assert ledger.pending == {}


@pytest.mark.parametrize("fair", [False, True])
@pytest.mark.parametrize("afs", [AFS, None])
def test_preemption_takes_first_from_the_local_queue_that_used_more(
    afs: AdmissionFairSharing | None, fair: bool
) -> None:
    """Kueue: "should preempt a workload from LQ with higher recent usage": among candidates of
    one ClusterQueue, the LocalQueue's usage comes before priority."""
    engine = Engine(admission_fair_sharing=afs, fair_sharing=fair)
    engine.upsert(flavor("default"))
    mode = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    engine.upsert(
        cluster_queue(
            "cq1",
            quotas({"default": {"cpu": 16}}),
            cohort="all",
            preemption={"withinClusterQueue": "Never"},
            queueingStrategy="StrictFIFO",
            admissionScope=mode,
        )
    )
    engine.upsert(
        cluster_queue(
            "cq2",
            quotas({"default": {"cpu": 16}}),
            cohort="all",
            preemption={"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        )
    )
    for name, cq in (("lq-a", "cq1"), ("lq-b", "cq1"), ("lq-c", "cq2")):
        engine.upsert(local_queue(name, cq))
    engine.upsert_workload(workload("high-a", "lq-a", priority=10, created=0, cpu="20"))
    engine.upsert_workload(workload("low-b", "lq-b", priority=1, created=1, cpu="12"))
    assert sorted(admitted_names(engine.schedule(T0 + 2))) == ["high-a", "low-b"]
    engine.upsert_workload(workload("c", "lq-c", created=3, cpu="10"))
    victims = [p.victim[1] for p in engine.schedule(T0 + 4).preemptions]
    assert victims == (["high-a"] if afs is not None else ["low-b"])
