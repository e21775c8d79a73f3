"""bench/scalability.py makes Kueue's scalability objects (test/performance/scheduler/runner/generator),
with Kueue's names, shapes and counts, and computes Kueue's recorder figures the way Kueue does."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from types import ModuleType
from typing import Any

import pytest

from tests.bench.conftest import BENCH
from tests.kadmit_local import ENGINE_BUILD

Obj = dict[str, Any]


def plan_of(scalability: ModuleType, config: str, scale: float = 1.0) -> Any:
    cohorts = scalability.parse_generator(scalability.SCENARIOS[config].generator)
    return scalability.build_plan(scalability.scaled(cohorts, scale))


def test_baseline_counts_and_names(scalability: ModuleType) -> None:
    plan = plan_of(scalability, "baseline")
    assert len(plan.queues) == 30
    assert Counter(q.cohort for q in plan.queues) == {f"cohort-{i}": 6 for i in range(5)}
    assert {q.name for q in plan.queues} == {f"cq-0-{i}-cohort-{c}" for i in range(6) for c in range(5)}
    assert plan.workload_count == 15_000
    assert plan.class_counts() == {"small": 10_500, "medium": 3_000, "large": 1_500}
    for queue in plan.queues:  # a Namespace and a LocalQueue per ClusterQueue, all of one name
        assert queue.namespace["metadata"]["name"] == queue.name
        assert queue.local_queue["metadata"] == {"name": queue.name, "namespace": queue.name}
        assert queue.local_queue["spec"] == {"clusterQueue": queue.name}
        assert [s.interval_s for s in queue.workload_sets] == [0.1, 0.5, 1.2]
        assert [len(s.workloads) for s in queue.workload_sets] == [350, 100, 50]
        names = [w["metadata"]["name"] for s in queue.workload_sets for w in s.workloads]
        assert len(set(names)) == 500
        assert names[0] == "small-0-0-0" and names[349] == "small-0-349-0"
        assert names[350] == "medium-1-0-0" and names[-1] == "large-2-49-0"
        assert all(w["metadata"]["namespace"] == queue.name for s in queue.workload_sets for w in s.workloads)


def test_large_scale_counts(scalability: ModuleType) -> None:
    plan = plan_of(scalability, "large-scale")
    assert len(plan.queues) == 1_000
    assert len({q.cohort for q in plan.queues}) == 10
    assert plan.workload_count == 50_000
    assert plan.class_counts() == {"small": 35_000, "medium": 11_000, "large": 4_000}
    assert [s.interval_s for s in plan.queues[0].workload_sets] == [0.06, 0.3, 0.7]


def test_cluster_queue_shape(scalability: ModuleType) -> None:
    queue = plan_of(scalability, "baseline").queues[0]
    assert queue.cluster_queue == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {
            "name": "cq-0-0-cohort-0",
            "labels": {
                "kueue.x-k8s.io/performance-scheduler-class": "cq",
                "kueue.x-k8s.io/performance-scheduler-cleanup": "true",
            },
        },
        "spec": {
            "cohortName": "cohort-0",
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
            "resourceGroups": [{
                "coveredResources": ["cpu"],
                "flavors": [{"name": "rf", "resources": [
                    {"name": "cpu", "nominalQuota": "20", "borrowingLimit": "100"}]}],
            }],
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        },
    }


def test_workload_shape(scalability: ModuleType) -> None:
    """One pod set "main" of one pod, container "c" requesting the class's cpu; spec.priority, not a
    WorkloadPriorityClass (Kueue's generator makes none)."""
    queue = plan_of(scalability, "baseline").queues[0]
    shapes = {s.workloads[0]["metadata"]["name"]: s.workloads[0] for s in queue.workload_sets}
    assert shapes["large-2-0-0"] == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "large-2-0-0",
            "namespace": "cq-0-0-cohort-0",
            "labels": {
                "kueue.x-k8s.io/performance-scheduler-running-ms": "1000",
                "kueue.x-k8s.io/performance-scheduler-class": "large",
            },
        },
        "spec": {
            "queueName": "cq-0-0-cohort-0",
            "priority": 200,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "20"}}}],
            }}}],
        },
    }
    small, medium = shapes["small-0-0-0"], shapes["medium-1-0-0"]
    assert (small["spec"]["priority"], scalability.request_milli(small)) == (50, 1000)
    assert (medium["spec"]["priority"], scalability.request_milli(medium)) == (100, 5000)
    assert medium["metadata"]["labels"]["kueue.x-k8s.io/performance-scheduler-running-ms"] == "500"
    plan = plan_of(scalability, "baseline")
    assert plan.resource_flavor == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
        "metadata": {"name": "rf", "labels": {"kueue.x-k8s.io/performance-scheduler-cleanup": "true"}},
        "spec": {},
    }


def test_scale_keeps_queues_and_pacing(scalability: ModuleType) -> None:
    plan = plan_of(scalability, "baseline", 0.01)
    assert len(plan.queues) == 30
    assert [len(s.workloads) for s in plan.queues[0].workload_sets] == [4, 1, 1]  # at least one each
    assert [s.interval_s for s in plan.queues[0].workload_sets] == [0.1, 0.5, 1.2]


def test_a_config_without_cohorts_is_refused(scalability: ModuleType) -> None:
    with pytest.raises(ValueError, match="at least one cohort"):
        scalability.parse_generator("cohorts: []")


def one_queue(*sets: str, nominal: int) -> str:
    """A generator config of one cohort with one ClusterQueue and these workloads sets."""
    return f"""
cohorts:
- className: cohort
  count: 1
  queuesSets:
  - className: cq
    count: 1
    nominalQuota: {nominal}
    borrowingLimit: 0
    reclaimWithinCohort: Any
    withinClusterQueue: LowerPriority
    workloadsSets:
""" + "".join(sets)


def workloads_set(count: int, interval_ms: int, name: str, runtime_ms: int, priority: int) -> str:
    return (f"    - count: {count}\n      creationIntervalMs: {interval_ms}\n      workloads:\n"
            f"      - {{className: {name}, runtimeMs: {runtime_ms}, priority: {priority}, request: 1}}\n")


def test_the_floor_admits_as_quota_frees_with_no_latency(scalability: ModuleType) -> None:
    """Created at 0.1, 0.2 and 0.3 s into room for two: the third starts when the first ends."""
    config = one_queue(workloads_set(3, 100, "small", 1000, 50), nominal=2)
    floor = scalability.zero_latency_floor(scalability.build_plan(scalability.parse_generator(config)))
    assert floor.wall_s == pytest.approx(2.1)
    assert (floor.finished, floor.admissions, floor.evictions) == (3, 3, 0)
    assert floor.last_done_s == {"small": pytest.approx(2.1)}


def test_the_floors_preempted_workload_starts_over(scalability: ModuleType) -> None:
    """Room for one: the low one runs from 0.1 s, the high one arrives at 0.5 s and preempts it
    (LowerPriority); the low one's quota is free at once, and it runs again, whole, from 1.5 s."""
    config = one_queue(workloads_set(1, 100, "low", 1000, 50), workloads_set(1, 500, "high", 1000, 200),
                       nominal=1)
    floor = scalability.zero_latency_floor(scalability.build_plan(scalability.parse_generator(config)))
    assert (floor.admissions, floor.evictions) == (3, 1)
    assert floor.last_done_s == {"high": pytest.approx(1.5), "low": pytest.approx(2.5)}
    assert floor.wall_s == pytest.approx(2.5)


def test_the_runners_writes_free_quota_only_once_written(scalability: ModuleType) -> None:
    """As the first test, with each runner write 50 ms: the first's quota is free at 1.15 s, so the
    third runs from 1.15 s and its Finished is written at 2.2 s."""
    config = one_queue(workloads_set(3, 100, "small", 1000, 50), nominal=2)
    floor = scalability.zero_latency_floor(scalability.build_plan(scalability.parse_generator(config)), 0.05)
    assert (floor.finished, floor.admissions, floor.evictions) == (3, 3, 0)
    assert floor.wall_s == pytest.approx(2.2)


def test_the_runners_workers_take_writes_first_come_first_served(scalability: ModuleType) -> None:
    """Three runs end at 0.2, 0.3 and 0.4 s; writes take 0.25 s. One worker writes them one after
    another (done at 0.45, 0.7 and 0.95 s); five write each as its run ends."""
    plan = scalability.build_plan(scalability.parse_generator(
        one_queue(workloads_set(3, 100, "small", 100, 50), nominal=3)))
    assert scalability.zero_latency_floor(plan, 0.25, runner_workers=1).wall_s == pytest.approx(0.95)
    assert scalability.zero_latency_floor(plan, 0.25).wall_s == pytest.approx(0.65)


def test_a_preemptor_waits_for_the_runner_to_complete_the_eviction(scalability: ModuleType) -> None:
    """As the preemption test, with each runner write 0.2 s: the high one starts when the low one's
    eviction is written (0.7 s) and is written Finished at 1.9 s; the low one, queued again,
    runs from then and is written Finished at 3.1 s."""
    config = one_queue(workloads_set(1, 100, "low", 1000, 50), workloads_set(1, 500, "high", 1000, 200),
                       nominal=1)
    floor = scalability.zero_latency_floor(scalability.build_plan(scalability.parse_generator(config)), 0.2)
    assert (floor.admissions, floor.evictions) == (3, 1)
    assert floor.last_done_s == {"high": pytest.approx(1.9), "low": pytest.approx(3.1)}


def test_the_floor_counts_a_workload_that_never_fits(scalability: ModuleType) -> None:
    """A request of 2 CPUs in a ClusterQueue of 1 (no borrowing) never starts: the floor ends
    with the one that fits and says how many finished."""
    too_large = workloads_set(1, 100, "small", 1000, 50).replace("request: 1", "request: 2")
    config = one_queue(too_large, nominal=1)
    config += workloads_set(1, 200, "fits", 500, 50)
    floor = scalability.zero_latency_floor(scalability.build_plan(scalability.parse_generator(config)))
    assert (floor.finished, floor.admissions) == (1, 1)
    assert floor.last_done_s == {"fits": pytest.approx(0.7)}


def test_the_floor_alone_needs_no_cluster() -> None:
    result = subprocess.run(
        [sys.executable, str(BENCH / "scalability.py"), "--floor", "--scale", "0.02"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    wall = re.search(r"the last workload finishes at ([\d.]+) s", result.stdout)
    assert wall is not None and float(wall[1]) > 0, result.stdout
    per_class = re.search(r"last finish per class: large ([\d.]+) s, medium ([\d.]+) s, small ([\d.]+) s",
                          result.stdout)
    assert per_class is not None and max(map(float, per_class.groups())) == float(wall[1]), result.stdout
    assert "kadmit local" not in result.stdout  # nothing was started


def test_the_floor_with_the_runners_writes_taking_time() -> None:
    command = [sys.executable, str(BENCH / "scalability.py"), "--floor", "--scale", "0.02"]
    result = subprocess.run([*command, "--runner-write-ms", "4"], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "only the runner's writes taking time (5 workers" in result.stdout, result.stdout
    for bad in (["--runner-write-ms", "-1"], ["--runner-write-ms", "nan"]):
        refused = subprocess.run([*command, *bad], capture_output=True, text=True, timeout=60, check=False)
        assert refused.returncode == 2, refused.stderr
        assert "--runner-write-ms must be 0 or more" in refused.stderr, refused.stderr
    alone = subprocess.run([sys.executable, str(BENCH / "scalability.py"), "--runner-write-ms", "4"],
                           capture_output=True, text=True, timeout=60, check=False)
    assert alone.returncode == 2 and "goes with --floor" in alone.stderr, alone.stderr


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def cq_event(name: str, usage: str, pending: int = 0, reserving: int = 0) -> Obj:
    return {
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/performance-scheduler-class": "cq"}},
        "spec": {"cohortName": "cohort-0", "resourceGroups": [{"flavors": [{"name": "rf", "resources": [
            {"name": "cpu", "nominalQuota": "20"}]}]}]},
        "status": {"flavorsUsage": [{"name": "rf", "resources": [{"name": "cpu", "total": usage}]}],
                   "pendingWorkloads": pending, "reservingWorkloads": reserving,
                   "conditions": [{"type": "Active", "status": "True"}]},
    }


def test_cluster_queue_usage_is_kueues_formula(scalability: ModuleType) -> None:
    """CPUUsed integrates each queue's last usage until its next event; the class's usage is
    CPUUsed x 100 / (summed nominal quota x the class's first-to-last event time)."""
    plan = plan_of(scalability, "baseline", 0.01)
    clock = Clock()
    recorder = scalability.Recorder(plan, clock=clock)
    recorder.on_cluster_queue("ADDED", cq_event("a", "0"), None)
    recorder.on_cluster_queue("ADDED", cq_event("b", "0"), None)
    recorder.on_cluster_queue("MODIFIED", cq_event("a", "20", reserving=1), None)
    clock.now += 10
    recorder.on_cluster_queue("MODIFIED", cq_event("a", "10", reserving=1), None)  # 20 cpu for 10 s
    clock.now += 10
    recorder.on_cluster_queue("MODIFIED", cq_event("a", "0"), None)  # 10 cpu for 10 s
    recorder.on_cluster_queue("MODIFIED", cq_event("b", "0"), None)
    average, percent, elapsed_ms = scalability.class_usage(recorder)["cq"]
    assert elapsed_ms == 20_000
    assert average == pytest.approx(15.0)  # (20 x 10 + 10 x 10) cpu-s over 20 s
    assert percent == pytest.approx(37.5)  # of 2 x 20 cpu


def test_the_run_ends_once_every_queue_was_seen_and_none_has_work(scalability: ModuleType) -> None:
    """Kueue's ``expectMoreEvents``: more events are expected until every ClusterQueue of the plan
    was seen, while an active one counts pending or reserving Workloads; an inactive one does not
    hold the end back."""
    plan = plan_of(scalability, "baseline", 0.01)
    recorder = scalability.Recorder(plan, clock=Clock())
    names = sorted(q.name for q in plan.queues)
    recorder.generation_done = 1.0
    recorder.finished = recorder.expected
    for name in names[:-1]:
        recorder.on_cluster_queue("ADDED", cq_event(name, "0"), None)
    assert recorder.expect_more_events() and not recorder.ended.is_set()  # one not seen yet
    recorder.on_cluster_queue("ADDED", cq_event(names[-1], "1", pending=2), None)
    assert recorder.expect_more_events()
    recorder.on_cluster_queue("MODIFIED", cq_event(names[0], "1", reserving=1), None)
    recorder.on_cluster_queue("MODIFIED", cq_event(names[-1], "0"), None)
    assert recorder.expect_more_events() and not recorder.ended.is_set()  # names[0] reserves
    inactive = cq_event(names[0], "1", reserving=1)
    inactive["status"]["conditions"][0]["status"] = "False"
    recorder.on_cluster_queue("MODIFIED", inactive, None)
    assert not recorder.expect_more_events() and recorder.ended.is_set()


def workload_event(cq: str, name: str, cpu: str, *conditions: str) -> Obj:
    return {
        "metadata": {"name": name, "namespace": cq, "uid": f"{cq}/{name}",
                     "creationTimestamp": "2026-01-01T00:00:00Z",
                     "labels": {"kueue.x-k8s.io/performance-scheduler-class": "small"}},
        "spec": {"podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]},
        "status": {"conditions": [
            {"type": kind, "status": "True", "lastTransitionTime": "2026-01-01T00:00:03Z"}
            for kind in conditions
        ]},
    }


def test_a_stall_is_time_without_admissions_while_something_fits(scalability: ModuleType) -> None:
    plan = plan_of(scalability, "baseline", 0.01)
    clock = Clock()
    recorder = scalability.Recorder(plan, clock=clock)
    cq = "cq-0-0-cohort-0"
    recorder.on_workload("ADDED", workload_event(cq, "big", "120"), None)  # the whole cohort
    clock.now += 1
    recorder.on_workload("MODIFIED", workload_event(cq, "big", "120", "Admitted"), None)
    recorder.on_workload("ADDED", workload_event(cq, "small", "1"), None)  # does not fit: no stall
    clock.now += 30
    assert recorder.fits.gap_start() is None and recorder.fits.fitting() == []
    recorder.on_workload("MODIFIED", workload_event(cq, "big", "120", "Admitted", "Finished"), None)
    assert recorder.fits.gap_start() == pytest.approx(1031.0)  # what the stall lines describe
    assert recorder.fits.fitting() == [("cohort-0", 120_000, cq, 1000)]
    clock.now += 4  # fits from here, admitted 4 s later
    recorder.on_workload("MODIFIED", workload_event(cq, "small", "1", "Admitted"), None)
    assert recorder.fits.gap_start() is None
    recorder.fits.end(clock.now)
    assert recorder.fits.gap.longest == pytest.approx(4.0)
    assert recorder.fits.gap.longest_start == pytest.approx(1031.0)
    watched = sorted(r.watched_time_to_admit for r in recorder.workloads.values())
    assert watched == [pytest.approx(1.0), pytest.approx(34.0)]  # created at 1001, admitted at 1035
    assert {r.time_to_admit_ms for r in recorder.workloads.values()} == {3000}  # API timestamps


def test_the_cohorts_quota_is_split_by_what_held_it_or_kept_it_free(scalability: ModuleType) -> None:
    """Running, held past its running time, held while evicted, free while something fitted, free:
    the parts add up to the cohorts' quota over the window, and nothing before it counts."""
    plan = plan_of(scalability, "baseline", 0.01)
    clock = Clock()
    clock.now = 995.0
    recorder = scalability.Recorder(plan, clock=clock)
    cq = "cq-0-0-cohort-0"  # its cohort: 6 x 20 CPU, and this queue may borrow up to 120

    def event(name: str, cpu: str, running_ms: int, *conditions: str) -> Obj:
        wl = workload_event(cq, name, cpu, *conditions)
        wl["metadata"]["labels"]["kueue.x-k8s.io/performance-scheduler-running-ms"] = str(running_ms)
        return wl

    def at(now: float, kind: str, wl: Obj) -> None:
        clock.now = now
        recorder.on_workload(kind, wl, None)

    at(995, "ADDED", event("a", "100", 2000))  # before the window: its wait does not count
    recorder.fits.quota_time.open(1000.0)
    at(1001, "MODIFIED", event("a", "100", 2000, "Admitted"))
    at(1002, "ADDED", event("b", "50", 1000))  # 20 CPU free: it does not fit
    at(1005, "MODIFIED", event("a", "100", 2000, "Admitted", "Finished"))  # ran 2 s, held 2 s more
    at(1006, "MODIFIED", event("b", "50", 1000, "Admitted"))
    at(1007, "MODIFIED", event("b", "50", 1000, "Admitted", "Evicted"))  # held while evicted
    at(1009, "MODIFIED", event("b", "50", 1000, "Evicted"))  # pending again, and it fits
    recorder.end(1010.0)
    recorder.on_workload("MODIFIED", event("b", "50", 1000, "Evicted"), None)  # after the end: nothing

    cpu_s = {part: milli_s / 1000 for part, milli_s in recorder.fits.quota_time.milli_s().items()}
    assert cpu_s == {
        "running": pytest.approx(100 * 2 + 50 * 1),
        "past its running time": pytest.approx(100 * 2),
        "evicted": pytest.approx(50 * 2),
        # 1000-1001, 1005-1006 and 1009-1010
        "free while a workload fitted": pytest.approx(120 * 1 + 120 * 1 + 120 * 1),
        "free, nothing fitted": pytest.approx(20 * 4 + 70 * 3 + 4 * 120 * 10),  # the other four cohorts idle
    }
    assert sum(cpu_s.values()) == pytest.approx(5 * 120 * 10)
    assert sum(recorder.fits.quota_time.shares().values()) == pytest.approx(1.0)
    assert recorder.fits.quota_time.milli_s(1005.0, 1007.0)["running"] == pytest.approx(50_000)  # b's 1 s


def test_a_quick_run_against_kadmit_local() -> None:
    """The whole benchmark at 1% of the baseline: kadmit admits and the runner finishes all 180."""
    result = subprocess.run(
        [sys.executable, str(BENCH / "scalability.py"), "--scale", "0.01", "--progress", "0",
         "--timeout", "60"],
        capture_output=True, text=True, timeout=100, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ended: every workload finished (180)" in result.stdout, result.stdout
    assert "kadmit + API server (one process)" in result.stdout or "API server" in result.stdout
    assert f"kadmit's engine: {ENGINE_BUILD}" in result.stdout, result.stdout
    # the wall beside the floor: the same plan with no latency can only be quicker
    walls = re.search(r"wall from generation start \(s\) +([\d.]+) +\(with no latency anywhere: ([\d.]+)",
                      result.stdout)
    assert walls is not None and 0 < float(walls[2]) <= float(walls[1]), result.stdout
    # ... and beside the floor with the runner's writes as long as they were: between the two
    runner = re.search(r"\(with only the runner's writes taking time, ([\d.]+) ms each .*: ([\d.]+)\)",
                       result.stdout)
    assert runner is not None and float(runner[1]) > 0, result.stdout
    assert float(walls[2]) <= float(runner[2]) <= float(walls[1]), result.stdout
    # each class's row ends with when its last Finished was seen and how late the runner wrote it
    rows = re.findall(r"^  (large|medium|small) .* (\S+) +(\S+)$", result.stdout, re.MULTILINE)
    assert {row[0] for row in rows} == {"large", "medium", "small"}, result.stdout
    for _, last_done, late in rows:
        assert 0 < float(last_done) < 60 and 0 <= float(late) < 60, result.stdout
    # the webhook probe reached kadmit's webhook as the API server does, and every review was answered
    probe = re.search(r"webhook round trip \(.*?([\d,]+) answered, (\d+) failed", result.stdout)
    assert probe is not None and int(probe[1].replace(",", "")) > 0 and probe[2] == "0", result.stdout


def test_a_quick_run_without_webhooks_as_kueues_harness() -> None:
    """``--without-webhooks``: the API server calls none of kadmit's webhooks, every workload still
    finishes, and the probe still reaches kadmit's webhook server."""
    result = subprocess.run(
        [sys.executable, str(BENCH / "scalability.py"), "--scale", "0.01", "--progress", "0",
         "--timeout", "60", "--without-webhooks"],
        capture_output=True, text=True, timeout=100, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    deleted = re.search(r"kadmit's (\d+) webhooks deleted", result.stdout)
    assert deleted is not None and int(deleted[1]) > 10, result.stdout
    assert "ended: every workload finished (180)" in result.stdout, result.stdout
    probe = re.search(r"webhook round trip \(.*?([\d,]+) answered, (\d+) failed", result.stdout)
    assert probe is not None and int(probe[1].replace(",", "")) > 0 and probe[2] == "0", result.stdout


def test_a_stall_while_an_eviction_is_in_flight_is_counted_apart(scalability: ModuleType) -> None:
    plan = plan_of(scalability, "baseline", 0.01)
    clock = Clock()
    recorder = scalability.Recorder(plan, clock=clock)
    cq = "cq-0-0-cohort-0"
    recorder.on_workload("ADDED", workload_event(cq, "victim", "100"), None)
    recorder.on_workload("MODIFIED", workload_event(cq, "victim", "100", "Admitted"), None)
    recorder.on_workload("ADDED", workload_event(cq, "small", "1"), None)  # fits in the 20 left
    clock.now += 1
    # A preemptor's victim, still holding its quota: the cohort is not settled for 5 s.
    recorder.on_workload("MODIFIED", workload_event(cq, "victim", "100", "Admitted", "Evicted"), None)
    clock.now += 5
    recorder.on_workload("MODIFIED", workload_event(cq, "victim", "100"), None)  # released, pending again
    clock.now += 1
    recorder.on_workload("MODIFIED", workload_event(cq, "small", "1", "Admitted"), None)
    recorder.fits.end(clock.now)
    assert recorder.fits.gap.longest == pytest.approx(7.0)  # fitted all along, in the quota-only view
    assert recorder.fits.settled_gap.longest == pytest.approx(1.0)  # from the release to the admission
    assert recorder.fits.settled_gap.longest_start == pytest.approx(1006.0)
