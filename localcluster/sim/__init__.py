"""The simulated cluster behind the embedded API server: Nodes, a binder, kubelets, the Job,
JobSet, Deployment, ReplicaSet, StatefulSet, LeaderWorkerSet, InferenceService (KServe) and
PipelineRun (Tekton) controllers, the Kubeflow operators (Training Operator v1 kinds and MPIJob),
the Kubeflow Trainer (TrainJob), KubeRay (RayCluster, RayJob) and AppWrapper controllers and a
cluster-autoscaler stand-in,
each an add-on that talks to the server over HTTP only, as the real controllers do.
"""

from __future__ import annotations

from ..interfaces import ClusterAddon
from .apps import DeploymentController, ReplicaSetController, StatefulSetController
from .appwrappers import AppWrapperController
from .autoscaler import DEFAULT_BOOKING_EXPIRY_SECONDS, Autoscaler
from .inferenceservices import InferenceServiceController
from .jobs import JobController
from .jobsets import JobSetController
from .kubeflow import KubeflowController
from .kubelet import EXIT_CODE_ANNOTATION, RUNTIME_ANNOTATION, Kubelet
from .leaderworkersets import LeaderWorkerSetController
from .nodeconfig import NodeConfig, NodeConfigError, NodePool, default_config, load_config
from .nodes import NodeRegistrar
from .pipelineruns import PipelineRunController
from .ray import RayClusterController, RayJobController
from .scheduler import Scheduler
from .trainjobs import TrainJobController

__all__ = [
    "EXIT_CODE_ANNOTATION",
    "RUNTIME_ANNOTATION",
    "AppWrapperController",
    "Autoscaler",
    "DeploymentController",
    "InferenceServiceController",
    "JobController",
    "JobSetController",
    "KubeflowController",
    "Kubelet",
    "LeaderWorkerSetController",
    "NodeConfig",
    "NodeConfigError",
    "NodePool",
    "NodeRegistrar",
    "PipelineRunController",
    "RayClusterController",
    "RayJobController",
    "ReplicaSetController",
    "Scheduler",
    "StatefulSetController",
    "TrainJobController",
    "default_addons",
    "default_config",
    "load_config",
]


def default_addons(
    config: NodeConfig | None = None,
    *,
    booking_expiry: float = DEFAULT_BOOKING_EXPIRY_SECONDS,
    seed: int | None = None,
) -> list[ClusterAddon]:
    """Everything a small real cluster runs, in start order: Nodes first, then the controllers."""
    config = config or default_config()
    return [
        NodeRegistrar(config),
        Scheduler(),
        Kubelet(config.default_runtime),
        JobController(seed=seed),
        JobSetController(),
        DeploymentController(),
        ReplicaSetController(seed=seed),
        StatefulSetController(),
        LeaderWorkerSetController(),
        InferenceServiceController(),
        PipelineRunController(),
        KubeflowController(),
        TrainJobController(),
        RayClusterController(seed=seed),
        RayJobController(seed=seed),
        AppWrapperController(),
        Autoscaler(config, booking_expiry=booking_expiry),
    ]
