"""MultiKueue on a manager and two workers: dispatch, first to admit wins, the Job runs on the winner."""

from __future__ import annotations

from typing import Any

from kadmit.checks.multikueue import INCREMENTAL
from kadmit.checks.multikueue_remote import ORIGIN_LABEL
from kadmit.kube import ApiError
from kadmit.kube.resources import EVENTS, MULTIKUEUE_CLUSTERS, WORKLOADS
from kadmit.workload import find_condition, is_true
from tests.checks.conftest import JOBS, has_state, state_of
from tests.checks.kueue_standin import suspended_job
from tests.checks.multikueue_fixtures import CHECK, CLUSTER_NAME, NAMESPACE, multikueue_env
from tests.e2e.conftest import eventually

Obj = dict[str, Any]


def running(job: Obj) -> bool:
    return bool((job.get("status") or {}).get("active"))


def finished(job: Obj) -> bool:
    return any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def active(status: str, reason: str) -> Any:
    def check(obj: Obj) -> bool:
        cond = find_condition(obj, "Active") or {}
        return cond.get("status") == status and cond.get("reason") == reason

    return check


async def absent(kueue: Any, kind: Any, name: str) -> bool:
    try:
        await kueue.get(kind, NAMESPACE, name)
    except ApiError as exc:
        return exc.not_found
    return False


async def deactivate(kueue: Any, name: str) -> None:
    for _ in range(20):
        local = await kueue.get(WORKLOADS, NAMESPACE, name)
        local["spec"]["active"] = False
        try:
            await kueue.api.replace(WORKLOADS, local)
            return
        except ApiError as exc:
            if not exc.conflict:
                raise
    raise AssertionError(f"{name}: could not deactivate")


async def test_job_runs_on_the_worker_with_quota_and_its_status_comes_back() -> None:
    async with multikueue_env({"worker1": 4, "worker2": 0}) as env:
        await env.add_worker("worker2")
        await env.submit("sample")
        wl = await env.manager.wait_for(
            WORKLOADS, NAMESPACE, "job-sample", has_state(CHECK, "Ready"), within=20
        )
        assert wl["status"]["clusterName"] == CLUSTER_NAME["worker1"]
        assert not wl["status"].get("nominatedClusterNames")
        assert state_of(wl, CHECK)["message"] == f'The workload was admitted on "{CLUSTER_NAME["worker1"]}"'
        job = await env.manager.wait_for(JOBS, NAMESPACE, "sample", finished, within=20)
        assert job["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
        assert job["status"]["succeeded"] == 1
        await env.manager.wait_for(
            WORKLOADS, NAMESPACE, "job-sample", lambda w: is_true(w, "Finished"), within=10
        )
        # The worker ran it: its pods, its Job with managedBy cleared and our origin label.
        await env.workers["worker1"].wait_gone(JOBS, NAMESPACE, "sample", within=10)  # released once finished
        assert env.worker_kueues["worker1"].admitted == ["job-sample"]
        assert env.worker_kueues["worker2"].admitted == []
        assert await absent(env.workers["worker2"], WORKLOADS, "job-sample")
        assert await absent(env.workers["worker2"], JOBS, "sample")
        metrics = env.plugin.metrics.registry
        for worker, admitted in (("worker1", 1.0), ("worker2", None)):
            labels = {"cluster_queue": "cluster-queue", "cluster": CLUSTER_NAME[worker]}
            assert metrics.get_sample_value("multikueue_workloads_dispatched_total", labels) == 1.0
            assert metrics.get_sample_value("multikueue_workloads_admitted_total", labels) == admitted
        for worker in ("worker1", "worker2"):
            mkc = await env.manager.get(MULTIKUEUE_CLUSTERS, None, CLUSTER_NAME[worker])
            assert active("True", "Active")(mkc)
            assert find_condition(mkc, "Active")["message"] == "Connected"


async def test_the_remote_job_is_a_clean_copy_and_the_loser_holds_nothing() -> None:
    async with multikueue_env({"worker1": 0, "worker2": 4}) as env:
        await env.add_worker("worker2")
        await env.submit("long", runtime="30s")
        wl = await env.manager.wait_for(
            WORKLOADS, NAMESPACE, "job-long", has_state(CHECK, "Ready"), within=20
        )
        assert wl["status"]["clusterName"] == CLUSTER_NAME["worker2"]
        remote = await env.workers["worker2"].wait_for(JOBS, NAMESPACE, "long", lambda j: True, within=10)
        assert "managedBy" not in remote["spec"]
        assert remote["metadata"]["labels"][ORIGIN_LABEL] == "multikueue"
        assert remote["metadata"]["annotations"]["kueue.x-k8s.io/prebuilt-workload-name"] == "job-long"
        copy = await env.workers["worker2"].get(WORKLOADS, NAMESPACE, "job-long")
        assert copy["metadata"]["labels"][ORIGIN_LABEL] == "multikueue"
        assert not copy["metadata"].get("ownerReferences")
        await env.workers["worker1"].wait_gone(WORKLOADS, NAMESPACE, "job-long", within=10)
        # The loser never had the job: its watch of our copies says so, no read before the delete.
        job_path = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/long"
        assert [r for r in env.clusters.workers["worker1"].requests if r.path == job_path] == []
        assert await absent(env.workers["worker1"], JOBS, "long")
        # Evicted on its worker: Retry, evicted here too, dispatched again and admitted again.
        await env.workers["worker2"].set_condition(
            WORKLOADS, NAMESPACE, "job-long", {"type": "Evicted", "status": "True", "reason": "Preempted"}
        )
        await env.manager.wait_for(
            WORKLOADS,
            NAMESPACE,
            "job-long",
            lambda w: (state_of(w, CHECK) or {}).get("retryCount") == 1 and has_state(CHECK, "Ready")(w),
            within=20,
        )
        admitted_again = f'The workload was admitted on "{CLUSTER_NAME["worker2"]}"'

        async def both_admissions_told() -> list[Obj] | None:
            events: list[Obj] = (await env.manager.api.list(EVENTS, NAMESPACE))["items"]
            return events if sum(e["message"] == admitted_again for e in events) >= 2 else None

        # Events are written in the background: the second admission's may land after the verdict.
        events = await eventually(both_admissions_told, within=10, what="the second admission's Event")
        # Kueue's MultiKueue Events (and not the runner's AdmissionCheckUpdated, which it leaves out).
        messages = [e["message"] for e in events if e["reason"] == "MultiKueue"]
        assert messages.count(
            f'Workload evicted on worker cluster: "{CLUSTER_NAME["worker2"]}", resetting for re-admission. '
            'Previously: "Ready"') == 1
        assert messages.count(admitted_again) == 2
        assert not [e for e in events if e["reason"] == "AdmissionCheckUpdated"]
        # Deactivating the manager Workload removes the remote objects.
        await deactivate(env.manager, "job-long")
        await env.workers["worker2"].wait_gone(JOBS, NAMESPACE, "long", within=10)
        await env.workers["worker2"].wait_gone(WORKLOADS, NAMESPACE, "job-long", within=10)


async def test_no_worker_with_quota_means_no_winner_and_an_unmanaged_job_is_rejected() -> None:
    async with multikueue_env({"worker1": 0, "worker2": 0}) as env:
        await env.add_worker("worker2")
        await env.submit("stuck")
        wl = await env.manager.wait_for(
            WORKLOADS,
            NAMESPACE,
            "job-stuck",
            lambda w: (
                sorted(w.get("status", {}).get("nominatedClusterNames") or [])
                == sorted(CLUSTER_NAME.values())
                and has_state(CHECK, "Pending")(w)
            ),
            within=20,
        )
        assert state_of(wl, CHECK)["message"].startswith(
            "dispatched to multikueue-test-worker1, multikueue-test-worker2"
        )
        for worker in ("worker1", "worker2"):
            copy = await env.workers[worker].wait_for(WORKLOADS, NAMESPACE, "job-stuck", lambda w: True)
            assert not is_true(copy, "Admitted")
        assert not (await env.manager.get(WORKLOADS, NAMESPACE, "job-stuck"))["status"].get("clusterName")
        # A Job the manager's Job controller would run itself is not dispatched.
        await env.submit("plain", managed_by=None)
        wl = await env.manager.wait_for(
            WORKLOADS, NAMESPACE, "job-plain", has_state(CHECK, "Rejected"), within=20
        )
        assert state_of(wl, CHECK)["message"] == (
            "The owner is not managed by Kueue: "
            'Expecting spec.managedBy to be "kueue.x-k8s.io/multikueue" not ""'
        )
        assert await absent(env.workers["worker1"], WORKLOADS, "job-plain")


async def test_a_stopped_worker_makes_its_cluster_inactive_with_the_reason() -> None:
    async with multikueue_env({"worker1": 0, "worker2": 0}) as env:
        await env.add_worker("worker2")
        await env.submit("waiting")
        await env.manager.wait_for(
            MULTIKUEUE_CLUSTERS, None, CLUSTER_NAME["worker2"], active("True", "Active"), within=20
        )
        await env.clusters.workers["worker2"].stop()
        mkc = await env.manager.wait_for(
            MULTIKUEUE_CLUSTERS,
            None,
            CLUSTER_NAME["worker2"],
            active("False", "ClientConnectionFailed"),
            within=20,
        )
        message = find_condition(mkc, "Active")["message"]
        assert "connection attempts: " in message and "next connection attempt: " in message
        mkc1 = await env.manager.get(MULTIKUEUE_CLUSTERS, None, CLUSTER_NAME["worker1"])
        assert active("True", "Active")(mkc1)


async def test_the_incremental_dispatcher_nominates_in_config_order_round_by_round() -> None:
    async with multikueue_env(
        {"worker1": 0, "worker2": 4}, dispatcher=INCREMENTAL, incremental_step=1, incremental_round=1.5
    ) as env:
        await env.add_worker("worker2")  # config order: worker1, then worker2
        await env.submit("stepwise")
        wl = await env.manager.wait_for(
            WORKLOADS,
            NAMESPACE,
            "job-stepwise",
            lambda w: (w.get("status") or {}).get("nominatedClusterNames") == [CLUSTER_NAME["worker1"]],
            within=20,
        )
        assert await absent(env.workers["worker2"], WORKLOADS, "job-stepwise")  # not its turn yet
        wl = await env.manager.wait_for(
            WORKLOADS, NAMESPACE, "job-stepwise", has_state(CHECK, "Ready"), within=20
        )
        assert wl["status"]["clusterName"] == CLUSTER_NAME["worker2"]
        await env.workers["worker1"].wait_gone(WORKLOADS, NAMESPACE, "job-stepwise", within=10)


async def test_kadmit_on_both_sides_dispatches_admits_runs_and_finishes_the_job() -> None:
    """No stand-in anywhere: kadmit's manager dispatches; on the workers kadmit's own manager admits
    the copy, adopts it as the prebuilt Workload of the remote Job, runs the Job and finishes the
    copy, which finishes the Workload and the Job on the manager."""
    async with multikueue_env(
        {"worker1": 0, "worker2": 4}, kadmit_on_workers=True, kadmit_on_manager=True
    ) as env:
        await env.add_worker("worker2")
        job = await env.submit("real", runtime="0.3s")
        uid = job["metadata"]["uid"]

        def owned(wl: Obj) -> bool:
            return any(ref.get("uid") == uid for ref in wl["metadata"].get("ownerReferences") or [])

        wl = await env.manager.wait_for(
            WORKLOADS, NAMESPACE, None, lambda w: owned(w) and has_state(CHECK, "Ready")(w), within=20
        )
        name = wl["metadata"]["name"]
        assert wl["status"]["clusterName"] == CLUSTER_NAME["worker2"]
        await env.workers["worker1"].wait_gone(WORKLOADS, NAMESPACE, name, within=10)
        done = await env.manager.wait_for(JOBS, NAMESPACE, "real", finished, within=20)
        assert done["status"]["succeeded"] == 1
        wl = await env.manager.wait_for(
            WORKLOADS, NAMESPACE, name, lambda w: is_true(w, "Finished"), within=10
        )
        assert find_condition(wl, "Finished")["reason"] == "Succeeded"
        # kadmit on the worker adopted the copy: it made no Workload of its own for the remote Job.
        remote = await env.workers["worker2"].listed(WORKLOADS, NAMESPACE)
        assert {w["metadata"]["name"] for w in remote} <= {name}
        assert await absent(env.workers["worker1"], WORKLOADS, name)
        await env.workers["worker2"].wait_gone(JOBS, NAMESPACE, "real", within=10)  # finished: removed


async def test_an_external_dispatcher_nominates_and_kadmit_follows() -> None:
    async with multikueue_env({"worker1": 4, "worker2": 4}, dispatcher="example.com/dispatcher") as env:
        await env.add_worker("worker2")
        await env.submit("external")
        wl = await env.manager.wait_for(WORKLOADS, NAMESPACE, "job-external", has_state(CHECK, "Pending"))
        assert (
            state_of(wl, CHECK)["message"]
            == "waiting for example.com/dispatcher to nominate connected worker clusters"
        )
        assert await absent(env.workers["worker1"], WORKLOADS, "job-external")
        assert await absent(env.workers["worker2"], WORKLOADS, "job-external")
        await env.manager.update_status(
            WORKLOADS,
            NAMESPACE,
            "job-external",
            lambda s: s.update(nominatedClusterNames=[CLUSTER_NAME["worker2"]]),
        )
        wl = await env.manager.wait_for(
            WORKLOADS, NAMESPACE, "job-external", has_state(CHECK, "Ready"), within=20
        )
        assert wl["status"]["clusterName"] == CLUSTER_NAME["worker2"]
        assert await absent(env.workers["worker1"], WORKLOADS, "job-external")


async def test_a_suspended_local_job_says_its_status_sync_is_deferred() -> None:
    async with multikueue_env({"worker1": 4}) as env:
        assert env.standin is not None
        await env.standin.stop()  # the manager's Kueue does not admit here: the local Job stays suspended
        job = suspended_job("held", cpu="1", runtime="30s")
        job["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
        job = await env.manager.create(JOBS, job)
        wl = await env.manager.workload("job-held", owner=job)
        await env.manager.reserve(wl, "cluster-queue", "default-flavor")
        await env.manager.wait_for(WORKLOADS, "team", "job-held", has_state(CHECK, "Ready"), within=20)
        await env.workers["worker1"].wait_for(JOBS, "team", "held", running, within=10)

        def deferred(j: Obj) -> bool:
            cond = next((c for c in (j.get("status") or {}).get("conditions") or []
                         if c.get("type") == "Suspended"), {})
            return (cond.get("status"), cond.get("reason")) == ("True", "MultiKueueAdapter")

        local = await env.manager.wait_for(JOBS, "team", "held", deferred, within=10)
        assert "active" not in local["status"]  # nothing of the remote status yet
        # Kueue admits at last and unsuspends the local Job: the remote status replaces the note.
        local["spec"]["suspend"] = False
        await env.manager.api.replace(JOBS, local)
        await env.manager.wait_for(
            JOBS, "team", "held", lambda j: (j.get("status") or {}).get("active") == 1 and not deferred(j),
            within=10)
