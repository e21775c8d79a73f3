"""Users as users: what a namespace user bound to ``edit`` or to ``kadmit-batch-user-role``, and a
``kadmit-batch-admin-role`` holder, may do with kadmit installed — with kubectl and their own tokens,
RBAC enforced by the API server, and kadmit's webhooks in the path.

Kueue's roles aggregate into the built-in ones, so a user who can edit a namespace can also read
its LocalQueues and Workloads; nobody but a batch admin changes ClusterQueues or ResourceFlavors;
and nobody but kadmit starts a queued Job (the webhook's guard, since ``edit`` may update Jobs).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from kadmit.kube import Client
from kadmit.kube.resources import CLUSTER_ROLE_BINDINGS, NAMESPACES, ROLE_BINDINGS
from kadmit.localcluster.cluster import LocalCluster
from tests.e2e.conftest import WebhookEnv, eventually, webhook_env
from tests.e2e.helpers import apply_small_setup, job

Obj = dict[str, Any]
RBAC = "rbac.authorization.k8s.io"


@pytest.fixture
async def kadmit_https() -> AsyncIterator[WebhookEnv]:
    async for env in webhook_env(https=True):
        yield env


async def kubectl(cluster: LocalCluster, token: str, *args: str, stdin: str = "") -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", cluster.kubeconfig_for(token), *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def role_binding(name: str, namespace: str, cluster_role: str, user: str) -> Obj:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": namespace},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": cluster_role},
        "subjects": [{"apiGroup": RBAC, "kind": "User", "name": user}],
    }


async def setup(kube: Client, cluster: LocalCluster) -> None:
    await apply_small_setup(kube)
    for namespace in ("team-a", "team-b"):
        await kube.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
        await kube.request(
            "POST",
            f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{namespace}/localqueues",
            body={
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": "user-queue", "namespace": namespace},
                "spec": {"clusterQueue": "small"},
            },
        )
    await kube.create(ROLE_BINDINGS, role_binding("alice-edits", "team-a", "edit", "alice"))
    await kube.create(ROLE_BINDINGS, role_binding("carol-runs", "team-a", "kadmit-batch-user-role", "carol"))
    admin_binding = role_binding("dave-admin", "", "kadmit-batch-admin-role", "dave")
    admin_binding["kind"] = "ClusterRoleBinding"
    del admin_binding["metadata"]["namespace"]
    await kube.create(CLUSTER_ROLE_BINDINGS, admin_binding)
    for name in ("alice", "carol", "dave"):
        cluster.add_user(f"{name}-token", name)
    await cluster.settled()  # the aggregated roles hold Kueue's per-kind rules


def job_yaml(name: str, namespace: str, cpu: str = "1") -> str:
    manifest = job(name, cpu=cpu, parallelism=1, runtime="60s", queue="user-queue")
    manifest["metadata"]["namespace"] = namespace
    manifest["spec"]["suspend"] = False  # as a user writes it: kadmit's webhook suspends it
    return yaml.safe_dump(manifest)


def forbidden(user: str, verb: str, resource: str, group: str, where: str) -> str:
    return f'User "{user}" cannot {verb} resource "{resource}" in API group "{group}" {where}'


async def test_namespace_users_run_jobs_and_see_their_queues_but_not_the_cluster_side(
    kadmit_https: WebhookEnv,
) -> None:
    kube, cluster = kadmit_https.kube, kadmit_https.cluster
    await setup(kube, cluster)

    for user in ("alice", "carol"):
        token = f"{user}-token"
        name = f"{user}-job"
        code, out, err = await kubectl(
            cluster, token, "create", "-f", "-", "-o", "json", stdin=job_yaml(name, "team-a")
        )
        assert code == 0, err
        # the object as created, not as read back: kadmit may admit and start it in between
        created = json.loads(out)
        assert created["spec"]["suspend"] is True  # kadmit's mutating webhook
        code, out, err = await kubectl(cluster, token, "get", "localqueues", "-n", "team-a", "-o", "name")
        assert (code, out.strip()) == (0, "localqueue.kueue.x-k8s.io/user-queue"), err

        async def own_workload(job_name: str = name, who: str = token) -> bool:
            code, out, _ = await kubectl(cluster, who, "get", "workloads", "-n", "team-a", "-o", "json")
            items = json.loads(out)["items"] if code == 0 else []
            return any(w["metadata"]["name"].startswith(f"job-{job_name}-") for w in items)

        await eventually(own_workload, what=f"{user} to see the Workload of their Job")

        # the cluster side is the batch admin's
        code, _, err = await kubectl(
            cluster,
            token,
            "patch",
            "clusterqueue",
            "small",
            "--type",
            "merge",
            "-p",
            '{"spec":{"cohortName":"x"}}',
        )
        assert code == 1 and 'clusterqueues.kueue.x-k8s.io "small" is forbidden: User' in err, err
        code, _, err = await kubectl(cluster, token, "delete", "resourceflavor", "cpu")
        assert (
            code == 1
            and forbidden(user, "delete", "resourceflavors", "kueue.x-k8s.io", "at the cluster scope") in err
        )
        code, _, err = await kubectl(cluster, token, "get", "workloads", "-n", "team-b")
        where = 'in the namespace "team-b"'
        assert code == 1 and forbidden(user, "list", "workloads", "kueue.x-k8s.io", where) in err
        code, _, err = await kubectl(
            cluster, token, "create", "-f", "-", stdin=job_yaml(f"{name}-b", "team-b")
        )
        assert code == 1 and forbidden(user, "create", "jobs", "batch", where) in err

    # edit may update Jobs, but a queued Job is kadmit's to start: the webhook's guard refuses
    code, _, err = await kubectl(
        cluster, "alice-token", "create", "-f", "-", stdin=job_yaml("big", "team-a", "64")
    )
    assert code == 0, err
    code, _, err = await kubectl(
        cluster, "alice-token", "patch", "job", "big", "-n", "team-a", "--type", "merge",
        "-p", '{"spec":{"suspend":false}}',
    )  # fmt: skip
    assert code == 1
    assert 'admission webhook "vjob.kb.io" denied the request: Job team-a/big cannot be unsuspended' in err
    # batch-user may not even try (RBAC: no patch on Workloads, read-only)
    code, _, err = await kubectl(cluster, "carol-token", "delete", "workloads", "--all", "-n", "team-a")
    assert code == 1 and "Forbidden" in err
    code, out, _ = await kubectl(
        cluster, "carol-token", "auth", "can-i", "create", "jobsets.jobset.x-k8s.io", "-n", "team-a"
    )
    assert out.strip() == "yes"


async def test_a_batch_admin_manages_queues(kadmit_https: WebhookEnv) -> None:
    kube, cluster = kadmit_https.kube, kadmit_https.cluster
    await setup(kube, cluster)
    queues = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: research}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: spot
      resources: [{name: cpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: research, namespace: team-b}
spec: {clusterQueue: research}
"""
    code, _, err = await kubectl(cluster, "dave-token", "create", "-f", "-", stdin=queues)
    assert code == 0, err
    code, _, err = await kubectl(
        cluster,
        "dave-token",
        "patch",
        "clusterqueue",
        "small",
        "--type",
        "merge",
        "-p",
        '{"spec":{"stopPolicy":"Hold"}}',
    )
    assert code == 0, err
    code, _, err = await kubectl(cluster, "dave-token", "get", "workloads", "-A")
    assert code == 0, err
    # a batch admin is not a cluster admin
    code, _, err = await kubectl(cluster, "dave-token", "get", "secrets", "-n", "kadmit-system")
    assert code == 1 and "Forbidden" in err
