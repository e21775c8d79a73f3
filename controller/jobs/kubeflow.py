"""The Kubeflow jobs: the Training Operator's ``kubeflow.org/v1`` PyTorchJob, TFJob, XGBoostJob,
PaddleJob and JAXJob, and the MPI Operator's ``kubeflow.org/v2beta1`` MPIJob (Kueue's
``pkg/controller/jobs/kubeflow`` and ``pkg/controller/jobs/mpijob``).

They share one shape, so they share this one integration: a map of replica specs (under a field
named per kind, ``pytorchReplicaSpecs``...) from replica type (``Master``, ``Worker``...) to
``{replicas, template}``; ``spec.runPolicy`` with ``suspend``, ``managedBy`` and
``schedulingPolicy.priorityClass``; and a status of ``conditions`` (``Created``, ``Running``,
``Succeeded``, ``Failed``, ``Suspended``) and ``replicaStatuses`` per replica type. A kind is a
row of :data:`kadmit.webhook.kubeflow.KUBEFLOW_KINDS`: its replica-spec field, its replica types
in Kueue's order, its operator.

One pod set per replica type present, in the kind's order, named after the type in lower case
(``master``, ``worker``), counting ``replicas`` (1 when unset). Finished when the operator says
``Succeeded`` or ``Failed``; pods ready once it says ``Running``; active while a replica type
counts active pods.
"""

from __future__ import annotations

from kadmit.controller.jobs.integration import (
    Finished,
    JobIntegration,
    finished_by_condition,
    workload_template,
)
from kadmit.kube import Obj, Resource
from kadmit.kube.resources import JAX_JOBS, MPI_JOBS, PADDLE_JOBS, PYTORCH_JOBS, TF_JOBS, XGBOOST_JOBS
from kadmit.webhook.kubeflow import GROUP, KubeflowKind, replica_count, replica_specs

RESOURCES: dict[str, Resource] = {
    r.kind: r for r in (PYTORCH_JOBS, TF_JOBS, XGBOOST_JOBS, PADDLE_JOBS, JAX_JOBS, MPI_JOBS)
}


def pod_set_name(replica_type: str) -> str:
    """Kueue's ``NewPodSetReference``: the replica type in lower case."""
    return replica_type.lower()


class KubeflowIntegration(JobIntegration):
    """One Kubeflow kind through the one interface (Kueue's ``KubeflowJob`` and ``MPIJob``)."""

    run_policy = ("spec", "runPolicy")

    def __init__(self, kind: KubeflowKind) -> None:
        self.spec = kind
        self.framework = kind.framework
        self.resource = RESOURCES[kind.kind]
        self.group = GROUP
        self.kind = kind.kind

    def templates(self, job: Obj) -> dict[str, Obj]:
        specs = job.setdefault("spec", {}).setdefault(self.spec.replica_specs_field, {})
        return {
            pod_set_name(t): specs[t].setdefault("template", {})
            for t in self.spec.replica_types
            if isinstance(specs.get(t), dict)
        }

    def pod_sets(self, job: Obj) -> list[Obj]:
        return [
            {
                "name": pod_set_name(replica_type),
                "count": replica_count(spec),
                "template": workload_template(spec.get("template") or {}),
            }
            for replica_type, spec in replica_specs(self.spec, job).items()
        ]

    def is_active(self, job: Obj) -> bool:
        statuses = (job.get("status") or {}).get("replicaStatuses") or {}
        return any(int((s or {}).get("active") or 0) != 0 for s in statuses.values())

    def finished(self, job: Obj) -> Finished | None:
        return finished_by_condition(job, ("Succeeded", ""), ("Failed", ""))

    def pods_ready(self, job: Obj) -> bool:
        return any(
            c.get("type") == "Running" and c.get("status") == "True"
            for c in (job.get("status") or {}).get("conditions") or []
        )

    def priority_class(self, job: Obj) -> str | None:
        """Kueue's ``PriorityClass``: ``runPolicy.schedulingPolicy.priorityClass``, else the first
        replica type (in the kind's order) whose template names one."""
        policy = ((job.get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy") or {}
        if policy.get("priorityClass"):
            return str(policy["priorityClass"])
        for spec in replica_specs(self.spec, job).values():
            name = ((spec.get("template") or {}).get("spec") or {}).get("priorityClassName")
            if name:
                return str(name)
        return ""
