"""The ``batch/v1`` Job integration (Kueue's ``pkg/controller/jobs/job``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kadmit.controller.jobs.integration import (
    Finished,
    JobIntegration,
    finished_by_condition,
    workload_template,
)
from kadmit.controller.jobs.podtemplate import PodSetInfo
from kadmit.kube import Obj
from kadmit.kube.resources import JOBS

MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-completions-equal-parallelism"


def _annotations(job: Obj) -> dict[str, str]:
    return job.get("metadata", {}).get("annotations") or {}


def pods_count(job: Obj) -> int:
    """min(parallelism, completions); parallelism alone when completions is unset."""
    spec = job.get("spec", {})
    parallelism = int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
    completions = spec.get("completions")
    return parallelism if completions is None else min(parallelism, int(completions))


class BatchJobIntegration(JobIntegration):
    framework = "batch/job"
    resource = JOBS
    group = "batch"
    kind = "Job"

    def templates(self, job: Obj) -> dict[str, Obj]:
        return {"main": job.setdefault("spec", {}).setdefault("template", {})}

    def pod_sets(self, job: Obj) -> list[Obj]:
        pod_set: Obj = {"name": "main", "count": pods_count(job),
                        "template": workload_template(job.get("spec", {}).get("template") or {})}
        min_count = _annotations(job).get(MIN_PARALLELISM_ANNOTATION)
        if min_count is not None and min_count.isdigit():
            pod_set["minCount"] = int(min_count)
        return [pod_set]

    def is_active(self, job: Obj) -> bool:
        return int((job.get("status") or {}).get("active") or 0) > 0

    def finished(self, job: Obj) -> Finished | None:
        return finished_by_condition(job, ("Complete", "Job finished successfully"), ("Failed", "Job failed"))

    def pods_ready(self, job: Obj) -> bool:
        status = job.get("status") or {}
        uncounted = len(((status.get("uncountedTerminatedPods") or {}).get("succeeded")) or [])
        ready = int(status.get("succeeded") or 0) + int(status.get("ready") or 0) + uncounted
        return ready >= pods_count(job)

    def reclaimable_pods(self, job: Obj) -> list[Obj]:
        spec = job.get("spec") or {}
        status = job.get("status") or {}
        parallelism = int(spec.get("parallelism") or 1)
        completions = parallelism if spec.get("completions") is None else int(spec["completions"])
        if parallelism <= 1:
            return []
        if spec.get("completionMode") == "Indexed":
            indexes = _index_set(status.get("completedIndexes")) | _index_set(status.get("failedIndexes"))
            terminal = min(len(indexes), completions)
        else:
            terminal = int(status.get("succeeded") or 0)
        if terminal <= 0:
            return []
        remaining = max(completions - terminal, 0)
        if remaining < parallelism:
            return [{"name": "main", "count": parallelism - remaining}]
        return []

    def apply_counts(self, job: Obj, infos: Sequence[PodSetInfo]) -> None:
        if MIN_PARALLELISM_ANNOTATION not in _annotations(job) or not infos:
            return
        spec = job.setdefault("spec", {})
        spec["parallelism"] = infos[0].count
        if _annotations(job).get(COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION) == "true":
            spec["completions"] = infos[0].count

    def restore_counts(self, job: Obj, pod_sets: Sequence[Obj]) -> None:
        if MIN_PARALLELISM_ANNOTATION not in _annotations(job) or not pod_sets:
            return
        spec = job.setdefault("spec", {})
        count = int(pod_sets[0].get("count", 1))
        spec["parallelism"] = count
        if _annotations(job).get(COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION) == "true":
            spec["completions"] = count

    def status_after_stop(self, job: Obj) -> Obj | None:
        # A started Job's template may only change once its startTime is cleared.
        if (job.get("status") or {}).get("startTime"):
            return {"status": {"startTime": None}}
        return None


def _index_set(text: Any) -> set[int]:
    """Parse the Job status' index intervals ("1,3-5") into a set."""
    result: set[int] = set()
    for part in str(text or "").split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            low, high = part.split("-", 1)
            result.update(range(int(low), int(high) + 1))
        else:
            result.add(int(part))
    return result
