"""The ``jobset.x-k8s.io/v1alpha2`` JobSet webhooks (Kueue's ``pkg/controller/jobs/jobset`` webhook).

Mutating (``/mutate-jobset-x-k8s-io-v1alpha2-jobset``, CREATE) and validating
(``/validate-jobset-x-k8s-io-v1alpha2-jobset``, CREATE and UPDATE) do what the Job webhooks do
for every job kind: default the LocalQueue and priority class, suspend a managed JobSet, hand
MultiKueue JobSets to MultiKueue, check the queue and priority-class labels, and keep anyone but
kadmit from starting a JobSet whose Workload is not admitted. What differs is the kind's own
validation: TAS annotations per replicated job, no Job-only annotations.

When the JobSet integration is not enabled they allow everything unchanged (Kueue's no-op
webhooks), so registering them never blocks a cluster's JobSets.
"""

from __future__ import annotations

from typing import Any

from kadmit.webhook.fielderrors import ROOT, FieldError
from kadmit.webhook.jobs import (
    JobWebhooks,
    validate_managed_create,
)
from kadmit.webhook.objects import mapping as _m
from kadmit.webhook.tas import validate_tas_annotations
from kadmit.workload import Obj

JOBSET_CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"
REPLICATED_JOBS = ROOT.child("spec", "replicatedJobs")


def _count(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def replicated_job_pods(replicated_job: Obj) -> int:
    """Pods of one replicated job: ``replicas * min(parallelism, completions)``, as its pod set counts."""
    job_spec = _m(_m(replicated_job.get("template")).get("spec"))
    parallelism = _count(job_spec.get("parallelism"), 1)
    completions = job_spec.get("completions")
    per_job = parallelism if completions is None else min(parallelism, _count(completions, parallelism))
    return _count(replicated_job.get("replicas"), 1) * per_job


def validate_jobset_create(jobset: Obj) -> list[FieldError]:
    """Kueue's create rules for a JobSet (re-checked on update): the shared ones, then TAS per pod set."""
    errors = validate_managed_create(jobset)
    replicated = _m(jobset.get("spec")).get("replicatedJobs")
    for i, rj in enumerate(replicated if isinstance(replicated, list) else []):
        if not isinstance(rj, dict):
            continue
        meta = _m(_m(_m(_m(rj.get("template")).get("spec")).get("template")).get("metadata"))
        annotations = {str(k): str(v) for k, v in _m(meta.get("annotations")).items()}
        path = REPLICATED_JOBS.index(i).child("template", "spec", "template", "metadata")
        errors += validate_tas_annotations(annotations, path, replicated_job_pods(rj))
    return errors


class JobSetWebhooks(JobWebhooks):
    """The JobSet handlers: Kueue's jobframework defaulting and guard, with JobSet's validation."""

    gvk = ("jobset.x-k8s.io", "v1alpha2", "JobSet")
    default_managed_by = JOBSET_CONTROLLER

    def create_errors(self, job: Obj) -> list[FieldError]:
        return validate_jobset_create(job)
