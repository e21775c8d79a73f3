"""The CRDs as an API server sees them: kubectl creates them, then Kueue objects, over HTTP.

Runs kubectl against kadmit's local API server (localcluster), so the CRDs, their printer
columns and their schemas go through a real client and a real server, as ``kubectl apply``
does on a cluster.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest

from tests.manifests.conftest import MANIFESTS, load_documents

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
local_cluster = pytest.importorskip("kadmit.localcluster.cluster")


class Kubectl:
    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig

    async def __call__(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        command = [KUBECTL, "--kubeconfig", self.kubeconfig, *args]
        return await asyncio.to_thread(
            subprocess.run, command, capture_output=True, text=True, timeout=60, input=stdin
        )


async def test_crds_then_kueue_objects_through_kubectl() -> None:
    """kubectl creates the CRDs, then a sample; an invalid object is refused at its field path."""
    async with local_cluster.LocalCluster() as cluster:
        kubectl = Kubectl(cluster.kubeconfig)
        created = await kubectl("create", "-k", str(MANIFESTS / "crds"))
        assert created.returncode == 0, created.stderr
        assert created.stdout.count("customresourcedefinition.apiextensions.k8s.io/") == 11

        sample = str(MANIFESTS / "samples" / "single-clusterqueue.yaml")
        created = await kubectl("create", "--validate=false", "-f", sample)
        assert created.returncode == 0, created.stderr
        assert "clusterqueue.kueue.x-k8s.io/cluster-queue created" in created.stdout
        assert "job.batch/sample-job-a created" in created.stdout

        queues = await kubectl("get", "cq", "-o", "wide")
        assert queues.returncode == 0, queues.stderr
        header, row = queues.stdout.splitlines()
        columns = ["NAME", "COHORT", "STRATEGY", "PENDING", "WORKLOADS", "ADMITTED", "WORKLOADS"]
        assert header.split()[: len(columns)] == columns
        assert row.split()[:2] == ["cluster-queue", "BestEffortFIFO"]  # defaulted by the CRD schema

        everything = await kubectl("get", "kueue", "-A", "-o", "name")
        assert set(everything.stdout.split()) == {
            "clusterqueue.kueue.x-k8s.io/cluster-queue",
            "localqueue.kueue.x-k8s.io/user-queue",
            "resourceflavor.kueue.x-k8s.io/default-flavor",
        }

        bad = "\n".join(
            [
                "apiVersion: kueue.x-k8s.io/v1beta2",
                "kind: ClusterQueue",
                "metadata: {name: bad}",
                "spec: {queueingStrategy: LIFO}",
            ]
        )
        refused = await kubectl("create", "--validate=false", "-f", "-", stdin=bad)
        assert refused.returncode == 1
        assert "spec.queueingStrategy" in refused.stderr and "LIFO" in refused.stderr

        # Last, kadmit's deployment itself (its webhooks would refuse Jobs: kadmit is not running).
        deployed = await kubectl("create", "--validate=false", "-k", str(MANIFESTS / "base"))
        expected = {
            "namespace/kadmit-system",
            "serviceaccount/kadmit-controller-manager",
            "role.rbac.authorization.k8s.io/kadmit-manager-role",
            "clusterrole.rbac.authorization.k8s.io/kadmit-manager-role",
            "rolebinding.rbac.authorization.k8s.io/kadmit-manager-rolebinding",
            "clusterrolebinding.rbac.authorization.k8s.io/kadmit-manager-rolebinding",
            "configmap/kadmit-manager-config",
            "service/kadmit-controller-manager-metrics-service",
            "service/kadmit-webhook-service",
            "deployment.apps/kadmit-controller-manager",
            "mutatingwebhookconfiguration.admissionregistration.k8s.io/kadmit-mutating-webhook-configuration",
            "validatingwebhookconfiguration.admissionregistration.k8s.io/kadmit-validating-webhook-configuration",
            # the Visibility API, as Kueue's config/components/visibility
            "apiservice.apiregistration.k8s.io/v1beta2.visibility.kueue.x-k8s.io",
            "apiservice.apiregistration.k8s.io/v1beta1.visibility.kueue.x-k8s.io",
            "service/kadmit-visibility-server",
            "rolebinding.rbac.authorization.k8s.io/kadmit-visibility-server-auth-reader",
            *(
                f"{doc['kind'].lower()}.rbac.authorization.k8s.io/{doc['metadata']['name']}"
                for name in ("rbac.yaml", "user-roles.yaml")
                for doc in load_documents(MANIFESTS / "base" / name)
            ),
        }
        created_names = {line.removesuffix(" created") for line in deployed.stdout.splitlines()}
        assert expected <= created_names, deployed.stderr
        # The local API server does not serve policy/v1 yet; every other kind must be created.
        pdb = "poddisruptionbudget.policy/kadmit-controller-manager"
        assert pdb in created_names or 'no matches for kind "PodDisruptionBudget"' in deployed.stderr
        assert created_names <= expected | {pdb}
