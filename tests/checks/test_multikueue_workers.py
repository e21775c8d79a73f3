"""MultiKueue workers coming and going: kubeconfig Secrets, a lost admitting worker, orphans."""

from __future__ import annotations

import base64
from typing import Any

from kadmit.checks.multikueue_remote import ORIGIN_LABEL, PREBUILT_WORKLOAD
from kadmit.kube.resources import MULTIKUEUE_CLUSTERS, SECRETS, WORKLOADS
from kadmit.localcluster.multicluster import put_kubeconfig_secret
from kadmit.workload import find_condition, is_true
from tests.checks.conftest import JOBS, has_state, state_of
from tests.checks.multikueue_fixtures import CHECK, CLUSTER_NAME, NAMESPACE, multikueue_env

Obj = dict[str, Any]


def active(status: str, reason: str) -> Any:
    def check(obj: Obj) -> bool:
        cond = find_condition(obj, "Active") or {}
        return cond.get("status") == status and cond.get("reason") == reason

    return check


def finished(job: Obj) -> bool:
    return any(
        c.get("type") == "Complete" and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


async def test_kubeconfig_secrets_missing_incomplete_insecure_and_finally_good() -> None:
    async with multikueue_env({"worker1": 4, "worker2": 4}) as env:
        await env.manager.create(
            MULTIKUEUE_CLUSTERS,
            {
                "metadata": {"name": "late"},
                "spec": {"clusterSource": {"kubeConfig": {"location": "late-secret"}}},
            },
        )
        mkc = await env.manager.wait_for(
            MULTIKUEUE_CLUSTERS, None, "late", active("False", "BadKubeConfig"), within=10
        )
        assert find_condition(mkc, "Active")["message"] == 'secrets "late-secret" not found'
        await env.manager.create(
            SECRETS,
            {
                "metadata": {"name": "late-secret", "namespace": "kadmit-system"},
                "data": {"other": base64.b64encode(b"x").decode()},
            },
        )
        mkc = await env.manager.wait_for(
            MULTIKUEUE_CLUSTERS,
            None,
            "late",
            lambda o: "key" in (find_condition(o, "Active") or {}).get("message", ""),
            within=10,
        )
        message = find_condition(mkc, "Active")["message"]
        assert message == 'key "kubeconfig" not found in secret "late-secret"'
        await put_kubeconfig_secret(env.clusters.manager, env.clusters.workers["worker2"], name="late-secret")
        mkc = await env.manager.wait_for(
            MULTIKUEUE_CLUSTERS, None, "late", active("True", "Active"), within=10
        )
        assert find_condition(mkc, "Active")["message"] == "Connected"
        # The example's cluster was connected as well, when the runner started the plugin.
        example = await env.manager.get(MULTIKUEUE_CLUSTERS, None, CLUSTER_NAME["worker1"])
        assert active("True", "Active")(example)
        # A kubeconfig Kueue would refuse is refused, with the reason.
        kubeconfig = (
            "apiVersion: v1\nkind: Config\nclusters:\n- name: w\n  cluster:\n"
            "    server: https://127.0.0.1:1\n    insecure-skip-tls-verify: true\n"
            "users:\n- name: w\n  user: {token: abc}\n"
            "contexts:\n- name: w\n  context: {cluster: w, user: w}\n"
            "current-context: w\n"
        )
        await env.manager.create(
            SECRETS,
            {
                "metadata": {"name": "insecure", "namespace": "kadmit-system"},
                "data": {"kubeconfig": base64.b64encode(kubeconfig.encode()).decode()},
            },
        )
        await env.manager.create(
            MULTIKUEUE_CLUSTERS,
            {
                "metadata": {"name": "insecure"},
                "spec": {"clusterSource": {"kubeConfig": {"location": "insecure"}}},
            },
        )
        mkc = await env.manager.wait_for(
            MULTIKUEUE_CLUSTERS, None, "insecure", active("False", "InsecureKubeConfig"), within=10
        )
        assert "insecure-skip-tls-verify" in find_condition(mkc, "Active")["message"]


async def test_a_lost_admitting_worker_sends_the_job_to_another_one() -> None:
    async with multikueue_env({"worker1": 4, "worker2": 0}, worker_lost_timeout=1.0) as env:
        await env.add_worker("worker2")
        await env.submit("moving", runtime="0.5s")
        # worker1 is the only one with quota: it wins, and the manager admits the Workload. Then
        # worker1 goes away with the Job.
        await env.manager.wait_for(WORKLOADS, NAMESPACE, "job-moving", has_state(CHECK, "Ready"), within=20)
        await env.manager.wait_for(WORKLOADS, NAMESPACE, "job-moving", lambda w: is_true(w, "Admitted"),
                                   within=20)
        await env.workers["worker1"].wait_for(JOBS, NAMESPACE, "moving", lambda j: True, within=10)
        env.worker_kueues["worker2"].cpu_quota = 4  # worker2 gets room meanwhile
        await env.clusters.workers["worker1"].stop()
        await env.manager.wait_for(
            WORKLOADS,
            NAMESPACE,
            "job-moving",
            lambda w: (state_of(w, CHECK) or {}).get("retryCount") == 1,
            within=20,
        )
        assert env.standin.history.of("job-moving")[:4] == [
            "created",
            "reserved",
            "admitted",
            "evicted after 0s",
        ]
        await env.manager.wait_for(
            WORKLOADS,
            NAMESPACE,
            "job-moving",
            lambda w: (
                w["status"].get("clusterName") == CLUSTER_NAME["worker2"] and has_state(CHECK, "Ready")(w)
            ),
            within=20,
        )
        await env.manager.wait_for(JOBS, NAMESPACE, "moving", finished, within=20)
        await env.manager.wait_for(
            WORKLOADS, NAMESPACE, "job-moving", lambda w: is_true(w, "Finished"), within=10
        )


async def test_garbage_collection_removes_copies_whose_manager_workload_is_gone() -> None:
    async with multikueue_env({"worker1": 0}, gc_interval=0.3) as env:
        # A copy and its Job left behind on the worker (say the manager's Workload was deleted
        # while this kadmit was down).
        worker = env.workers["worker1"]
        wl = await worker.workload("orphan")
        wl["metadata"]["labels"] = {ORIGIN_LABEL: "multikueue"}
        await worker.api.replace(WORKLOADS, wl)
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "orphan-job",
                "namespace": "team",
                "labels": {ORIGIN_LABEL: "multikueue"},
                "annotations": {PREBUILT_WORKLOAD: "orphan"},
            },
            "spec": {
                "suspend": True,
                "template": {
                    "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
                },
            },
        }
        await worker.create(JOBS, job)
        # Copies of another origin (another manager's) are not ours to remove.
        foreign = await worker.workload("foreign")
        foreign["metadata"]["labels"] = {ORIGIN_LABEL: "another-manager"}
        await worker.api.replace(WORKLOADS, foreign)
        await worker.wait_gone(JOBS, "team", "orphan-job", within=10)
        await worker.wait_gone(WORKLOADS, "team", "orphan", within=10)
        assert (await worker.get(WORKLOADS, "team", "foreign"))["metadata"]["labels"][
            ORIGIN_LABEL
        ] == "another-manager"


async def test_a_worker_back_from_a_partition_never_displaces_the_recorded_winner() -> None:
    """worker2 is cut off, then returns holding a copy it says it admitted before worker1 did:
    worker1, recorded as the winner, keeps the job; worker2's copy goes (the job never runs twice,
    is never lost)."""
    from kadmit.checks.multikueue_remote import remote_workload

    async with multikueue_env({"worker1": 4, "worker2": 0}) as env:
        await env.add_worker("worker2")
        await env.submit("pinned", runtime="30s")
        wl = await env.manager.wait_for(WORKLOADS, NAMESPACE, "job-pinned", has_state(CHECK, "Ready"),
                                        within=20)
        assert wl["status"]["clusterName"] == CLUSTER_NAME["worker1"]
        await env.workers["worker1"].wait_for(JOBS, NAMESPACE, "pinned", lambda j: True, within=10)
        await env.workers["worker2"].wait_gone(WORKLOADS, NAMESPACE, "job-pinned", within=10)
        # The partition: the manager loses worker2 (its kubeconfig Secret is gone)...
        await env.manager.api.delete(SECRETS, "kadmit-system", "worker2-secret")
        await env.manager.wait_for(MULTIKUEUE_CLUSTERS, None, CLUSTER_NAME["worker2"],
                                   active("False", "BadKubeConfig"), within=10)
        # ... while worker2 holds a copy it admitted long before worker1's admission.
        await env.workers["worker2"].create(WORKLOADS, remote_workload(wl, "multikueue"))
        for kind in ("QuotaReserved", "Admitted"):
            await env.workers["worker2"].set_condition(WORKLOADS, NAMESPACE, "job-pinned", {
                "type": kind, "status": "True", "lastTransitionTime": "2001-01-01T00:00:00Z"})
        # The heal: worker2 is reachable again.
        await put_kubeconfig_secret(env.clusters.manager, env.clusters.workers["worker2"],
                                    name="worker2-secret")
        await env.manager.wait_for(MULTIKUEUE_CLUSTERS, None, CLUSTER_NAME["worker2"],
                                   active("True", "Active"), within=10)
        await env.workers["worker2"].wait_gone(WORKLOADS, NAMESPACE, "job-pinned", within=10)
        current = await env.manager.get(WORKLOADS, NAMESPACE, "job-pinned")
        assert current["status"]["clusterName"] == CLUSTER_NAME["worker1"]
        assert has_state(CHECK, "Ready")(current)
        assert await env.workers["worker1"].get(JOBS, NAMESPACE, "pinned")  # still running there
