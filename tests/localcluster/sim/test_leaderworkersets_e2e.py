"""LeaderWorkerSets on the simulated cluster: served with the upstream CRD, groups of a leader and workers."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes_asyncio import client as k8s

from .conftest import Obj, established, wait_for

CRD = (
    Path(__file__).resolve().parents[3]
    / "manifests"
    / "third-party"
    / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
)


async def test_a_leader_worker_set_runs_its_groups(api_client: k8s.ApiClient) -> None:
    ext, custom, core = (
        k8s.ApiextensionsV1Api(api_client),
        k8s.CustomObjectsApi(api_client),
        k8s.CoreV1Api(api_client),
    )
    await ext.create_custom_resource_definition(yaml.safe_load(CRD.read_text()))
    await wait_for(
        ext.list_custom_resource_definition,
        established,
        field_selector="metadata.name=leaderworkersets.leaderworkerset.x-k8s.io",
    )
    template = {
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]}
    }
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "infer"},
        "spec": {
            "replicas": 2,
            "leaderWorkerTemplate": {"size": 3, "leaderTemplate": template, "workerTemplate": template},
        },
    }
    await custom.create_namespaced_custom_object(
        "leaderworkerset.x-k8s.io", "v1", "default", "leaderworkersets", lws
    )

    def available(obj: Obj) -> bool:
        return (obj.get("status") or {}).get("readyReplicas") == 2

    await wait_for(
        custom.list_namespaced_custom_object,
        available,
        group="leaderworkerset.x-k8s.io",
        version="v1",
        namespace="default",
        plural="leaderworkersets",
    )
    pods = (
        await core.list_namespaced_pod("default", label_selector="leaderworkerset.sigs.k8s.io/name=infer")
    ).items
    assert sorted(p.metadata.name for p in pods) == [
        "infer-0",
        "infer-0-1",
        "infer-0-2",
        "infer-1",
        "infer-1-1",
        "infer-1-2",
    ]
    workers = [p for p in pods if p.metadata.labels["leaderworkerset.sigs.k8s.io/worker-index"] != "0"]
    assert all(
        p.metadata.annotations["leaderworkerset.sigs.k8s.io/leader-name"]
        == f"infer-{p.metadata.labels['leaderworkerset.sigs.k8s.io/group-index']}"
        for p in workers
    )
    # an invalid object is refused by the upstream schema
    bad = {
        **lws,
        "metadata": {"name": "bad"},
        "spec": {"replicas": "two", "leaderWorkerTemplate": {"workerTemplate": template}},
    }
    try:
        await custom.create_namespaced_custom_object(
            "leaderworkerset.x-k8s.io", "v1", "default", "leaderworkersets", bad
        )
    except k8s.ApiException as exc:
        assert exc.status == 422 and "spec.replicas" in exc.body
    else:
        raise AssertionError("a string replicas was accepted")
