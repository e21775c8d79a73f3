"""MultiKueue for kinds other than the Job, kadmit on the manager and on both workers: a JobSet is
dispatched, admitted on exactly one worker, runs there (its status mirrored on the manager), and
its copies are removed from the worker once it finished."""

from __future__ import annotations

from typing import Any

from kadmit.checks.multikueue_remote import ORIGIN_LABEL, PREBUILT_WORKLOAD
from kadmit.kube.resources import JOBSETS, WORKLOADS
from kadmit.workload import find_condition, is_true
from tests.checks.conftest import JOBS, has_state
from tests.checks.multikueue_fixtures import CHECK, CLUSTER_NAME, NAMESPACE, multikueue_env

Obj = dict[str, Any]
FRAMEWORKS = ("batch/job", "jobset.x-k8s.io/jobset")
MULTIKUEUE = "kueue.x-k8s.io/multikueue"


def jobset(name: str, runtime: str = "0.5s") -> Obj:
    def replicated(rj: str, replicas: int) -> Obj:
        return {
            "name": rj,
            "replicas": replicas,
            "template": {
                "spec": {
                    "parallelism": 1,
                    "completions": 1,
                    "template": {
                        "metadata": {"annotations": {"localcluster.kadmit.dev/runtime": runtime}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                            ],
                        },
                    },
                }
            },
        }

    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {
            "suspend": True,
            "managedBy": MULTIKUEUE,
            "replicatedJobs": [replicated("driver", 1), replicated("workers", 2)],
        },
    }


def completed(js: Obj) -> bool:
    return any(
        c.get("type") == "Completed" and c.get("status") == "True"
        for c in (js.get("status") or {}).get("conditions") or []
    )


async def test_a_jobset_runs_on_exactly_one_worker_its_status_comes_back_and_its_copies_go() -> None:
    async with multikueue_env(
        {"worker1": 0, "worker2": 4},
        kadmit_on_workers=True,
        kadmit_on_manager=True,
        frameworks=FRAMEWORKS,
    ) as env:
        await env.add_worker("worker2")
        created = await env.manager.create(JOBSETS, jobset("train"))
        uid = created["metadata"]["uid"]

        def owned(wl: Obj) -> bool:
            return any(ref.get("uid") == uid for ref in wl["metadata"].get("ownerReferences") or [])

        wl = await env.manager.wait_for(
            WORKLOADS, NAMESPACE, None, lambda w: owned(w) and has_state(CHECK, "Ready")(w), within=30
        )
        name = wl["metadata"]["name"]
        assert wl["status"]["clusterName"] == CLUSTER_NAME["worker2"]
        await env.workers["worker1"].wait_gone(WORKLOADS, NAMESPACE, name, within=10)

        # The copy on worker2: ours, the prebuilt Workload's, and run by the worker's JobSet controller.
        remote = await env.workers["worker2"].wait_for(
            JOBSETS, NAMESPACE, "train", lambda js: True, within=10
        )
        assert "managedBy" not in remote["spec"]
        assert remote["metadata"]["labels"][ORIGIN_LABEL] == "multikueue"
        assert remote["metadata"]["annotations"][PREBUILT_WORKLOAD] == name
        assert await env.workers["worker1"].listed(JOBSETS, NAMESPACE) == []

        # Its status comes back to the manager's JobSet, which the manager never runs itself.
        done = await env.manager.wait_for(JOBSETS, NAMESPACE, "train", completed, within=30)
        succeeded = {s["name"]: s["succeeded"] for s in done["status"]["replicatedJobsStatus"]}
        assert succeeded == {"driver": 1, "workers": 2}
        assert await env.manager.listed(JOBS, NAMESPACE) == []  # no child Job ran on the manager
        assert [w["metadata"]["name"] for w in await env.manager.listed(WORKLOADS, NAMESPACE)] == [name]
        finished = await env.manager.wait_for(
            WORKLOADS, NAMESPACE, name, lambda w: is_true(w, "Finished"), within=10
        )
        assert find_condition(finished, "Finished")["reason"] == "Succeeded"

        # Finished: the copies leave the worker.
        await env.workers["worker2"].wait_gone(JOBSETS, NAMESPACE, "train", within=15)
        await env.workers["worker2"].wait_gone(WORKLOADS, NAMESPACE, name, within=15)
