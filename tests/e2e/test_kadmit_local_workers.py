"""``kadmit local --workers 2`` as a user runs it (README, "MultiKueue on your machine"): one
command, a ready line per cluster, then kubectl only. A Job, a JobSet and a pod group created on
the manager run on exactly one worker, their status comes back to the manager, and once they
finished their copies are gone from the worker."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_kadmit_local import COMMAND, kubectl, kubectl_json

SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")

JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: hello
  labels: {kueue.x-k8s.io/queue-name: default}
spec:
  parallelism: 2
  completions: 2
  template:
    metadata:
      annotations: {localcluster.kadmit.dev/runtime: 4s}
    spec:
      restartPolicy: Never
      containers:
      - {name: main, image: busybox, resources: {requests: {cpu: "1"}}}
"""

JOBSET = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: train
  labels: {kueue.x-k8s.io/queue-name: default}
spec:
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 1
        completions: 1
        template:
          metadata:
            annotations: {localcluster.kadmit.dev/runtime: 4s}
          spec:
            restartPolicy: Never
            containers:
            - {name: main, image: busybox, resources: {requests: {cpu: "1"}}}
"""


async def eventually(check: Any, within: float = 40.0, what: str = "") -> Any:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        result = await check()
        if result:
            return result
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.3)


def conditions(obj: Any) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


async def items(kubeconfig: Path, kind: str) -> list[Any]:
    return list((await kubectl_json(kubeconfig, "get", kind, "-n", "default"))["items"])


async def test_a_job_and_a_jobset_submitted_to_the_manager_run_on_one_worker(tmp_path: Path) -> None:
    manager = tmp_path / "local.kubeconfig"
    workers = {name: tmp_path / f"local-{name}.kubeconfig" for name in ("worker1", "worker2")}
    proc = await asyncio.create_subprocess_exec(
        *COMMAND,
        "local",
        "--workers",
        "2",
        "--kubeconfig",
        str(manager),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        lines = []
        while not lines or not lines[-1].startswith("kadmit local: ready"):
            lines.append((await asyncio.wait_for(proc.stdout.readline(), 90)).decode().strip())
            assert lines[-1], "kadmit local ended before its ready line"
        assert f"kubectl --kubeconfig {manager} " in lines[0]
        for name, path in workers.items():
            assert any(f"{name}: kubectl --kubeconfig {path} " in line for line in lines), lines
        clusters = await kubectl_json(manager, "get", "multikueueclusters")
        assert {c["metadata"]["name"]: conditions(c)["Active"] for c in clusters["items"]} == {
            "worker1": "True",
            "worker2": "True",
        }

        await kubectl(manager, "create", "-n", "default", "-f", "-", stdin=JOB)
        await kubectl(manager, "create", "-n", "default", "-f", "-", stdin=JOBSET)
        await kubectl(manager, "create", "-n", "default", "-f", str(SAMPLES / "pod-group.yaml"))
        # the sample, running long enough to be seen on its worker while the others are looked for
        pytorchjob_yaml = (SAMPLES / "pytorchjob.yaml").read_text().replace("runtime: 1s", "runtime: 4s")
        await kubectl(manager, "create", "-f", "-", stdin=pytorchjob_yaml)
        job = await kubectl_json(manager, "get", "job", "hello", "-n", "default")
        assert job["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"  # kadmit's webhook on the manager
        jobset = await kubectl_json(manager, "get", "jobset", "train", "-n", "default")
        assert jobset["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
        pytorchjob = await kubectl_json(manager, "get", "pytorchjob", "sample-pytorchjob", "-n", "default")
        assert pytorchjob["spec"]["runPolicy"]["managedBy"] == "kueue.x-k8s.io/multikueue"

        # Each runs on exactly one worker: the one the manager's Workload names. They are looked
        # for together (a short one may finish and leave its worker while another is looked for).
        wanted = (
            ("jobs", "hello"),
            ("jobsets", "train"),
            ("pods", "sample-group-driver"),
            ("pytorchjobs", "sample-pytorchjob"),
        )
        seen: dict[tuple[str, str], set[str]] = {key: set() for key in wanted}

        async def placed() -> bool:
            for w, path in workers.items():
                for kind in {kind for kind, _ in wanted}:
                    names = {o["metadata"]["name"] for o in await items(path, kind)}
                    for key in wanted:
                        if key[0] == kind and key[1] in names:
                            seen[key].add(w)
            return all(seen.values())

        await eventually(placed, what=f"every object on a worker (seen so far: {seen})")
        workloads = await items(manager, "workloads")
        for (kind, name), where in seen.items():
            assert len(where) == 1, (kind, name, where)
            owned = [w for w in workloads if any(r["name"] == name for r in w["metadata"]["ownerReferences"])]
            assert [w["status"].get("clusterName") for w in owned] == sorted(where), (kind, name)

        async def job_done() -> Any:
            current = await kubectl_json(manager, "get", "job", "hello", "-n", "default")
            return current if conditions(current).get("Complete") == "True" else None

        async def jobset_done() -> Any:
            current = await kubectl_json(manager, "get", "jobset", "train", "-n", "default")
            return current if conditions(current).get("Completed") == "True" else None

        done = await eventually(job_done, what="the manager's Job Complete (status mirrored)")
        assert done["status"]["succeeded"] == 2
        assert done["spec"]["suspend"] is False
        done_set = await eventually(jobset_done, what="the manager's JobSet Completed (status mirrored)")
        assert {s["name"]: s["succeeded"] for s in done_set["status"]["replicatedJobsStatus"]} == {
            "workers": 2
        }

        async def pytorchjob_done() -> Any:
            current = await kubectl_json(manager, "get", "pytorchjob", "sample-pytorchjob", "-n", "default")
            return current if conditions(current).get("Succeeded") == "True" else None

        done_pytorch = await eventually(pytorchjob_done, what="the manager's PyTorchJob Succeeded (mirrored)")
        assert done_pytorch["status"]["replicaStatuses"]["Master"]["succeeded"] == 1

        async def group_done() -> Any:
            pods = await items(manager, "pods")
            return (
                pods
                if len(pods) == 3 and all(p["status"].get("phase") == "Succeeded" for p in pods)
                else None
            )

        # The pod group's status came back too; the manager never ran a Pod itself (no node) nor
        # the JobSet's child Jobs.
        group = await eventually(group_done, what="the manager's Pods Succeeded (status mirrored)")
        assert all(not p["spec"].get("nodeName") for p in group)
        assert [j["metadata"]["name"] for j in await items(manager, "jobs")] == ["hello"]

        async def workers_clean() -> bool:
            for path in workers.values():
                for kind in ("jobs", "jobsets", "pytorchjobs", "pods", "workloads"):
                    if await items(path, kind):
                        return False
            return True

        await eventually(workers_clean, what="the copies removed from the workers")
    finally:
        if proc.returncode is None:
            proc.terminate()
        _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert json.dumps(err.decode().strip().splitlines()[-1]) == json.dumps("kadmit local: stopped")
