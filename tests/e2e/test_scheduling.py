"""Quota on a real (local) cluster: waiting for room, preemption and re-admission, a restart mid-run,
and a Workload created without any job."""

from __future__ import annotations

from typing import Any

from kadmit.kube.resources import CLUSTER_QUEUES, JOBS, WORKLOADS
from tests.e2e.conftest import Env, eventually, fast_config
from tests.e2e.helpers import (
    apply_small_setup,
    condition,
    condition_of,
    is_admitted,
    is_complete,
    is_running,
    is_stopped,
    job,
    wait_job,
    wait_workload,
)


async def test_second_job_waits_for_quota_and_starts_when_the_first_finishes(env: Env) -> None:
    await env.start_manager()
    await apply_small_setup(env)
    await env.kube.create(JOBS, job("first", cpu="2", parallelism=2, runtime="1s", queue="small"))
    await wait_job(env, "first", is_running, "started")
    await env.kube.create(JOBS, job("second", cpu="2", parallelism=2, runtime="200ms", queue="small"))
    pending = await wait_workload(env, "second", lambda w: condition(w, "QuotaReserved") == "False",
                                  "QuotaReserved=False while the quota is taken")
    reason = condition_of(pending, "QuotaReserved")
    assert reason is not None and "insufficient unused quota" in reason["message"], reason
    second = await env.kube.get(JOBS, "default", "second")
    assert second["spec"]["suspend"] is True
    await wait_job(env, "first", is_complete, "complete")
    await wait_job(env, "second", is_running, "started after the first finished")
    await wait_job(env, "second", is_complete, "complete")


async def test_higher_priority_preempts_and_the_victim_is_restored_and_readmitted(env: Env) -> None:
    await env.start_manager()
    await apply_small_setup(env)
    await env.kube.create(JOBS, job("low", cpu="2", parallelism=2, runtime="1500ms", queue="small",
                                    priority_class="low"))
    running = await wait_job(env, "low", is_running, "started")
    assert running["spec"]["template"]["spec"]["nodeSelector"] == {"kadmit.dev/pool": "cpu"}
    await env.kube.create(JOBS, job("high", cpu="2", parallelism=2, runtime="200ms", queue="small",
                                    priority_class="high"))
    victim = await wait_workload(env, "low", lambda w: condition(w, "Preempted") == "True", "preempted")
    evicted = condition_of(victim, "Evicted")
    assert evicted is not None and evicted["reason"] == "Preempted"
    preempted = condition_of(victim, "Preempted")
    assert preempted is not None and preempted["reason"] == "InClusterQueue"
    # stopped, with the injected nodeSelector taken back
    stopped = await wait_job(env, "low", is_stopped, "suspended and restored")
    assert "nodeSelector" not in stopped["spec"]["template"]["spec"]
    await wait_job(env, "high", is_complete, "complete")
    readmitted = await wait_workload(
        env, "low", lambda w: is_admitted(w) and condition(w, "Evicted") == "False", "re-admitted")
    requeued = condition_of(readmitted, "Requeued")
    assert requeued is not None and requeued["status"] == "True"
    await wait_job(env, "low", is_complete, "complete after re-admission", within=20)


async def test_manager_restart_keeps_every_admission(env: Env) -> None:
    manager = await env.start_manager()
    await apply_small_setup(env)
    for name in ("a", "b", "c"):
        await env.kube.create(JOBS, job(name, cpu="1", parallelism=2, runtime="30s", queue="small"))
    await eventually(lambda: _admitted_count(env), what="two admissions, their Jobs started")
    before = {w["metadata"]["name"]: w["status"]["admission"] for w in
              (await env.kube.list(WORKLOADS, "default"))["items"] if is_admitted(w)}
    assert len(before) == 2
    await env.stop_manager(manager)
    replacement = await env.start_manager(fast_config())
    usage = replacement.engine.usage("small")
    assert usage == {("cpu", "cpu"): 4000, ("cpu", "memory"): 4 * 100 * 1024 * 1024 * 1000}, usage
    await replacement.scheduler.cycle()
    after = {w["metadata"]["name"]: w["status"]["admission"] for w in
             (await env.kube.list(WORKLOADS, "default"))["items"] if is_admitted(w)}
    assert after == before  # none doubled, none lost
    running = [j for j in (await env.kube.list(JOBS, "default"))["items"] if not j["spec"]["suspend"]]
    assert len(running) == 2


async def _admitted_count(env: Env) -> bool:
    """Two Workloads admitted and their two Jobs started (kadmit starts a Job after the admission)."""
    items = (await env.kube.list(WORKLOADS, "default"))["items"]
    jobs = (await env.kube.list(JOBS, "default"))["items"]
    started = sum(1 for j in jobs if j["spec"].get("suspend") is False)
    return sum(1 for w in items if is_admitted(w)) == 2 and started == 2


async def test_a_workload_created_directly_is_admitted(env: Env) -> None:
    await env.start_manager()
    await apply_small_setup(env)
    await env.kube.create(WORKLOADS, {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": "direct", "namespace": "default"},
        "spec": {"queueName": "small", "podSets": [{
            "name": "main", "count": 2,
            "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}]},
    })

    async def admitted() -> bool:
        wl = await env.kube.get(WORKLOADS, "default", "direct")
        return is_admitted(wl) and condition(wl, "QuotaReserved") == "True"

    await eventually(admitted, what="the direct Workload admitted")
    wl = await env.kube.get(WORKLOADS, "default", "direct")
    assert wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["cpu"] == "2"


async def test_changing_the_priority_class_label_changes_the_workload_priority(env: Env) -> None:
    await env.start_manager()
    await apply_small_setup(env)
    await env.kube.create(JOBS, job("waiting", cpu="5", parallelism=1, queue="small", priority_class="low"))
    wl = await wait_workload(env, "waiting", lambda w: w["spec"].get("priority") == 10, "priority 10")
    assert wl["spec"]["priorityClassRef"]["name"] == "low"
    await env.kube.patch(JOBS, "default", "waiting",
                         {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "high"}}})
    wl = await wait_workload(env, "waiting", lambda w: w["spec"].get("priority") == 1000, "priority 1000")
    assert wl["spec"]["priorityClassRef"] == {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                              "name": "high"}


async def test_partial_admission_runs_the_job_with_what_fits(env: Env) -> None:
    await env.start_manager()
    await apply_small_setup(env)
    partial = job("partial", cpu="1", parallelism=8, runtime="200ms", queue="small")
    partial["metadata"]["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": "2"}
    await env.kube.create(JOBS, partial)
    started = await wait_job(env, "partial", is_running, "started with the pods that fit")
    assert started["spec"]["parallelism"] == 4  # 4 CPUs of quota, 1 CPU per pod
    done = await wait_job(env, "partial", is_complete, "complete")
    assert done["spec"]["parallelism"] == 4
    wl = await wait_workload(env, "partial", lambda w: condition(w, "Finished") == "True", "finished")
    assert wl["status"]["admission"]["podSetAssignments"][0]["count"] == 4
    assert wl["spec"]["podSets"][0]["count"] == 8 and wl["spec"]["podSets"][0]["minCount"] == 2


async def test_hold_and_drain_stops_running_jobs_and_a_restart_readmits_them(env: Env) -> None:
    await env.start_manager()
    await apply_small_setup(env)
    await env.kube.create(JOBS, job("drained", cpu="1", parallelism=1, runtime="30s", queue="small"))
    await wait_job(env, "drained", is_running, "started")
    await env.kube.patch(CLUSTER_QUEUES, None, "small", {"spec": {"stopPolicy": "HoldAndDrain"}})

    def requeued_reason(wl: dict[str, Any]) -> str | None:
        found = condition_of(wl, "Requeued")
        return f"{found['status']}/{found['reason']}" if found else None

    wl = await wait_workload(env, "drained", lambda w: requeued_reason(w) == "False/ClusterQueueStopped",
                             "evicted and held while the queue is stopped")
    evicted = condition_of(wl, "Evicted")
    assert evicted is not None and evicted["reason"] == "ClusterQueueStopped"
    assert "admission" not in wl["status"]
    await wait_job(env, "drained", is_stopped, "suspended")
    await env.kube.patch(CLUSTER_QUEUES, None, "small", {"spec": {"stopPolicy": "None"}})
    wl = await wait_workload(env, "drained", is_admitted, "re-admitted after the restart")
    assert requeued_reason(wl) == "True/ClusterQueueRestarted"  # written with the reservation
    await wait_job(env, "drained", is_running, "running again")


async def test_a_deactivated_workload_stops_its_job_and_reactivation_resumes_it(env: Env) -> None:
    await env.start_manager()
    await apply_small_setup(env)
    await env.kube.create(JOBS, job("paused", cpu="1", parallelism=1, runtime="30s", queue="small"))
    await wait_job(env, "paused", is_running, "started")
    wl = await wait_workload(env, "paused", is_admitted, "admitted")
    await env.kube.patch(WORKLOADS, "default", wl["metadata"]["name"], {"spec": {"active": False}})

    def deactivated(w: dict[str, Any]) -> bool:
        evicted = condition_of(w, "Evicted")
        return evicted is not None and evicted["reason"] == "Deactivated" and "admission" not in w["status"]

    await wait_workload(env, "paused", deactivated, "evicted, quota released")
    await wait_job(env, "paused", is_stopped, "suspended")
    await env.kube.patch(WORKLOADS, "default", wl["metadata"]["name"], {"spec": {"active": True}})

    def reactivated(w: dict[str, Any]) -> bool:
        requeued = condition_of(w, "Requeued")
        return is_admitted(w) and requeued is not None and requeued["reason"] == "Reactivated"

    await wait_workload(env, "paused", reactivated, "re-admitted after reactivation")
    await wait_job(env, "paused", is_running, "running again")


async def test_resizing_a_waiting_job_updates_its_workload_in_place(env: Env) -> None:
    await env.start_manager()
    await apply_small_setup(env)
    await env.kube.create(JOBS, job("big", cpu="1", parallelism=6, queue="small"))
    wl = await wait_workload(env, "big", lambda w: condition(w, "QuotaReserved") == "False", "waiting")
    uid = wl["metadata"]["uid"]
    await env.kube.patch(JOBS, "default", "big", {"spec": {"parallelism": 2}})
    resized = await wait_workload(env, "big", is_admitted, "admitted once it fits")
    assert resized["metadata"]["uid"] == uid  # the same Workload, its spec updated
    assert resized["spec"]["podSets"][0]["count"] == 2
