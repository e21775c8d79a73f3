"""The Tekton PipelineRun controller (``tekton.dev/v1``): a pipeline's tasks run as Pods, each
once the tasks it runs after have succeeded.

Upstream's contract, the parts a queueing controller depends on (``pkg/reconciler/pipelinerun``
and ``pkg/pod`` in tektoncd/pipeline): the pipeline is the PipelineRun's ``pipelineSpec`` or the
Pipeline its ``pipelineRef`` names; each pipeline task, its ``taskSpec`` or the Task its
``taskRef`` names, runs as the TaskRun ``<pipelinerun>-<task>`` whose Pod is ``<taskrun>-pod``
(``<taskrun>-pod-retry<n>`` for retry *n* of a task with ``retries``), one container
``step-<step>`` per step (its ``image``, ``command``, ``args``, ``script``, ``env`` and
``computeResources``), ``restartPolicy: Never``. The Pod carries the PipelineRun's labels and
annotations (so a ``kueue.x-k8s.io/queue-name`` label on the PipelineRun puts every task Pod in
that queue), ``tekton.dev/pipelineRun``, ``pipelineRunUID``, ``pipeline``, ``pipelineTask``,
``taskRun``, ``task`` (with a ``taskRef``) and ``app.kubernetes.io/managed-by:
tekton-pipelines``, and the ``podTemplate`` of ``taskRunTemplate`` or of the task's
``taskRunSpecs`` entry. A task starts once every task in its ``runAfter`` succeeded; tasks
without one between them run at the same time, as in Tekton.

``spec.status: PipelineRunPending`` creates nothing until it is removed (``Succeeded: Unknown,
PipelineRunPending``); ``Cancelled`` deletes the running Pods and fails the run. Status: the
``Succeeded`` condition (``Running``, then ``Succeeded`` or ``Failed``, with Tekton's ``Tasks
Completed: ...`` message), ``startTime``, ``completionTime``, ``childReferences`` and the
resolved ``pipelineSpec``. A Pod that failed, or was deleted before it succeeded (a queueing
controller stopping it), fails its attempt: the task is retried while it has ``retries`` left,
else the run fails. Not simulated: the TaskRun objects themselves (the Pods are owned by the
PipelineRun), ``finally`` tasks, ``when`` expressions, parameters, results, workspaces and
timeouts. Which attempts failed is remembered in memory, as the TaskRuns' ``retriesStatus``
would.
"""

from __future__ import annotations

import copy
from typing import Any

from .. import timestamps
from ..conditions import find, set_condition
from ..errors import ApiError
from ..objects import Obj
from ..objects import meta as _meta
from .client import PODS, Resource, key_of
from .informer import Informer
from .jobs import controller_of
from .thirdparty import CrdGatedController

Key = tuple[str, str]
GROUP = "tekton.dev"
PIPELINE_RUNS = Resource(GROUP, "v1", "pipelineruns")
PIPELINES = Resource(GROUP, "v1", "pipelines")
TASKS = Resource(GROUP, "v1", "tasks")
PIPELINE_RUN_LABEL = f"{GROUP}/pipelineRun"
PIPELINE_RUN_UID_LABEL = f"{GROUP}/pipelineRunUID"
PIPELINE_LABEL = f"{GROUP}/pipeline"
PIPELINE_TASK_LABEL = f"{GROUP}/pipelineTask"
TASK_RUN_LABEL = f"{GROUP}/taskRun"
TASK_LABEL = f"{GROUP}/task"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
PENDING = "PipelineRunPending"
CANCELLED = ("Cancelled", "CancelledRunFinally", "StoppedRunFinally")
#: Pod-spec fields a Tekton PodTemplate may set.
POD_TEMPLATE_FIELDS = (
    "nodeSelector",
    "tolerations",
    "affinity",
    "securityContext",
    "volumes",
    "runtimeClassName",
    "automountServiceAccountToken",
    "dnsPolicy",
    "dnsConfig",
    "enableServiceLinks",
    "priorityClassName",
    "schedulerName",
    "imagePullSecrets",
    "hostAliases",
    "hostNetwork",
    "topologySpreadConstraints",
)


def task_run_name(run: Obj, task: str) -> str:
    return f"{_meta(run)['name']}-{task}"


def pod_name(run: Obj, task: str, attempt: int) -> str:
    """Tekton's ``<taskrun>-pod``, ``<taskrun>-pod-retry<n>`` for retry ``n``."""
    return f"{task_run_name(run, task)}-pod" + (f"-retry{attempt}" if attempt else "")


def attempt_of(run_name: str, task: str, name: str) -> int | None:
    """Which attempt of ``task`` the Pod ``name`` is (None: not one of the task's Pods)."""
    base = f"{run_name}-{task}-pod"
    if name == base:
        return 0
    tail = name[len(base) + len("-retry") :] if name.startswith(f"{base}-retry") else ""
    return int(tail) if tail.isdigit() else None


def containers(task_spec: Obj) -> list[Obj]:
    """One container per step, as Tekton names them, with the task's ``stepTemplate`` under each."""
    template = task_spec.get("stepTemplate") or {}
    out = []
    for index, step in enumerate(task_spec.get("steps") or []):
        merged = {**copy.deepcopy(template), **copy.deepcopy(step)}
        name = str(step.get("name") or f"unnamed-{index}")
        container: dict[str, Any] = {"name": f"step-{name}", "image": merged.get("image", "")}
        for field in ("command", "args", "env", "envFrom", "workingDir", "volumeMounts", "securityContext"):
            if field in merged:
                container[field] = merged[field]
        if merged.get("script"):
            container["args"] = [str(merged["script"])]
        if merged.get("computeResources"):
            container["resources"] = merged["computeResources"]
        out.append(container)
    return out


def task_pod(run: Obj, pipeline: str, task: Obj, task_spec: Obj, attempt: int) -> Obj:
    meta = _meta(run)
    name = str(task["name"])
    spec = run.get("spec") or {}
    pod_template = dict((spec.get("taskRunTemplate") or {}).get("podTemplate") or {})
    for entry in spec.get("taskRunSpecs") or []:
        if entry.get("pipelineTaskName") == name:
            pod_template.update(entry.get("podTemplate") or {})
    labels = {
        **(meta.get("labels") or {}),
        PIPELINE_LABEL: pipeline,
        PIPELINE_RUN_LABEL: str(meta["name"]),
        PIPELINE_RUN_UID_LABEL: str(meta["uid"]),
        PIPELINE_TASK_LABEL: name,
        TASK_RUN_LABEL: task_run_name(run, name),
        MANAGED_BY_LABEL: "tekton-pipelines",
    }
    if (task.get("taskRef") or {}).get("name"):
        labels[TASK_LABEL] = str(task["taskRef"]["name"])
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if k != "kubectl.kubernetes.io/last-applied-configuration"
    }
    pod_spec: dict[str, Any] = {
        k: copy.deepcopy(v) for k, v in pod_template.items() if k in POD_TEMPLATE_FIELDS
    }
    pod_spec.update(restartPolicy="Never", containers=containers(task_spec))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(run, name, attempt),
            "namespace": meta.get("namespace"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": PIPELINE_RUNS.api_version,
                    "kind": "PipelineRun",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": pod_spec,
    }


class PipelineRunController(CrdGatedController):
    name = "pipelinerun-controller"
    crds = (f"pipelineruns.{GROUP}", f"pipelines.{GROUP}", f"tasks.{GROUP}")

    def __init__(self) -> None:
        super().__init__()
        # run uid -> task -> (attempts that failed, attempt succeeded?): the TaskRuns' status
        self._failed: dict[str, dict[str, set[int]]] = {}
        self._succeeded: dict[str, set[str]] = {}
        self._created: dict[str, dict[str, int]] = {}  # run uid -> task -> highest attempt created

    def serve(self) -> list[Informer]:
        return [
            self.watch(PIPELINE_RUNS, self._on_run),
            self.watch(PODS, self._on_pod),
            self.watch(PIPELINES, self._on_definition),
            self.watch(TASKS, self._on_definition),
        ]

    def _on_run(self, kind: str, run: Obj, old: Obj | None) -> None:
        if kind == "DELETED":
            uid = str(_meta(run).get("uid", ""))
            for memory in (self._failed, self._succeeded, self._created):
                memory.pop(uid, None)
            return
        self.queue.add(key_of(run))

    def _on_definition(self, kind: str, obj: Obj, old: Obj | None) -> None:
        if self.primary is not None:  # a Pipeline or Task a waiting run refers to may have come
            namespace = key_of(obj)[0]
            for key in [k for k in self.primary.cache if k[0] == namespace]:
                self.queue.add(key)

    def _on_pod(self, kind: str, pod: Obj, old: Obj | None) -> None:
        owner = controller_of(pod)
        if owner is None or owner.get("kind") != "PipelineRun":
            return
        uid = str(owner.get("uid", ""))
        task = str((_meta(pod).get("labels") or {}).get(PIPELINE_TASK_LABEL, ""))
        phase = (pod.get("status") or {}).get("phase")
        name = str(_meta(pod).get("name", ""))
        attempt = attempt_of(str(owner.get("name", "")), task, name)
        if attempt is not None:
            if phase == "Succeeded":
                self._succeeded.setdefault(uid, set()).add(task)
            elif phase == "Failed" or kind == "DELETED":
                self._failed.setdefault(uid, {}).setdefault(task, set()).add(attempt)
        self.queue.add((str(_meta(pod).get("namespace", "")), str(owner.get("name", ""))))

    def _pipeline(self, run: Obj) -> tuple[str, Obj] | None:
        spec = run.get("spec") or {}
        if spec.get("pipelineSpec"):
            return str(_meta(run)["name"]), spec["pipelineSpec"]
        name = str((spec.get("pipelineRef") or {}).get("name") or "")
        pipelines = self.informer(PIPELINES)
        found = pipelines.get(key_of(run)[0], name) if pipelines is not None and name else None
        return (name, found.get("spec") or {}) if found is not None else None

    def _task_spec(self, namespace: str, task: Obj) -> Obj | None:
        if task.get("taskSpec"):
            return dict(task["taskSpec"])
        name = str((task.get("taskRef") or {}).get("name") or "")
        tasks = self.informer(TASKS)
        found = tasks.get(namespace, name) if tasks is not None and name else None
        return (found.get("spec") or {}) if found is not None else None

    async def reconcile(self, key: Key) -> None:
        run = self.live(key)
        if run is None:
            return
        pods = self.served[1]
        status = copy.deepcopy(run.get("status") or {})
        done = find(status, "Succeeded")
        if done is not None and done.get("status") in ("True", "False"):
            return
        name = str(_meta(run)["name"])
        uid = str(_meta(run)["uid"])
        now = timestamps.now()
        spec = run.get("spec") or {}
        owned = self.owned(pods, run)
        if spec.get("status") == PENDING:
            set_condition(status, "Succeeded", "Unknown", PENDING, f'PipelineRun "{name}" is pending', now)
            await self._write(run, status)
            return
        if spec.get("status") in CANCELLED:
            for pod in owned:
                await self._delete(pod)
            set_condition(
                status, "Succeeded", "False", "Cancelled", f'PipelineRun "{name}" was cancelled', now
            )
            status["completionTime"] = now
            await self._write(run, status)
            return
        resolved = self._pipeline(run)
        if resolved is None:
            ref = (spec.get("pipelineRef") or {}).get("name")
            message = f'Error retrieving pipeline for pipelinerun {key[0]}/{name}: pipeline "{ref}" not found'
            set_condition(status, "Succeeded", "False", "CouldntGetPipeline", message, now)
            status["completionTime"] = now
            await self._write(run, status)
            return
        pipeline, pipeline_spec = resolved
        tasks = list(pipeline_spec.get("tasks") or [])
        succeeded = self._succeeded.get(uid, set())
        failed_attempts = self._failed.get(uid, {})
        created = self._created.setdefault(uid, {})
        present = {str(_meta(p)["name"]): p for p in owned}
        failed_tasks = [
            str(t["name"])
            for t in tasks
            if len(failed_attempts.get(str(t["name"]), set())) > int(t.get("retries") or 0)
        ]
        children = []
        for task in tasks:
            task_name = str(task["name"])
            started = task_name in created or any(
                (p.get("metadata") or {}).get("labels", {}).get(PIPELINE_TASK_LABEL) == task_name
                for p in owned
            )
            if started:
                children.append(
                    {
                        "apiVersion": "tekton.dev/v1",
                        "kind": "TaskRun",
                        "name": task_run_name(run, task_name),
                        "pipelineTaskName": task_name,
                    }
                )
            if task_name in succeeded:
                continue
            if not all(after in succeeded for after in task.get("runAfter") or []):
                continue
            attempts = failed_attempts.get(task_name, set())
            seen = (attempt_of(name, task_name, existing) for existing in present)
            current = max(
                created.get(task_name, -1),
                max(attempts, default=-1),
                max((a for a in seen if a is not None), default=-1),
            )
            if current >= 0 and current not in attempts:
                continue  # the current attempt runs (or is being created)
            if failed_tasks:
                continue  # a task failed for good: Tekton starts no more (the rest are skipped)
            task_spec = self._task_spec(key[0], task)
            if task_spec is None:
                ref = (task.get("taskRef") or {}).get("name")
                set_condition(
                    status,
                    "Succeeded",
                    "False",
                    "CouldntGetTask",
                    f"Pipeline {key[0]}/{pipeline} can't be Run; it contains Tasks that don't exist: "
                    f'Couldn\'t retrieve Task "{ref}": tasks.tekton.dev "{ref}" not found',
                    now,
                )
                status["completionTime"] = now
                await self._write(run, status)
                return
            attempt = current + 1
            pod = task_pod(run, pipeline, task, task_spec, attempt)
            if pod["metadata"]["name"] in present:
                created[task_name] = attempt
                continue
            try:
                await self.api.create(PODS, key[0], pod)
            except ApiError as exc:
                if exc.code != 409:
                    self.queue.add_after(key, 0.5)  # refused (a webhook, a quota): again later
                    continue
            created[task_name] = attempt
            if not started:
                children.append(
                    {
                        "apiVersion": "tekton.dev/v1",
                        "kind": "TaskRun",
                        "name": task_run_name(run, task_name),
                        "pipelineTaskName": task_name,
                    }
                )
        status.setdefault("startTime", now)
        status["childReferences"] = children
        status["pipelineSpec"] = pipeline_spec
        done_count = len([t for t in tasks if str(t["name"]) in succeeded]) + len(failed_tasks)
        if failed_tasks:
            running = [
                p for p in owned if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            ]
            if running:
                set_condition(
                    status, "Succeeded", "Unknown", "Running", _message(done_count, failed_tasks, tasks), now
                )
            else:
                skipped = len(tasks) - done_count
                failures = len(failed_tasks)
                message = (
                    f"Tasks Completed: {done_count} (Failed: {failures}, Cancelled 0), Skipped: {skipped}"
                )
                set_condition(status, "Succeeded", "False", "Failed", message, now)
                status["completionTime"] = now
        elif done_count == len(tasks):
            message = f"Tasks Completed: {done_count} (Failed: 0, Cancelled 0), Skipped: 0"
            set_condition(status, "Succeeded", "True", "Succeeded", message, now)
            status["completionTime"] = now
        else:
            set_condition(
                status, "Succeeded", "Unknown", "Running", _message(done_count, failed_tasks, tasks), now
            )
        await self._write(run, status)

    async def _write(self, run: Obj, status: Obj) -> None:
        await self.write_status(PIPELINE_RUNS, run, status)

    async def _delete(self, pod: Obj) -> None:
        if _meta(pod).get("deletionTimestamp"):
            return
        try:
            await self.api.delete(PODS, *key_of(pod))
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise


def _message(done: int, failed: list[str], tasks: list[Obj]) -> str:
    incomplete = len(tasks) - done
    return (
        f"Tasks Completed: {done} (Failed: {len(failed)}, Cancelled 0), Incomplete: {incomplete}, Skipped: 0"
    )
