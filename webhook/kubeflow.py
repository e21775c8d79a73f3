"""The Kubeflow jobs' webhooks (Kueue's ``BaseWebhook`` for the Training Operator kinds and its
``MpiJobWebhook``), and the table of the Kubeflow kinds that the integration shares.

PyTorchJob, TFJob, XGBoostJob, PaddleJob and JAXJob (``kubeflow.org/v1``) and MPIJob
(``kubeflow.org/v2beta1``) are one shape: replica specs under a per-kind field, and
``spec.runPolicy`` holding ``suspend`` and ``managedBy``. Their webhooks are the Job's
jobframework defaulting and guard on ``spec.runPolicy`` (``/mutate-kubeflow-org-v1-pytorchjob``
on CREATE, ``/validate-kubeflow-org-v1-pytorchjob`` on CREATE and UPDATE, and so on), with
Kueue's shared job validation plus the TAS annotations of each replica type's template.

When a kind's integration is not enabled its webhooks allow everything unchanged (Kueue's no-op
webhooks), so registering them never blocks a cluster's Kubeflow jobs.
"""

from __future__ import annotations

from dataclasses import dataclass

from kadmit.webhook.fielderrors import ROOT, FieldError
from kadmit.webhook.jobs import (
    ClusterView,
    JobWebhookConfig,
    JobWebhooks,
    validate_managed_create,
)
from kadmit.webhook.objects import mapping as _m
from kadmit.webhook.review import Webhook
from kadmit.webhook.tas import validate_tas_annotations
from kadmit.workload import Obj

GROUP = "kubeflow.org"
#: ``runPolicy.managedBy`` of the kinds' own controllers: the Training Operator, the MPI Operator.
TRAINING_OPERATOR = "kubeflow.org/training-operator"
MPI_OPERATOR = "kubeflow.org/mpi-operator"


@dataclass(frozen=True)
class KubeflowKind:
    """What tells one Kubeflow kind from another."""

    kind: str  # "PyTorchJob"
    version: str  # "v1"
    replica_specs_field: str  # "pytorchReplicaSpecs"
    replica_types: tuple[str, ...]  # Kueue's OrderedReplicaTypes
    operator_name: str  # the training.kubeflow.org/operator-name label of its pods
    managed_by: str  # runPolicy.managedBy of the kind's own controller

    @property
    def framework(self) -> str:
        """The name in ``integrations.frameworks``: ``kubeflow.org/pytorchjob``."""
        return f"{GROUP}/{self.kind.lower()}"

    @property
    def plural(self) -> str:
        return f"{self.kind.lower()}s"


PYTORCH_JOB = KubeflowKind(
    "PyTorchJob",
    "v1",
    "pytorchReplicaSpecs",
    ("Master", "Worker"),
    "pytorchjob-controller",
    TRAINING_OPERATOR,
)
TF_JOB = KubeflowKind(
    "TFJob",
    "v1",
    "tfReplicaSpecs",
    ("Chief", "Master", "PS", "Worker", "Evaluator"),
    "tfjob-controller",
    TRAINING_OPERATOR,
)
XGBOOST_JOB = KubeflowKind(
    "XGBoostJob", "v1", "xgbReplicaSpecs", ("Master", "Worker"), "xgboostjob-controller", TRAINING_OPERATOR
)
PADDLE_JOB = KubeflowKind(
    "PaddleJob", "v1", "paddleReplicaSpecs", ("Master", "Worker"), "paddlejob-controller", TRAINING_OPERATOR
)
JAX_JOB = KubeflowKind("JAXJob", "v1", "jaxReplicaSpecs", ("Worker",), "jaxjob-controller", TRAINING_OPERATOR)
MPI_JOB = KubeflowKind(
    "MPIJob", "v2beta1", "mpiReplicaSpecs", ("Launcher", "Worker"), "mpi-operator", MPI_OPERATOR
)

TRAINING_OPERATOR_KINDS = (PYTORCH_JOB, TF_JOB, XGBOOST_JOB, PADDLE_JOB, JAX_JOB)
KUBEFLOW_KINDS = (*TRAINING_OPERATOR_KINDS, MPI_JOB)
BY_FRAMEWORK = {k.framework: k for k in KUBEFLOW_KINDS}


def replica_count(replica_spec: Obj) -> int:
    """``replicas``, 1 when unset (Kueue's ``podsCount``)."""
    replicas = replica_spec.get("replicas")
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1


def replica_specs(kind: KubeflowKind, job: Obj) -> dict[str, Obj]:
    """Replica type → its spec, for the types the job has, in Kueue's order."""
    specs = _m(_m(job.get("spec")).get(kind.replica_specs_field))
    return {t: specs[t] for t in kind.replica_types if isinstance(specs.get(t), dict)}


def validate_kubeflow_create(kind: KubeflowKind, job: Obj) -> list[FieldError]:
    """Kueue's create rules (re-checked on update): the shared ones, then TAS per replica type."""
    errors = validate_managed_create(job)
    specs_path = ROOT.child("spec", kind.replica_specs_field)
    for replica_type, spec in replica_specs(kind, job).items():
        meta = _m(_m(spec.get("template")).get("metadata"))
        annotations = {str(k): str(v) for k, v in _m(meta.get("annotations")).items()}
        path = specs_path.key(replica_type).child("template", "metadata")
        errors += validate_tas_annotations(annotations, path, replica_count(spec))
    return errors


class KubeflowWebhooks(JobWebhooks):
    """One Kubeflow kind's handlers: Kueue's jobframework defaulting and guard on ``spec.runPolicy``."""

    run_policy = ("spec", "runPolicy")

    def __init__(self, kind: KubeflowKind, view: ClusterView, config: JobWebhookConfig | None = None) -> None:
        self.gvk = (GROUP, kind.version, kind.kind)
        super().__init__(view, config)
        self.spec = kind
        self.default_managed_by = kind.managed_by

    def create_errors(self, job: Obj) -> list[FieldError]:
        return validate_kubeflow_create(self.spec, job)

    def field_errors(self, job: Obj, old: Obj | None, default_queue_exists: bool) -> list[FieldError]:
        errors = super().field_errors(job, old, default_queue_exists)
        if self.spec.kind == "MPIJob":
            errors.sort(key=lambda e: str(e.field))  # Kueue's MpiJobWebhook sorts them by field
        return errors


def kubeflow_webhooks(view: ClusterView, config: JobWebhookConfig | None = None) -> list[Webhook]:
    """The mutating and validating webhooks of every Kubeflow kind."""
    return [hook for kind in KUBEFLOW_KINDS for hook in KubeflowWebhooks(kind, view, config).webhooks()]
