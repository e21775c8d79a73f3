"""How kadmit names a kind of object: the one :class:`Resource`, and the ones kadmit talks to."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote


@dataclass(frozen=True, slots=True)
class Resource:
    """A kind of object as the API's URLs name it: group (``""`` for core), version and plural.

    ``kind`` (the objects' ``kind``) and ``namespaced`` describe it further but are not part of
    its identity: ``Resource("batch", "v1", "jobs")`` and ``JOBS`` are the same key.
    """

    group: str
    version: str
    plural: str
    kind: str = field(default="", compare=False)
    namespaced: bool = field(default=True, compare=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
        """The URL path of the collection (in ``namespace``, or everywhere when None), of one
        object, or of one of its subresources. A cluster-scoped kind ignores ``namespace``."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None and self.namespaced:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base

    def __str__(self) -> str:
        return f"{self.plural}.{self.group or 'core'}/{self.version}"


KUEUE = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"


def _kueue(plural: str, kind: str, namespaced: bool = False) -> Resource:
    return Resource(KUEUE, KUEUE_VERSION, plural, kind, namespaced)


# Kubernetes' own kinds.
PODS = Resource("", "v1", "pods", "Pod")
POD_TEMPLATES = Resource("", "v1", "podtemplates", "PodTemplate")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
EVENTS = Resource("", "v1", "events", "Event")
SECRETS = Resource("", "v1", "secrets", "Secret")
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
SERVICES = Resource("", "v1", "services", "Service")
ENDPOINTS = Resource("", "v1", "endpoints", "Endpoints")
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")
LIMIT_RANGES = Resource("", "v1", "limitranges", "LimitRange")
RUNTIME_CLASSES = Resource("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", namespaced=False)
JOBS = Resource("batch", "v1", "jobs", "Job")
RBAC_GROUP = "rbac.authorization.k8s.io"
ROLES = Resource(RBAC_GROUP, "v1", "roles", "Role")
ROLE_BINDINGS = Resource(RBAC_GROUP, "v1", "rolebindings", "RoleBinding")
CLUSTER_ROLES = Resource(RBAC_GROUP, "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_ROLE_BINDINGS = Resource(RBAC_GROUP, "v1", "clusterrolebindings", "ClusterRoleBinding",
                                 namespaced=False)
TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False)
SUBJECT_ACCESS_REVIEWS = Resource("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview",
                                  namespaced=False)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
REPLICA_SETS = Resource("apps", "v1", "replicasets", "ReplicaSet")
STATEFUL_SETS = Resource("apps", "v1", "statefulsets", "StatefulSet")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
CUSTOM_RESOURCE_DEFINITIONS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                                       "CustomResourceDefinition", namespaced=False)
MUTATING_WEBHOOK_CONFIGURATIONS = Resource("admissionregistration.k8s.io", "v1",
                                           "mutatingwebhookconfigurations",
                                           "MutatingWebhookConfiguration", namespaced=False)
VALIDATING_WEBHOOK_CONFIGURATIONS = Resource("admissionregistration.k8s.io", "v1",
                                             "validatingwebhookconfigurations",
                                             "ValidatingWebhookConfiguration", namespaced=False)

# Kueue's kinds (the version kadmit reads and writes; v1beta1 is served through conversion).
WORKLOADS = _kueue("workloads", "Workload", namespaced=True)
LOCAL_QUEUES = _kueue("localqueues", "LocalQueue", namespaced=True)
CLUSTER_QUEUES = _kueue("clusterqueues", "ClusterQueue")
RESOURCE_FLAVORS = _kueue("resourceflavors", "ResourceFlavor")
COHORTS = _kueue("cohorts", "Cohort")
ADMISSION_CHECKS = _kueue("admissionchecks", "AdmissionCheck")
WORKLOAD_PRIORITY_CLASSES = _kueue("workloadpriorityclasses", "WorkloadPriorityClass")
PROVISIONING_REQUEST_CONFIGS = _kueue("provisioningrequestconfigs", "ProvisioningRequestConfig")
MULTIKUEUE_CLUSTERS = _kueue("multikueueclusters", "MultiKueueCluster")
MULTIKUEUE_CONFIGS = _kueue("multikueueconfigs", "MultiKueueConfig")

# The kinds of the other projects kadmit integrates with.
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
LEADER_WORKER_SETS = Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet")
# Kubeflow Training Operator v1 (kubeflow.org/v1) and the MPI Operator's MPIJob (kubeflow.org/v2beta1).
PYTORCH_JOBS = Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")
TF_JOBS = Resource("kubeflow.org", "v1", "tfjobs", "TFJob")
XGBOOST_JOBS = Resource("kubeflow.org", "v1", "xgboostjobs", "XGBoostJob")
PADDLE_JOBS = Resource("kubeflow.org", "v1", "paddlejobs", "PaddleJob")
JAX_JOBS = Resource("kubeflow.org", "v1", "jaxjobs", "JAXJob")
MPI_JOBS = Resource("kubeflow.org", "v2beta1", "mpijobs", "MPIJob")
# Kubeflow Trainer v2: TrainJob and the runtimes it references.
TRAIN_JOBS = Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob")
TRAINING_RUNTIMES = Resource("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime")
CLUSTER_TRAINING_RUNTIMES = Resource(
    "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime", namespaced=False
)
RAY_JOBS = Resource("ray.io", "v1", "rayjobs", "RayJob")
RAY_CLUSTERS = Resource("ray.io", "v1", "rayclusters", "RayCluster")
APPWRAPPERS = Resource("workload.codeflare.dev", "v1beta2", "appwrappers", "AppWrapper")
PROVISIONING_REQUESTS = Resource("autoscaling.x-k8s.io", "v1", "provisioningrequests", "ProvisioningRequest")
