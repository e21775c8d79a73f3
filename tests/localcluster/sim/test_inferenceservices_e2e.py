"""KServe InferenceServices on the simulated cluster: served with the upstream CRD (its schema,
descriptions trimmed), run as a predictor Deployment as KServe's RawDeployment mode runs them."""

from __future__ import annotations

from pathlib import Path

import yaml
from kubernetes_asyncio import client as k8s

from kadmit.localcluster.sim.inferenceservices import derivative, desired_deployment, merged

from .conftest import Obj, established, wait_for

CRD = (
    Path(__file__).resolve().parents[3]
    / "manifests"
    / "third-party"
    / "serving.kserve.io_inferenceservices.yaml"
)


def isvc(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": "default", "labels": labels or {}, "uid": "u-1"},
        "spec": {
            "predictor": {
                "minReplicas": 2,
                "nodeSelector": {"disk": "ssd"},
                "model": {
                    "modelFormat": {"name": "sklearn"},
                    "storageUri": "gs://kfserving-examples/models/sklearn/1.0/model",
                    "resources": {"requests": {"cpu": "100m", "ephemeral-storage": "1Gi"}},
                },
            }
        },
    }


def test_the_predictor_deployment_is_named_and_labelled_as_kserve_does() -> None:
    deployment = desired_deployment(isvc("iris", {"kueue.x-k8s.io/queue-name": "q"}))
    assert deployment["metadata"]["name"] == "iris-predictor"
    assert deployment["metadata"]["labels"] == {
        "kueue.x-k8s.io/queue-name": "q",
        "serving.kserve.io/inferenceservice": "iris",
        "component": "predictor",
    }
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["selector"] == {"matchLabels": {"app": "isvc.iris-predictor"}}
    template = deployment["spec"]["template"]
    assert template["metadata"]["labels"]["app"] == "isvc.iris-predictor"
    assert template["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "q"
    assert template["spec"]["nodeSelector"] == {"disk": "ssd"}
    [container] = template["spec"]["containers"]
    assert container["name"] == "kserve-container"
    assert container["image"] == "kserve/sklearnserver:latest"
    assert container["resources"]["requests"]["ephemeral-storage"] == "1Gi"


def test_an_unchanged_predictor_keeps_what_others_added() -> None:
    want = desired_deployment(isvc("iris"))["spec"]
    marked = merged(want, {})
    marked["template"]["metadata"]["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] = "deployment"
    assert derivative(want, marked)
    want["replicas"] = 3
    assert not derivative(want, marked)
    updated = merged(want, marked)
    assert updated["replicas"] == 3
    assert (
        updated["template"]["metadata"]["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] == "deployment"
    )


async def test_an_inference_service_serves_through_its_predictor(api_client: k8s.ApiClient) -> None:
    replicas = 2
    ext, custom, apps = (
        k8s.ApiextensionsV1Api(api_client),
        k8s.CustomObjectsApi(api_client),
        k8s.AppsV1Api(api_client),
    )
    await ext.create_custom_resource_definition(next(d for d in yaml.safe_load_all(CRD.read_text()) if d))
    await wait_for(
        ext.list_custom_resource_definition,
        established,
        field_selector="metadata.name=inferenceservices.serving.kserve.io",
    )
    body = isvc("iris", {"team": "a"})
    del body["metadata"]["uid"]
    body["spec"]["predictor"]["minReplicas"] = replicas
    del body["spec"]["predictor"]["nodeSelector"]
    body["spec"]["predictor"]["model"]["resources"]["requests"].pop("ephemeral-storage")  # small nodes
    await custom.create_namespaced_custom_object(
        "serving.kserve.io", "v1beta1", "default", "inferenceservices", body
    )

    def ready(obj: Obj) -> bool:
        conditions = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
        return conditions.get("Ready") == "True" and conditions.get("PredictorReady") == "True"

    served = await wait_for(
        custom.list_namespaced_custom_object,
        ready,
        group="serving.kserve.io",
        version="v1beta1",
        namespace="default",
        plural="inferenceservices",
    )
    assert served["status"]["url"] == "http://iris-default.example.com"
    assert served["status"]["address"]["url"] == "http://iris.default.svc.cluster.local"
    deployment = await apps.read_namespaced_deployment("iris-predictor", "default")
    assert deployment.metadata.owner_references[0].kind == "InferenceService"
    assert deployment.metadata.labels["team"] == "a"
    assert deployment.status.ready_replicas == replicas
