"""The KServe InferenceService controller (``serving.kserve.io/v1beta1``), in KServe's default
``Standard`` deployment mode (formerly ``RawDeployment``): the predictor runs as a Deployment.

Upstream's contract, the parts a queueing controller depends on
(``pkg/controller/v1beta1/inferenceservice`` in kserve/kserve): the predictor is the
Deployment ``<name>-predictor``, owned by the InferenceService, labelled with the
InferenceService's labels, the predictor's own ``labels`` and ``serving.kserve.io/inferenceservice:
<name>``, ``component: predictor`` (so a ``kueue.x-k8s.io/queue-name`` label on the
InferenceService reaches the Deployment and its pod template); its Pods are also labelled
``app: isvc.<name>-predictor``, the Deployment's selector. The pod spec is the predictor's: a
``model`` (``modelFormat``, ``storageUri``, ``resources``, ...) becomes the container
``kserve-container`` running the format's model server, or the predictor's own ``containers``
run as written; the predictor's pod-spec fields (``nodeSelector``, ``tolerations``, ...) are
kept. ``minReplicas`` (default 1) sets the Deployment's replicas. Like KServe, the Deployment is
changed only when what KServe wants of it is not already in it (``DeepDerivative``: fields others
added, such as a queueing webhook's marks on the pod template, stay).

Status: ``PredictorReady``, ``IngressReady`` and ``Ready`` conditions (``Ready`` once the
Deployment is ``Available``, with its reason and message otherwise), ``url``, ``address.url``,
``components.predictor`` and ``observedGeneration``. KServe's storage initializer (a pod webhook
that downloads the model) and its ``Knative`` (Serverless) and ``ModelMesh`` modes are not simulated.
"""

from __future__ import annotations

import copy
from typing import Any

from .. import timestamps
from ..conditions import find, set_condition
from ..errors import ApiError
from ..objects import Obj
from ..objects import meta as _meta
from .apps import DEPLOYMENTS
from .client import Resource
from .informer import Informer
from .thirdparty import CrdGatedController

Key = tuple[str, str]
GROUP = "serving.kserve.io"
INFERENCE_SERVICES = Resource(GROUP, "v1beta1", "inferenceservices")
ISVC_CRD = f"inferenceservices.{GROUP}"
ISVC_LABEL = f"{GROUP}/inferenceservice"
COMPONENT_LABEL = "component"
APP_LABEL = "app"
CONTAINER_NAME = "kserve-container"
INGRESS_DOMAIN = "example.com"  # KServe's default ingressDomain
#: The model server image of each model format (KServe's ClusterServingRuntimes, simplified).
RUNTIME_IMAGES = {
    "sklearn": "kserve/sklearnserver",
    "xgboost": "kserve/xgbserver",
    "lightgbm": "kserve/lgbserver",
    "pmml": "kserve/pmmlserver",
    "huggingface": "kserve/huggingfaceserver",
    "pytorch": "pytorch/torchserve-kfs",
    "tensorflow": "tensorflow/serving",
    "onnx": "nvcr.io/nvidia/tritonserver",
    "triton": "nvcr.io/nvidia/tritonserver",
}
#: Keys of a predictor that are KServe's, not the pod spec's (ComponentExtensionSpec, the frameworks).
PREDICTOR_KEYS = frozenset(
    {
        "minReplicas",
        "maxReplicas",
        "scaleTarget",
        "scaleMetric",
        "scaleMetricType",
        "autoScaling",
        "containerConcurrency",
        "timeout",
        "canaryTrafficPercent",
        "logger",
        "batcher",
        "labels",
        "annotations",
        "deploymentStrategy",
        "model",
        "workerSpec",
        "storageUris",
        "sklearn",
        "xgboost",
        "tensorflow",
        "pytorch",
        "triton",
        "onnx",
        "huggingface",
        "pmml",
        "lightgbm",
        "paddle",
    }
)


def predictor_name(isvc: Obj) -> str:
    return f"{_meta(isvc)['name']}-predictor"


def predictor_labels(isvc: Obj) -> dict[str, str]:
    """The predictor's labels as KServe merges them: the InferenceService's, then the predictor's."""
    predictor = (isvc.get("spec") or {}).get("predictor") or {}
    return {
        **(_meta(isvc).get("labels") or {}),
        **(predictor.get("labels") or {}),
        ISVC_LABEL: str(_meta(isvc)["name"]),
        COMPONENT_LABEL: "predictor",
    }


def pod_spec(isvc: Obj) -> Obj:
    """The predictor's pod spec: its pod-spec fields, and the model server or its own containers."""
    predictor = (isvc.get("spec") or {}).get("predictor") or {}
    spec = {k: copy.deepcopy(v) for k, v in predictor.items() if k not in PREDICTOR_KEYS}
    model = predictor.get("model")
    if model is not None:
        fmt = str((model.get("modelFormat") or {}).get("name") or "")
        container: dict[str, Any] = {
            k: copy.deepcopy(v)
            for k, v in model.items()
            if k not in ("modelFormat", "runtime", "storageUri", "protocolVersion", "storage")
        }
        container["name"] = CONTAINER_NAME
        container.setdefault("image", f"{RUNTIME_IMAGES.get(fmt, 'kserve/' + fmt + 'server')}:latest")
        container.setdefault("args", [f"--model_name={_meta(isvc)['name']}", "--model_dir=/mnt/models"])
        spec["containers"] = [container, *(spec.get("containers") or [])]
    elif spec.get("containers"):
        containers = spec["containers"]
        containers[0].setdefault("name", CONTAINER_NAME)
    return spec


def desired_deployment(isvc: Obj) -> Obj:
    meta = _meta(isvc)
    name = predictor_name(isvc)
    predictor = (isvc.get("spec") or {}).get("predictor") or {}
    labels = predictor_labels(isvc)
    annotations = {
        k: v
        for k, v in {**(meta.get("annotations") or {}), **(predictor.get("annotations") or {})}.items()
        if k != "kubectl.kubernetes.io/last-applied-configuration"
    }
    min_replicas = predictor.get("minReplicas")
    selector = {APP_LABEL: f"isvc.{name}"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": INFERENCE_SERVICES.api_version,
                    "kind": "InferenceService",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "replicas": 1 if min_replicas is None else int(min_replicas),
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": {**labels, **selector}, "annotations": dict(annotations)},
                "spec": pod_spec(isvc),
            },
        },
    }


def derivative(desired: Any, existing: Any) -> bool:
    """apimachinery's ``DeepDerivative``: every field ``desired`` sets has that value in ``existing``."""
    if isinstance(desired, dict):
        return isinstance(existing, dict) and all(derivative(v, existing.get(k)) for k, v in desired.items())
    if isinstance(desired, list):
        return (
            isinstance(existing, list)
            and len(desired) == len(existing)
            and all(derivative(d, e) for d, e in zip(desired, existing, strict=True))
        )
    return bool(desired == existing)


def merged(desired: Any, existing: Any) -> Any:
    """``existing`` with everything ``desired`` sets (dicts merged, the rest replaced)."""
    if isinstance(desired, dict) and isinstance(existing, dict):
        return {**existing, **{k: merged(v, existing.get(k)) for k, v in desired.items()}}
    return copy.deepcopy(desired)


class InferenceServiceController(CrdGatedController):
    name = "inferenceservice-controller"
    crds = (ISVC_CRD,)

    def serve(self) -> list[Informer]:
        return [
            self.watch(INFERENCE_SERVICES, self.enqueue),
            self.watch(DEPLOYMENTS, self.owned_by("InferenceService")),
        ]

    async def reconcile(self, key: Key) -> None:
        isvc = self.live(key)
        if isvc is None:
            return
        deployments = self.served[1]
        want = desired_deployment(isvc)
        deployment = deployments.get(key[0], predictor_name(isvc))
        if deployment is None:
            try:
                deployment = await self.api.create(DEPLOYMENTS, key[0], want)
            except ApiError as exc:
                if exc.code != 409:
                    self.queue.add_after(key, 0.5)  # refused (a webhook, a quota): again later
                    return
                return
        elif not derivative(want["spec"], deployment.get("spec")) or not derivative(
            want["metadata"]["labels"], _meta(deployment).get("labels")
        ):
            update = {
                **deployment,
                "metadata": {
                    **_meta(deployment),
                    "labels": {**(_meta(deployment).get("labels") or {}), **want["metadata"]["labels"]},
                },
                "spec": merged(want["spec"], deployment.get("spec") or {}),
            }
            try:
                deployment = await self.api.replace(DEPLOYMENTS, update)
            except ApiError as exc:
                if exc.code not in (404, 409):
                    raise
                return
        await self._write_status(isvc, deployment)

    async def _write_status(self, isvc: Obj, deployment: Obj) -> None:
        meta = _meta(isvc)
        name, namespace = str(meta["name"]), str(meta.get("namespace", ""))
        available = find(deployment.get("status") or {}, "Available")
        ready = available is not None and available.get("status") == "True"
        reason = str((available or {}).get("reason") or "MinimumReplicasUnavailable")
        message = str((available or {}).get("message") or "Deployment does not have minimum availability.")
        status = copy.deepcopy(isvc.get("status") or {})
        now = timestamps.now()
        value = "True" if ready else "False"
        set_condition(status, "PredictorReady", value, "" if ready else reason, "" if ready else message, now)
        set_condition(status, "IngressReady", "True", "", "", now)
        set_condition(status, "Ready", value, "" if ready else reason, "" if ready else message, now)
        predictor_url = f"http://{predictor_name(isvc)}.{namespace}.svc.cluster.local"
        status.update(
            url=f"http://{name}-{namespace}.{INGRESS_DOMAIN}",
            address={"url": f"http://{name}.{namespace}.svc.cluster.local"},
            components={"predictor": {"url": predictor_url}},
            observedGeneration=meta.get("generation", 1),
        )
        await self.write_status(INFERENCE_SERVICES, isvc, status)
