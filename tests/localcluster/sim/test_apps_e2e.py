"""Deployments, ReplicaSets and StatefulSets on the simulated cluster, through the API only."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client as k8s

from .conftest import Obj, condition, wait_for, wait_for_count


def template(app: str, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": app}, "annotations": annotations},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]},
    }


async def test_a_deployment_runs_its_replicas_through_a_replica_set(api_client: k8s.ApiClient) -> None:
    apps, core = k8s.AppsV1Api(api_client), k8s.CoreV1Api(api_client)
    await apps.create_namespaced_deployment(
        "default",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": template("web")},
        },
    )

    def available(d: Obj) -> bool:
        found = condition(d, "Available")
        return found is not None and found["status"] == "True" and d["status"].get("readyReplicas") == 3

    await wait_for(
        apps.list_namespaced_deployment, available, namespace="default", field_selector="metadata.name=web"
    )
    [rs] = (await apps.list_namespaced_replica_set("default")).items
    assert rs.metadata.name.startswith("web-") and rs.metadata.owner_references[0].kind == "Deployment"
    pods = (await core.list_namespaced_pod("default", label_selector="app=web")).items
    assert len(pods) == 3
    assert all(
        p.metadata.labels["pod-template-hash"] == rs.metadata.labels["pod-template-hash"] for p in pods
    )
    assert all(p.metadata.owner_references[0].name == rs.metadata.name for p in pods)
    # a deleted Pod is replaced; scaling down removes Pods
    await core.delete_namespaced_pod(pods[0].metadata.name, "default")
    await wait_for(
        core.list_namespaced_pod,
        lambda p: (
            p["metadata"]["name"] not in {q.metadata.name for q in pods}
            and p["status"].get("phase") == "Running"
        ),
        namespace="default",
        label_selector="app=web",
    )
    await apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 1}})
    await wait_for_count(core.list_namespaced_pod, 1, namespace="default", label_selector="app=web")


async def test_a_stateful_set_creates_ordered_pods_one_after_another(api_client: k8s.ApiClient) -> None:
    apps, core = k8s.AppsV1Api(api_client), k8s.CoreV1Api(api_client)
    await apps.create_namespaced_stateful_set(
        "default",
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db"},
            "spec": {
                "replicas": 3,
                "serviceName": "db",
                "selector": {"matchLabels": {"app": "db"}},
                "template": template("db"),
            },
        },
    )

    def ready(s: Obj) -> bool:
        return (s.get("status") or {}).get("readyReplicas") == 3

    await wait_for(
        apps.list_namespaced_stateful_set, ready, namespace="default", field_selector="metadata.name=db"
    )
    pods = sorted(
        (await core.list_namespaced_pod("default", label_selector="app=db")).items,
        key=lambda p: p.metadata.name,
    )
    assert [p.metadata.name for p in pods] == ["db-0", "db-1", "db-2"]
    assert [p.metadata.labels["apps.kubernetes.io/pod-index"] for p in pods] == ["0", "1", "2"]
    started = [p.status.start_time for p in pods]
    assert started == sorted(started)  # OrderedReady: each after the one before was ready
    await apps.patch_namespaced_stateful_set("db", "default", {"spec": {"replicas": 1}})
    await wait_for_count(core.list_namespaced_pod, 1, namespace="default", label_selector="app=db")
    assert (await core.list_namespaced_pod("default", label_selector="app=db")).items[
        0
    ].metadata.name == "db-0"


async def test_a_gated_stateful_set_pod_holds_back_the_next_ordinal(api_client: k8s.ApiClient) -> None:
    apps, core = k8s.AppsV1Api(api_client), k8s.CoreV1Api(api_client)
    gated = template("held")
    gated["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    await apps.create_namespaced_stateful_set(
        "default",
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "held"},
            "spec": {
                "replicas": 2,
                "serviceName": "held",
                "selector": {"matchLabels": {"app": "held"}},
                "template": gated,
            },
        },
    )
    await wait_for(
        core.list_namespaced_pod,
        lambda p: p["metadata"]["name"] == "held-0",
        namespace="default",
        label_selector="app=held",
    )
    await core.patch_namespaced_pod(
        "held-0", "default", {"spec": {"schedulingGates": None}}, _content_type="application/merge-patch+json"
    )
    await wait_for(
        core.list_namespaced_pod,
        lambda p: p["metadata"]["name"] == "held-1",
        namespace="default",
        label_selector="app=held",
    )
