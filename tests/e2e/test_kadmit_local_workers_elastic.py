"""``kadmit local --workers 2`` and an elastic Job, with kubectl only, every webhook on the way (the
manager's gates the Job's Pods and hands it to MultiKueue; each worker's checks the copy's resize):
the Job runs on one worker; scaled up on the manager, it grows there (a new Workload slice, admitted
on the same worker, its copy's parallelism raised, its new Pod started), never on the other worker;
scaled down, it shrinks there; deleted, its copies leave the worker."""

from __future__ import annotations

import asyncio
import functools
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import eventually
from tests.e2e.test_kadmit_local import kubectl, kubectl_json
from tests.e2e.test_kadmit_local_workers import conditions, items, watch_names
from tests.kadmit_local import kadmit_local

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

ELASTIC_JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: elastic
  labels: {kueue.x-k8s.io/queue-name: default}
  annotations: {kueue.x-k8s.io/elastic-job: "true"}
spec:
  parallelism: 2
  completions: 20
  template:
    metadata:
      annotations: {localcluster.kadmit.dev/runtime: 300s}
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox, resources: {requests: {cpu: "1"}}}
"""
REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"


async def resize(kubeconfig: Path, parallelism: int) -> None:
    """Resize the elastic Job on the manager as a user does (README's command)."""
    await kubectl(kubeconfig, "patch", "job", "elastic", "-n", "default", "--type=merge",
                  "-p", f'{{"spec": {{"parallelism": {parallelism}}}}}')


async def running_pods(kubeconfig: Path, count: int) -> list[Any] | None:
    """The Job's Pods that have not ended, when exactly ``count`` run: none gated, all on a Node."""
    pods = [
        p
        for p in await items(kubeconfig, "pods")
        if p["metadata"].get("labels", {}).get("job-name") == "elastic"
        and p["status"].get("phase") not in ("Succeeded", "Failed")
    ]
    if len(pods) != count or any(
        p["spec"].get("schedulingGates") or not p["spec"].get("nodeName") for p in pods
    ):
        return None
    return pods


async def test_an_elastic_job_scaled_on_the_manager_is_resized_on_its_worker(tmp_path: Path) -> None:
    async with kadmit_local(tmp_path, "--workers", "2", kubeconfig=tmp_path / "local.kubeconfig") as local:
        manager, workers = local.kubeconfig, local.workers
        assert set(workers) == {"worker1", "worker2"}, local.workers
        seen: dict[str, set[str]] = {name: set() for name in workers}

        def found(worker: str, name: str) -> None:
            seen[worker].add(name)

        watchers = [
            asyncio.create_task(watch_names(path, kind, functools.partial(found, name)))
            for name, path in workers.items()
            for kind in ("jobs", "workloads")
        ]
        try:
            await kubectl(manager, "create", "-n", "default", "-f", "-", stdin=ELASTIC_JOB)
            job = await kubectl_json(manager, "get", "job", "elastic", "-n", "default")
            assert job["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
            assert job["spec"]["template"]["spec"]["schedulingGates"] == [
                {"name": "kueue.x-k8s.io/elastic-job"}
            ]

            async def placed(replacing: str | None = None) -> Any:
                for wl in await items(manager, "workloads"):
                    annotations = wl["metadata"].get("annotations") or {}
                    if annotations.get(REPLACEMENT_FOR) != replacing:
                        continue
                    checks = (wl.get("status") or {}).get("admissionChecks") or []
                    if conditions(wl).get("Admitted") == "True" and all(
                        c["state"] == "Ready" for c in checks
                    ):
                        return wl
                return None

            first = await eventually(
                placed, 90, every=0.5, what="the manager's Workload admitted on a worker"
            )
            cluster = first["status"]["clusterName"]
            other = next(name for name in workers if name != cluster)
            runs_on = workers[cluster]
            await eventually(lambda: running_pods(runs_on, 2), 90, every=0.5, what=f"2 Pods on {cluster}")

            # Scaled up on the manager: a new slice on the same worker, the copy raised to 3.
            await resize(manager, 3)
            replacing = f"default/{first['metadata']['name']}"
            second = await eventually(
                lambda: placed(replacing), 90, every=0.5, what="the new slice admitted on the manager"
            )
            assert second["status"]["clusterName"] == cluster
            await eventually(lambda: running_pods(runs_on, 3), 90, every=0.5, what=f"3 Pods on {cluster}")
            copy_ = await kubectl_json(runs_on, "get", "job", "elastic", "-n", "default")
            assert copy_["spec"]["parallelism"] == 3
            assert copy_["metadata"]["annotations"][PREBUILT] == second["metadata"]["name"]

            # Scaled down: the copy shrinks to 1 under the same slice.
            await resize(manager, 1)
            await eventually(lambda: running_pods(runs_on, 1), 90, every=0.5, what=f"1 Pod on {cluster}")
            shrunk = await kubectl_json(
                manager, "get", "workload", second["metadata"]["name"], "-n", "default"
            )
            assert [p["count"] for p in shrunk["spec"]["podSets"]] == [1]
            assert conditions(shrunk).get("Admitted") == "True"
            assert (await kubectl_json(runs_on, "get", "job", "elastic", "-n", "default"))["metadata"][
                "uid"
            ] == copy_["metadata"]["uid"], "the same copy all along"

            # Deleted on the manager: the copies leave the worker.
            await kubectl(manager, "delete", "job", "elastic", "-n", "default")

            async def clean() -> bool:
                return not await items(runs_on, "jobs,workloads")

            await eventually(clean, 90, every=0.5, what=f"the copies removed from {cluster}")
        finally:
            for watcher in watchers:
                watcher.cancel()
            await asyncio.gather(*watchers, return_exceptions=True)
        # The other worker may hold a copy of the first Workload while the first dispatch runs (all
        # at once), never the Job, nor the new slice.
        assert not seen[other] & {"elastic", second["metadata"]["name"]}, seen
        assert seen[cluster] >= {"elastic", first["metadata"]["name"], second["metadata"]["name"]}, seen
