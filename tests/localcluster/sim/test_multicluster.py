"""A manager and workers at once; a worker's kubeconfig in a manager Secret, as MultiKueue reads it."""

from __future__ import annotations

import base64

import pytest
import yaml
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from kadmit.localcluster.interfaces import ClusterAddon
from kadmit.localcluster.multicluster import MultiCluster, put_kubeconfig_secret
from kadmit.localcluster.sim import default_addons

from .conftest import has_true, job_manifest, small_config, wait_for


async def test_workers_are_reachable_through_the_secret_in_the_manager() -> None:
    def addons(name: str) -> list[ClusterAddon]:
        return default_addons(small_config()) if name != "manager" else []

    workers = ["worker1", "worker2"]
    async with MultiCluster(workers=workers, addons=addons, https=True, token=True) as clusters:
        ports = {c.port for c in clusters.clusters}
        assert len(ports) == 3
        secrets = await clusters.connect_workers()
        assert set(secrets) == {"worker1", "worker2"}
        manager_client = await clusters.manager.api_client()
        async with manager_client:
            stored = await k8s.CoreV1Api(manager_client).read_namespaced_secret("worker1-kubeconfig",
                                                                                 "kadmit-system")
        kubeconfig = yaml.safe_load(base64.b64decode(stored.data["kubeconfig"]))
        cluster_entry = kubeconfig["clusters"][0]["cluster"]
        assert cluster_entry["server"] == clusters.workers["worker1"].url
        assert "certificate-authority-data" in cluster_entry and "certificate-authority" not in cluster_entry
        assert kubeconfig["users"][0]["user"]["token"] == clusters.workers["worker1"].token

        worker_client = await k8s_config.new_client_from_config_dict(kubeconfig)
        async with worker_client:
            batch = k8s.BatchV1Api(worker_client)
            await batch.create_namespaced_job("default", job_manifest("remote"))
            await wait_for(batch.list_namespaced_job, has_true("Complete"), namespace="default")
            nodes = await k8s.CoreV1Api(worker_client).list_node()
            assert len(nodes.items) == 3
        worker2_client = await clusters.workers["worker2"].api_client()
        async with worker2_client:
            jobs = await k8s.BatchV1Api(worker2_client).list_namespaced_job("default")
            assert jobs.items == []  # each cluster has its own store

        worker2 = clusters.workers["worker2"]
        first = await put_kubeconfig_secret(clusters.manager, worker2, name="worker2-secret")
        assert first["metadata"]["name"] == "worker2-secret"
        second = await put_kubeconfig_secret(clusters.manager, worker2, name="worker2-secret")
        assert second["data"] == first["data"]
        assert second["metadata"]["uid"] == first["metadata"]["uid"]  # updated in place, not recreated


def test_cluster_names_must_be_unique() -> None:
    with pytest.raises(ValueError, match="unique"):
        MultiCluster(workers=["a", "a"])
    with pytest.raises(ValueError, match="own port"):
        MultiCluster(workers=1, port=8080)
