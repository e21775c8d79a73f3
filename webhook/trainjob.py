"""The Kubeflow Trainer v2 ``trainer.kubeflow.org/v1alpha1`` TrainJob webhooks (Kueue's
``pkg/controller/jobs/trainjob`` webhook).

Mutating (``/mutate-trainer-kubeflow-org-v1alpha1-trainjob``, CREATE) and validating
(``/validate-trainer-kubeflow-org-v1alpha1-trainjob``, CREATE and UPDATE) do what the Job
webhooks do (``spec.suspend``, ``spec.managedBy``), and the mutating one also gives the TrainJob
the runtime patch Kueue owns (manager ``kueue.x-k8s.io/manager``), where the admitted pod-set
info is written on start. Validation is Kueue's shared job validation.

When the TrainJob integration is not enabled they allow everything unchanged.
"""

from __future__ import annotations

from kadmit.webhook.jobs import (
    JobWebhooks,
)
from kadmit.webhook.objects import mapping as _m
from kadmit.workload import KUEUE_MANAGER, Obj

GROUP = "trainer.kubeflow.org"
TRAINJOB_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"


def kueue_runtime_patch() -> Obj:
    """The empty runtime patch Kueue's webhook adds, filled on start and emptied on stop."""
    return {"manager": KUEUE_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}}


class TrainJobWebhooks(JobWebhooks):
    gvk = (GROUP, "v1alpha1", "TrainJob")
    default_managed_by = TRAINJOB_CONTROLLER

    async def default(self, job: Obj, namespace: str) -> Obj:
        job = await super().default(job, namespace)
        patches = _m(job.get("spec")).get("runtimePatches")
        patches = list(patches) if isinstance(patches, list) else []
        if not any(_m(p).get("manager") == KUEUE_MANAGER for p in patches):
            job["spec"] = {**_m(job.get("spec")), "runtimePatches": [*patches, kueue_runtime_patch()]}
        return job
