"""The Kubeflow Trainer v2 controller (``trainer.kubeflow.org/v1alpha1``): a JobSet per TrainJob.

Upstream's contract, the parts a queueing controller depends on: a TrainJob references a
runtime (``spec.runtimeRef``: a ClusterTrainingRuntime by default, or a TrainingRuntime of its
namespace); the Trainer makes one JobSet named after the TrainJob and owned by it, from the
runtime's ``template`` with the TrainJob's trainer settings (``numNodes`` as the ``node`` job's
parallelism and completions, else the runtime's ``mlPolicy.numNodes``; ``image``, ``command``,
``args``, ``resourcesPerNode`` for the ``node`` container) and every ``spec.runtimePatches``
entry's pod-template labels, annotations, nodeSelector, tolerations and scheduling gates.
``spec.suspend`` is the JobSet's; while the JobSet is suspended its templates follow the
TrainJob (that is how what a queueing controller patched in reaches the Pods). A TrainJob whose
``spec.managedBy`` is another controller's is left alone. Status: ``Suspended`` (``Suspended`` /
``Resumed``), ``Complete`` and ``Failed`` copied from the JobSet's ``Completed`` / ``Failed``,
and ``jobsStatus`` from its ``replicatedJobsStatus``.

The CRDs are third-party APIs: the controller serves TrainJobs once theirs is established.
"""

from __future__ import annotations

import copy
from typing import Any

from .. import timestamps
from ..conditions import find, is_true, set_condition
from ..errors import ApiError
from ..objects import Obj
from .client import Resource
from .informer import Informer
from .jobs import controller_of
from .jobsets import JOBSETS
from .thirdparty import CrdGatedController

Key = tuple[str, str]
GROUP = "trainer.kubeflow.org"
TRAIN_JOBS = Resource(GROUP, "v1alpha1", "trainjobs")
TRAINING_RUNTIMES = Resource(GROUP, "v1alpha1", "trainingruntimes")
CLUSTER_TRAINING_RUNTIMES = Resource(GROUP, "v1alpha1", "clustertrainingruntimes", namespaced=False)
TRAINJOB_CRD = f"trainjobs.{GROUP}"
TRAINJOB_CONTROLLER = "trainer.kubeflow.org/trainjob-controller"
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_NODE = "node"


def _m(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _merge_pod_patch(template: Obj, patch: Obj) -> None:
    """A runtime patch's pod-template fields into ``template`` (in place)."""
    meta = template.setdefault("metadata", {})
    spec = template.setdefault("spec", {})
    for key in ("labels", "annotations"):
        if _m(patch.get("metadata")).get(key):
            meta[key] = {**_m(meta.get(key)), **_m(patch["metadata"][key])}
    patch_spec = _m(patch.get("spec"))
    if patch_spec.get("nodeSelector"):
        spec["nodeSelector"] = {**_m(spec.get("nodeSelector")), **patch_spec["nodeSelector"]}
    for key in ("tolerations", "schedulingGates"):
        for item in patch_spec.get(key) or []:
            items = spec.setdefault(key, [])
            if item not in items:
                items.append(copy.deepcopy(item))


def jobset_for(trainjob: Obj, runtime: Obj) -> Obj:
    """The JobSet upstream's Trainer builds for ``trainjob`` from ``runtime``."""
    spec = copy.deepcopy(_m(_m(_m(runtime.get("spec")).get("template")).get("spec")))
    trainer = _m(_m(trainjob.get("spec")).get("trainer"))
    nodes = trainer.get("numNodes", _m(_m(runtime.get("spec")).get("mlPolicy")).get("numNodes"))
    by_name: dict[str, Obj] = {}
    for rj in spec.get("replicatedJobs") or []:
        by_name[str(rj.get("name"))] = rj
        labels = _m(_m(_m(rj.get("template")).get("metadata")).get("labels"))
        if labels.get(ANCESTOR_LABEL) != "trainer" and rj.get("name") != TRAINER_NODE:
            continue
        job_spec = rj.setdefault("template", {}).setdefault("spec", {})
        if nodes is not None:
            job_spec["parallelism"] = job_spec["completions"] = int(nodes)
        for container in job_spec.setdefault("template", {}).setdefault("spec", {}).get("containers") or []:
            if container.get("name") == TRAINER_NODE:
                for key in ("image", "command", "args"):
                    if trainer.get(key) is not None:
                        container[key] = copy.deepcopy(trainer[key])
                if trainer.get("resourcesPerNode") is not None:
                    container["resources"] = copy.deepcopy(trainer["resourcesPerNode"])
    for patch in _m(trainjob.get("spec")).get("runtimePatches") or []:
        template_patch = _m(_m(_m(patch).get("trainingRuntimeSpec")).get("template"))
        for rj_patch in _m(template_patch.get("spec")).get("replicatedJobs") or []:
            target = by_name.get(str(_m(rj_patch).get("name")))
            pod_patch = _m(_m(_m(_m(rj_patch).get("template")).get("spec")).get("template"))
            if target is not None and pod_patch:
                job_spec = target.setdefault("template", {}).setdefault("spec", {})
                _merge_pod_patch(job_spec.setdefault("template", {}), pod_patch)
    spec["suspend"] = bool(_m(trainjob.get("spec")).get("suspend"))
    meta = _m(trainjob.get("metadata"))
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace"),
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/v1alpha1",
                    "kind": "TrainJob",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


class TrainJobController(CrdGatedController):
    name = "trainjob-controller"
    # The runtime and JobSet CRDs are installed with it (kadmit local applies them together).
    crds = (TRAINJOB_CRD,)

    def serve(self) -> list[Informer]:
        return [
            self.watch(TRAIN_JOBS, self.enqueue),
            self.watch(JOBSETS, self.owned_by("TrainJob")),
            self.watch(TRAINING_RUNTIMES, self._on_runtime),
            self.watch(CLUSTER_TRAINING_RUNTIMES, self._on_runtime),
        ]

    def _on_runtime(self, kind: str, runtime: Obj, old: Obj | None) -> None:
        if self.primary is not None:
            for key in list(self.primary.cache):
                self.queue.add(key)

    def _runtime(self, trainjob: Obj) -> Obj | None:
        ref = _m(_m(trainjob.get("spec")).get("runtimeRef"))
        name = str(ref.get("name") or "")
        if ref.get("kind") == "TrainingRuntime":
            namespace = str(_m(trainjob.get("metadata")).get("namespace") or "")
            runtimes = self.informer(TRAINING_RUNTIMES)
            return runtimes.get(namespace, name) if runtimes is not None else None
        cluster_runtimes = self.informer(CLUSTER_TRAINING_RUNTIMES)
        return cluster_runtimes.get("", name) if cluster_runtimes is not None else None

    async def reconcile(self, key: Key) -> None:
        trainjob = self.live(key)
        if trainjob is None:
            return
        jobsets = self.served[1]
        if _m(trainjob.get("spec")).get("managedBy") not in (None, TRAINJOB_CONTROLLER):
            return  # MultiKueue's: upstream's controller skips it
        runtime = self._runtime(trainjob)
        if runtime is None:
            return  # queued again when a runtime appears
        desired = jobset_for(trainjob, runtime)
        current = jobsets.get(*key)
        try:
            if current is None:
                await self.api.create(JOBSETS, key[0], desired)
            elif (controller_of(current) or {}).get("uid") == trainjob["metadata"]["uid"]:
                await self._sync(current, desired)
        except ApiError as exc:
            if exc.code not in (404, 409):
                raise
            self.queue.add_after(key, 0.5)
        await self._status(trainjob, current)

    async def _sync(self, current: Obj, desired: Obj) -> None:
        spec = _m(current.get("spec"))
        want = desired["spec"]
        if want["suspend"]:
            if not spec.get("suspend"):
                await self.api.replace(JOBSETS, {**current, "spec": {**spec, "suspend": True}})
            return
        if spec.get("suspend"):
            # resume with the templates as the TrainJob has them now
            new_spec = {**spec, "replicatedJobs": want.get("replicatedJobs") or [], "suspend": False}
            await self.api.replace(JOBSETS, {**current, "spec": new_spec})

    async def _status(self, trainjob: Obj, jobset: Obj | None) -> None:
        status = copy.deepcopy(_m(trainjob.get("status")))
        now = timestamps.now()
        generation = _m(trainjob.get("metadata")).get("generation")
        if _m(trainjob.get("spec")).get("suspend"):
            set_condition(
                status, "Suspended", "True", "Suspended", "TrainJob is suspended", now, generation=generation
            )
        elif find(status, "Suspended") is not None:
            set_condition(
                status, "Suspended", "False", "Resumed", "TrainJob is resumed", now, generation=generation
            )
        if jobset is not None:
            js_status = _m(jobset.get("status"))
            for source, target in (("Completed", "Complete"), ("Failed", "Failed")):
                found = find(js_status, source)
                if found is not None and found.get("status") == "True" and not is_true(status, target):
                    set_condition(
                        status,
                        target,
                        "True",
                        str(found.get("reason") or source),
                        str(found.get("message") or ""),
                        now,
                        generation=generation,
                    )
            jobs = [
                {
                    "name": s.get("name"),
                    **{
                        k: int(s.get(k) or 0) for k in ("ready", "succeeded", "failed", "active", "suspended")
                    },
                }
                for s in js_status.get("replicatedJobsStatus") or []
            ]
            if jobs:
                status["jobsStatus"] = jobs
        await self.write_status(TRAIN_JOBS, trainjob, status)
