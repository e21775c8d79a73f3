"""The ``jobset.x-k8s.io/v1alpha2`` JobSet integration (Kueue's ``pkg/controller/jobs/jobset``).

One pod set per replicated job, named after it, counting ``replicas * min(parallelism,
completions)`` pods. The JobSet controller creates the child Jobs from the templates kadmit
injected into; the child Jobs are not managed on their own (their owner is).
"""

from __future__ import annotations

from kadmit.controller.jobs.integration import (
    Finished,
    JobIntegration,
    finished_by_condition,
    workload_template,
)
from kadmit.kube import Obj
from kadmit.kube.resources import JOBSETS
from kadmit.webhook.jobsets import replicated_job_pods  # the one count, also the webhook's TAS check


def _replicas(replicated_job: Obj) -> int:
    replicas = replicated_job.get("replicas")
    return 1 if replicas is None else int(replicas)


class JobSetIntegration(JobIntegration):
    framework = "jobset.x-k8s.io/jobset"
    resource = JOBSETS
    group = "jobset.x-k8s.io"
    kind = "JobSet"

    def _replicated_jobs(self, jobset: Obj) -> list[Obj]:
        return list((jobset.get("spec") or {}).get("replicatedJobs") or [])

    def templates(self, jobset: Obj) -> dict[str, Obj]:
        result: dict[str, Obj] = {}
        for rj in jobset.setdefault("spec", {}).get("replicatedJobs") or []:
            job_spec = rj.setdefault("template", {}).setdefault("spec", {})
            result[rj["name"]] = job_spec.setdefault("template", {})
        return result

    def pod_sets(self, jobset: Obj) -> list[Obj]:
        pod_sets: list[Obj] = []
        for rj in self._replicated_jobs(jobset):
            template = ((rj.get("template") or {}).get("spec") or {}).get("template") or {}
            pod_sets.append({"name": rj["name"], "count": replicated_job_pods(rj),
                             "template": workload_template(template)})
        return pod_sets

    def is_active(self, jobset: Obj) -> bool:
        return any(int(s.get("active") or 0) > 0
                   for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or [])

    def finished(self, jobset: Obj) -> Finished | None:
        return finished_by_condition(
            jobset, ("Completed", "jobset completed successfully"), ("Failed", "jobset failed")
        )

    def pods_ready(self, jobset: Obj) -> bool:
        statuses = {s.get("name"): s for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or []}
        for rj in self._replicated_jobs(jobset):
            status = statuses.get(rj["name"])
            if status is None:
                return False
            if int(status.get("ready") or 0) + int(status.get("succeeded") or 0) < _replicas(rj):
                return False
        return True
