"""The Job controller's Pods go through the server's ResourceQuota admission like any client's."""

from __future__ import annotations

from kubernetes_asyncio import client as k8s

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.sim import JobController

from .conftest import has_true, job_manifest, wait_for


async def test_pod_over_quota_is_rejected_then_retried(
    cluster: LocalCluster, batch: k8s.BatchV1Api, core: k8s.CoreV1Api
) -> None:
    await core.create_namespaced_resource_quota("default", {
        "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "cpu"},
        "spec": {"hard": {"requests.cpu": "2"}},
    })
    await batch.create_namespaced_job("default", job_manifest("squeezed", parallelism=3, completions=3,
                                                               runtime="300ms"))
    running = await wait_for(batch.list_namespaced_job, lambda j: (j.get("status") or {}).get("ready") == 2,
                             namespace="default", field_selector="metadata.name=squeezed")
    assert running["status"]["active"] == 2  # the third Pod does not fit the quota
    controller = next(a for a in cluster.addons if isinstance(a, JobController))
    assert controller.rejected >= 1
    done = await wait_for(batch.list_namespaced_job, has_true("Complete"), namespace="default",
                          field_selector="metadata.name=squeezed")
    assert done["status"]["succeeded"] == 3
    quota = await core.read_namespaced_resource_quota_status("cpu", "default")
    assert quota.status.hard["requests.cpu"] == "2"
