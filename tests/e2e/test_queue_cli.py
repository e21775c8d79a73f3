"""``kadmit list|describe|stop|resume`` against ``kadmit local``, as a user types them."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.conftest import eventually
from tests.e2e.test_visibility import kadmit_local, kubectl, pytestmark, run  # noqa: F401

SETUP = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: on-demand}
spec:
  nodeLabels: {kadmit.dev/pool: cpu}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a-cq}
spec:
  namespaceSelector: {}
  cohortName: team-a
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: on-demand
      resources: [{name: cpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-b-cq}
spec:
  namespaceSelector: {}
  cohortName: team-a
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: on-demand
      resources: [{name: cpu, nominalQuota: 4, lendingLimit: 2}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team-a, namespace: default}
spec: {clusterQueue: team-a-cq}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team-b, namespace: default}
spec: {clusterQueue: team-b-cq}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: picky}
spec:
  namespaceSelector: {matchLabels: {team: x}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: on-demand
      resources: [{name: cpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: picky, namespace: default}
spec: {clusterQueue: picky}
"""


def job(name: str, queue: str) -> str:
    return json.dumps(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": "default",
                "labels": {"kueue.x-k8s.io/queue-name": queue},
            },
            "spec": {
                "template": {
                    "metadata": {"annotations": {"localcluster.kadmit.dev/runtime": "600s"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}
                        ],
                    },
                }
            },
        }
    )


async def kadmit(kubeconfig: Path | None, *args: str, code: int = 0) -> tuple[str, str]:
    flags = ["--kubeconfig", str(kubeconfig)] if kubeconfig else []
    got, out, err = await run(sys.executable, "-m", "kadmit", *args, *flags, check=False)
    assert got == code, f"kadmit {' '.join(args)} exited {got}: {err}{out}"
    return out, err


async def workload_of(kubeconfig: Path, job_name: str) -> dict[str, Any]:
    """The Job's Workload (waiting for kadmit to make it)."""

    async def find() -> dict[str, Any] | None:
        items = json.loads(await kubectl(kubeconfig, "get", "workloads", "-o", "json"))["items"]
        found = [w for w in items if w["metadata"]["ownerReferences"][0]["name"] == job_name]
        return found[0] if found else None

    return await eventually(find, 30, f"the Workload of {job_name}", every=0.3)  # type: ignore[no-any-return]


async def admitted(kubeconfig: Path, job_name: str) -> bool:
    wl = await workload_of(kubeconfig, job_name)
    return any(
        c["type"] == "Admitted" and c["status"] == "True"
        for c in (wl.get("status") or {}).get("conditions", [])
    )


async def test_list_describe_stop_resume(tmp_path: Path) -> None:
    async with kadmit_local(tmp_path) as kc:
        await kubectl(kc, "apply", "-f", "-", stdin=SETUP)
        # team-b runs 3 of its 4 cpu (it lends at most 2, so the cohort has 1 to lend), team-a 3 of 4.
        for name, queue in (("b1", "team-b"), ("a1", "team-a")):
            await kubectl(kc, "create", "-f", "-", stdin=job(name, queue))
            await eventually(functools.partial(admitted, kc, name), 30, f"{name} admitted", every=0.3)
        await kubectl(kc, "create", "-f", "-", stdin=job("a2", "team-a"))

        async def a2_waits() -> str | None:
            wl = await workload_of(kc, "a2")
            conditions = {c["type"]: c for c in (wl.get("status") or {}).get("conditions", [])}
            reserved = conditions.get("QuotaReserved")
            return wl["metadata"]["name"] if reserved and reserved["status"] == "False" else None

        a2 = await eventually(a2_waits, 30, "a2 pending with a reason", every=0.3)

        # Queue status is written a moment after the Workloads change (at most once a second).
        async def cluster_queues() -> dict[str, list[str]] | None:
            out, _ = await kadmit(kc, "list", "clusterqueues")
            rows = {line.split()[0]: line.split() for line in out.splitlines()}
            return rows if rows["team-a-cq"][1:6] == ["team-a", "1", "1", "1", "true"] else None

        rows = await eventually(
            cluster_queues, 30, "team-a-cq: 1 pending, 1 reserving, 1 admitted", every=0.3
        )
        assert rows["NAME"][:6] == ["NAME", "COHORT", "PENDING", "RESERVING", "ADMITTED", "ACTIVE"]

        async def local_queues() -> list[str] | None:
            out, _ = await kadmit(kc, "list", "localqueues", "-A")
            lines = out.splitlines()
            return (
                lines
                if any(line.split()[:4] == ["default", "team-a", "team-a-cq", "1"] for line in lines)
                else None
            )

        lines = await eventually(local_queues, 30, "LocalQueue team-a: 1 pending", every=0.3)
        assert lines[0].split()[:3] == ["NAMESPACE", "NAME", "CLUSTERQUEUE"]

        out, _ = await kadmit(kc, "list", "workloads")
        [line] = [line for line in out.splitlines() if line.startswith(a2)]
        assert "Job/a2" in line and "PENDING" in line and "0 (0)" in line
        assert line.endswith("insufficient unused quota for cpu in flavor on-demand, 1 more needed"), line
        listed = json.loads((await kadmit(kc, "list", "workloads", "-o", "json", "--status", "pending"))[0])
        [row] = listed["items"]
        assert (row["name"], row["positionInLocalQueue"], row["positionInClusterQueue"]) == (a2, 0, 0)

        out, _ = await kadmit(kc, "list", "workloads", "--for", "job/a2")
        assert [line.split()[0] for line in out.splitlines()[1:]] == [a2]
        await kubectl(kc, "label", "localqueue", "team-b", "tier=gold")
        out, _ = await kadmit(kc, "list", "localqueues", "-l", "tier=gold")
        assert [line.split()[0] for line in out.splitlines()[1:]] == ["team-b"]
        out, _ = await kadmit(kc, "list", "localqueues", "--field-selector", "metadata.name=team-a")
        assert [line.split()[0] for line in out.splitlines()[1:]] == ["team-a"]
        out, _ = await kadmit(kc, "list", "clusterqueues", "--active", "false")
        assert out == "No ClusterQueues found.\n"

        out, _ = await kadmit(kc, "describe", "workload", a2)
        assert "Queue:                LocalQueue team-a -> ClusterQueue team-a-cq" in out
        assert "PENDING: 0 pending ahead of it in ClusterQueue team-a-cq (of 1)" in out
        assert "needs 2 more cpu in flavor on-demand; cohort team-a could lend 1, 1 short" in out, out
        explained = yaml.safe_load((await kadmit(kc, "describe", "workload", a2, "-o", "yaml"))[0])
        assert explained["status"] == "pending" and explained["requests"] == {"cpu": "3"}

        # a LocalQueue stopped, as kueuectl does it, then resumed
        out, _ = await kadmit(kc, "stop", "localqueue", "team-a")
        assert out == "localqueue.kueue.x-k8s.io/team-a stopped\n"
        assert await kubectl(kc, "get", "lq", "team-a", "-o", "jsonpath={.spec.stopPolicy}") == "HoldAndDrain"
        out, _ = await kadmit(kc, "describe", "workload", a2)
        assert "LocalQueue team-a is stopped (stopPolicy HoldAndDrain)" in out
        assert "kadmit resume localqueue team-a -n default" in out
        await kadmit(kc, "resume", "lq", "team-a")
        assert await kubectl(kc, "get", "lq", "team-a", "-o", "jsonpath={.spec.stopPolicy}") == "None"

        # The drain evicted a1; requeued at its eviction time, a2 may now come first: one of them runs.
        async def one_runs() -> tuple[str, str] | None:
            a1_runs, a2_runs = await admitted(kc, "a1"), await admitted(kc, "a2")
            if a1_runs != a2_runs:
                return ("a1", "a2") if a1_runs else ("a2", "a1")
            return None

        running_job, waiting_job = await eventually(
            one_runs, 30, "a1 or a2 admitted after the drain", every=0.3
        )

        # a ClusterQueue held, its running workload left alone
        await kadmit(kc, "stop", "clusterqueue", "team-b-cq", "--keep-already-running")
        assert await kubectl(kc, "get", "cq", "team-b-cq", "-o", "jsonpath={.spec.stopPolicy}") == "Hold"
        assert await admitted(kc, "b1")
        await kadmit(kc, "resume", "cq", "team-b-cq")

        # a Workload stopped: its quota goes to the one waiting
        running = (await workload_of(kc, running_job))["metadata"]["name"]
        await kadmit(kc, "stop", "workload", running)
        assert await kubectl(kc, "get", "workloads", running, "-o", "jsonpath={.spec.active}") == "false"
        await eventually(
            lambda: admitted(kc, waiting_job),
            30,
            f"{waiting_job} admitted once {running_job} is stopped",
            every=0.3,
        )
        out, _ = await kadmit(kc, "describe", "workload", running)
        assert "it is stopped (spec.active is false)" in out
        assert f"kadmit resume workload {running} -n default" in out
        await kadmit(kc, "resume", "workload", running)
        assert await kubectl(kc, "get", "workloads", running, "-o", "jsonpath={.spec.active}") == "true"

        # a ClusterQueue whose namespaceSelector leaves the namespace out
        await kubectl(kc, "create", "-f", "-", stdin=job("p1", "picky"))
        p1 = (await workload_of(kc, "p1"))["metadata"]["name"]
        out, _ = await kadmit(kc, "describe", "workload", p1)
        assert "ClusterQueue picky's namespaceSelector does not match namespace default" in out, out
        assert "a namespaceSelector on ClusterQueue picky that selects namespace default" in out

        # the kubeconfig from $KUBECONFIG, a context by name, another namespace
        env = {**os.environ, "KUBECONFIG": str(kc)}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kadmit",
            "list",
            "workloads",
            "-n",
            "kube-system",
            "--context",
            "kadmit-local",
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out_bytes, err_bytes = await proc.communicate()
        assert proc.returncode == 0, err_bytes.decode()
        assert out_bytes.decode() == "No Workloads found in kube-system namespace.\n"

        # errors: one line, 1 at runtime, 2 for usage
        _, err = await kadmit(kc, "describe", "workload", "nope", code=1)
        assert err == 'kadmit: error: workload "nope" not found in namespace "default"\n'
        _, err = await kadmit(kc, "stop", "clusterqueue", "nope", code=1)
        assert err == 'kadmit: error: clusterqueue "nope" not found\n'
        _, err = await kadmit(kc, "stop", "workload", running, "--keep-already-running", code=2)
        assert err.count("\n") == 1
        await kadmit(kc, "list", "jobs", code=2)
        _, err = await kadmit(tmp_path / "missing", "list", "clusterqueues", code=1)
        assert err == f"kadmit: error: --kubeconfig {tmp_path / 'missing'}: no such file\n"


COHORT_TREE = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: on-demand}
spec:
  nodeLabels: {kadmit.dev/pool: cpu}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: on-demand
      resources: [{name: cpu, nominalQuota: 2}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: team}
spec: {parentName: org}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: x}
spec:
  namespaceSelector: {}
  cohortName: team
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: on-demand
      resources: [{name: cpu, nominalQuota: 2}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: x, namespace: default}
spec: {clusterQueue: x}
"""


async def test_describe_counts_what_a_cohort_tree_lends(tmp_path: Path) -> None:
    """ClusterQueue x (2 cpu) hangs in Cohort team, under Cohort org, which holds 2 cpu of its
    own: x1 (3 cpu) runs on 1 borrowed from org; x2 (3 cpu) waits, and describe tells what the
    tree could lend it now (1: org's other cpu), not only what x's cohort siblings could."""
    async with kadmit_local(tmp_path) as kc:
        await kubectl(kc, "apply", "-f", "-", stdin=COHORT_TREE)
        await kubectl(kc, "create", "-f", "-", stdin=job("x1", "x"))
        await eventually(lambda: admitted(kc, "x1"), 30, "x1 admitted, borrowing from Cohort org", every=0.3)
        await kubectl(kc, "create", "-f", "-", stdin=job("x2", "x"))
        x2 = (await workload_of(kc, "x2"))["metadata"]["name"]

        expected = "needs 3 more cpu in flavor on-demand; cohort team could lend 1, 2 short"
        last: list[str] = []

        async def explained() -> str | None:
            # describe reads the cluster as it is: until x1's usage is seen everywhere (its
            # reservation, the queues' status) it may count less in use; wait for the settled view
            out, _ = await kadmit(kc, "describe", "workload", x2)
            last[:] = [out]
            return out if expected in out else None

        try:
            await eventually(explained, 30, "describe x2 with what the cohort tree could lend", every=0.3)
        except AssertionError:
            shown = last[0] if last else ""
            raise AssertionError(f"describe never said {expected!r}; last:\n{shown}") from None
