"""``kueue.x-k8s.io/prebuilt-workload-name``: a Job uses the Workload made for it beforehand (§4.4)."""

from __future__ import annotations

import copy
from typing import Any

from kadmit.kube.resources import JOBS, WORKLOADS
from tests.e2e.conftest import Env, eventually
from tests.e2e.helpers import apply_small_setup, condition, is_complete, job, wait_job

Obj = dict[str, Any]


def prebuilt_for(job_obj: Obj, name: str, count: int | None = None) -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "queueName": "small",
            "podSets": [
                {
                    "name": "main",
                    "count": count or job_obj["spec"]["parallelism"],
                    "template": copy.deepcopy(job_obj["spec"]["template"]),
                }
            ],
        },
    }


async def test_a_job_adopts_its_prebuilt_workload_and_runs(env: Env) -> None:
    await env.start_manager()
    await apply_small_setup(env)
    made = job("with-prebuilt", cpu="1", parallelism=2, queue="small")
    made["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = "ready-made"
    await env.kube.create(WORKLOADS, prebuilt_for(made, "ready-made"))
    await env.kube.create(JOBS, made)
    await wait_job(env, "with-prebuilt", is_complete, "complete")

    async def finished() -> Obj | None:
        wl = await env.kube.get(WORKLOADS, "default", "ready-made")
        return wl if condition(wl, "Finished") == "True" else None

    wl = await eventually(finished, what="the prebuilt Workload Finished with its Job")
    owner = wl["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Job", "with-prebuilt", True)
    assert [w["metadata"]["name"] for w in (await env.kube.list(WORKLOADS, "default"))["items"]] == [
        "ready-made"
    ]


async def test_a_prebuilt_workload_that_does_not_match_is_finished_out_of_sync(env: Env) -> None:
    await env.start_manager()
    await apply_small_setup(env)
    made = job("mismatched", cpu="1", parallelism=2, queue="small")
    made["metadata"]["labels"]["kueue.x-k8s.io/prebuilt-workload-name"] = "wrong-size"
    await env.kube.create(WORKLOADS, prebuilt_for(made, "wrong-size", count=3))
    await env.kube.create(JOBS, made)

    async def out_of_sync() -> Obj | None:
        wl = await env.kube.get(WORKLOADS, "default", "wrong-size")
        finished = [c for c in (wl.get("status") or {}).get("conditions", []) if c["type"] == "Finished"]
        return wl if finished and finished[0]["reason"] == "OutOfSync" else None

    await eventually(out_of_sync, what="the prebuilt Workload finished OutOfSync")
    assert (await env.kube.get(JOBS, "default", "mismatched"))["spec"]["suspend"] is True
