"""``kadmit local --workers 2`` as a user runs it (README, "MultiKueue on your machine"): one
command, a ready line per cluster, then kubectl only. A Job, a JobSet and a pod group created on
the manager run on exactly one worker, their status comes back to the manager, and once they
finished their copies are gone from the worker."""

from __future__ import annotations

import asyncio
import functools
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import eventually
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


def conditions(obj: Any) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


async def items(kubeconfig: Path, kind: str) -> list[Any]:
    return list((await kubectl_json(kubeconfig, "get", kind, "-n", "default"))["items"])


async def watch_names(kubeconfig: Path, kind: str, found: Callable[[str], None]) -> None:
    """``kubectl get KIND --watch -o name`` until cancelled: every object that ever existed."""
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        str(kubeconfig),
        "get",
        kind,
        "-n",
        "default",
        "--watch",
        "-o",
        "name",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    try:
        async for line in proc.stdout:
            found(line.decode().strip().rpartition("/")[2])
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


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
    # Read what it prints as it prints it: a full pipe would stop it.
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    ready = asyncio.get_running_loop().create_future()

    async def read_stdout() -> None:
        assert proc.stdout is not None
        async for raw in proc.stdout:
            lines.append(raw.decode().strip())
            if lines[-1].startswith("kadmit local: ready") and not ready.done():
                ready.set_result(None)
        if not ready.done():
            ready.set_exception(AssertionError(f"kadmit local ended before its ready line: {lines}"))

    logged: list[str] = []

    async def read_stderr() -> None:
        assert proc.stderr is not None
        async for raw in proc.stderr:
            logged.append(raw.decode().rstrip())

    drained = asyncio.gather(read_stdout(), read_stderr())
    watchers: list[asyncio.Task[None]] = []
    try:
        await asyncio.wait_for(ready, 90)
        assert f"kubectl --kubeconfig {manager} " in lines[0]
        for name, path in workers.items():
            assert any(f"{name}: kubectl --kubeconfig {path} " in line for line in lines), lines
        clusters = await kubectl_json(manager, "get", "multikueueclusters")
        assert any(line.startswith("kadmit local: engine ") for line in lines), lines  # after ready
        assert {c["metadata"]["name"]: conditions(c)["Active"] for c in clusters["items"]} == {
            "worker1": "True",
            "worker2": "True",
        }

        # Each must run on exactly one worker: the one the manager's Workload names. The workers
        # are watched from before anything is created (a short run may come and go between polls).
        wanted = (
            ("jobs", "hello"),
            ("jobsets", "train"),
            ("pods", "sample-group-driver"),
            ("pytorchjobs", "sample-pytorchjob"),
        )
        seen: dict[tuple[str, str], set[str]] = {key: set() for key in wanted}

        def seen_on(worker: str, kind: str, name: str) -> None:
            if (kind, name) in seen:
                seen[kind, name].add(worker)

        watchers = [
            asyncio.create_task(watch_names(path, kind, functools.partial(seen_on, w, kind)))
            for w, path in workers.items()
            for kind in {kind for kind, _ in wanted}
        ]

        await kubectl(manager, "create", "-n", "default", "-f", "-", stdin=JOB)
        await kubectl(manager, "create", "-n", "default", "-f", "-", stdin=JOBSET)
        await kubectl(manager, "create", "-n", "default", "-f", str(SAMPLES / "pod-group.yaml"))
        await kubectl(manager, "create", "-f", str(SAMPLES / "pytorchjob.yaml"))
        job = await kubectl_json(manager, "get", "job", "hello", "-n", "default")
        assert job["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"  # kadmit's webhook on the manager
        jobset = await kubectl_json(manager, "get", "jobset", "train", "-n", "default")
        assert jobset["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"
        pytorchjob = await kubectl_json(manager, "get", "pytorchjob", "sample-pytorchjob", "-n", "default")
        assert pytorchjob["spec"]["runPolicy"]["managedBy"] == "kueue.x-k8s.io/multikueue"

        async def placed() -> bool:
            """What the watches saw, and what is there now (a watch may start late)."""
            for w, path in workers.items():
                for obj in await items(path, ",".join(sorted({kind for kind, _ in wanted}))):
                    seen_on(w, f"{obj['kind'].lower()}s", obj["metadata"]["name"])
            return all(seen.values())

        try:
            await eventually(placed, 90, "every object on a worker", every=0.5)
        except AssertionError:
            reasons = {
                w["metadata"]["name"]: [
                    (c["type"], c["status"], c.get("message", ""))
                    for c in w.get("status", {}).get("conditions", [])
                ]
                for w in await items(manager, "workloads")
            }
            raise AssertionError(
                f"seen on workers: {seen}; the manager's Workloads: {reasons}; its log's end: {logged[-30:]}"
            ) from None
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

        done = await eventually(job_done, 90, every=0.5, what="the manager's Job Complete (status mirrored)")
        assert done["status"]["succeeded"] == 2
        assert done["spec"]["suspend"] is False
        done_set = await eventually(
            jobset_done, 90, every=0.5, what="the manager's JobSet Completed (status mirrored)"
        )
        assert {s["name"]: s["succeeded"] for s in done_set["status"]["replicatedJobsStatus"]} == {
            "workers": 2
        }

        async def pytorchjob_done() -> Any:
            current = await kubectl_json(manager, "get", "pytorchjob", "sample-pytorchjob", "-n", "default")
            return current if conditions(current).get("Succeeded") == "True" else None

        done_pytorch = await eventually(
            pytorchjob_done, 90, every=0.5, what="the manager's PyTorchJob Succeeded (mirrored)"
        )
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
        group = await eventually(
            group_done, 90, every=0.5, what="the manager's Pods Succeeded (status mirrored)"
        )
        assert all(not p["spec"].get("nodeName") for p in group)
        assert [j["metadata"]["name"] for j in await items(manager, "jobs")] == ["hello"]

        async def workers_clean() -> bool:
            for path in workers.values():
                if await items(path, "jobs,jobsets,pytorchjobs,pods,workloads"):
                    return False
            return True

        await eventually(workers_clean, 90, every=0.5, what="the copies removed from the workers")
    finally:
        for watcher in watchers:
            watcher.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        if proc.returncode is None:
            proc.terminate()
        await asyncio.wait_for(proc.wait(), 60)
    await drained
    err = "\n".join(logged)
    assert proc.returncode == 0, err[-2000:]
    assert json.dumps(err.strip().splitlines()[-1]) == json.dumps("kadmit local: stopped")
