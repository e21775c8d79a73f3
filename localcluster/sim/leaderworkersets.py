"""The LeaderWorkerSet controller (``leaderworkerset.x-k8s.io/v1``): groups of a leader and workers.

Upstream LWS's contract, the parts a queueing controller depends on: ``spec.replicas`` groups of
``leaderWorkerTemplate.size`` Pods each; group *i*'s leader is ``<lws>-<i>`` (from
``leaderTemplate``, or the worker template when there is none) and its workers
``<lws>-<i>-<j>`` for *j* in ``1..size-1`` (from ``workerTemplate``), created once the leader
exists (the default ``LeaderCreated`` startup policy); every Pod is labelled
``leaderworkerset.sigs.k8s.io/name``, ``group-index``, ``worker-index`` and ``group-key``, and
annotated ``leaderworkerset.sigs.k8s.io/size``, a worker also ``leader-name``. With the default
``RecreateGroupOnPodRestart`` policy a group whose Pod ended or was deleted is deleted whole and
created again. Upstream creates the Pods through a leader StatefulSet and a StatefulSet per
group; this simulation creates them directly, owned by the LeaderWorkerSet. Status:
``replicas``, ``readyReplicas`` (groups whose Pods are all ready), ``updatedReplicas`` and the
``Available`` condition.

The CRD is a third-party API: the controller serves LeaderWorkerSets once theirs is established.
"""

from __future__ import annotations

import copy
import hashlib

from ..errors import ApiError
from ..objects import Obj
from ..objects import meta as _meta
from .apps import is_active, is_ready
from .client import PODS, Resource, ignore_stale, key_of
from .informer import Informer
from .thirdparty import CrdGatedController, set_status_condition

Key = tuple[str, str]
GROUP = "leaderworkerset.x-k8s.io"
LEADER_WORKER_SETS = Resource(GROUP, "v1", "leaderworkersets")
LWS_CRD = f"leaderworkersets.{GROUP}"
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
LEADER_NAME_ANNOTATION = "leaderworkerset.sigs.k8s.io/leader-name"


def size_of(lws: Obj) -> int:
    value = ((lws.get("spec") or {}).get("leaderWorkerTemplate") or {}).get("size")
    return 1 if value is None else int(value)


def replicas_of(lws: Obj) -> int:
    value = (lws.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def group_pod(lws: Obj, group: int, worker: int) -> Obj:
    """Pod ``worker`` (0: the leader) of group ``group``, as upstream labels and names it."""
    meta = _meta(lws)
    name = str(meta["name"])
    templates = (lws.get("spec") or {}).get("leaderWorkerTemplate") or {}
    source = (
        templates.get("leaderTemplate")
        if worker == 0 and templates.get("leaderTemplate")
        else templates.get("workerTemplate")
    )
    template = copy.deepcopy(source or {})
    pod_meta = template.get("metadata") or {}
    leader = f"{name}-{group}"
    group_key = hashlib.sha1(f"{meta.get('namespace')}/{leader}".encode(), usedforsecurity=False).hexdigest()
    labels = {
        **(pod_meta.get("labels") or {}),
        NAME_LABEL: name,
        GROUP_INDEX_LABEL: str(group),
        WORKER_INDEX_LABEL: str(worker),
        GROUP_KEY_LABEL: group_key,
    }
    annotations = {**(pod_meta.get("annotations") or {}), SIZE_ANNOTATION: str(size_of(lws))}
    if worker:
        annotations[LEADER_NAME_ANNOTATION] = leader
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": leader if worker == 0 else f"{leader}-{worker}",
            "namespace": meta.get("namespace"),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/v1",
                    "kind": "LeaderWorkerSet",
                    "name": name,
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template.get("spec") or {},
    }


class LeaderWorkerSetController(CrdGatedController):
    name = "leaderworkerset-controller"
    crds = (LWS_CRD,)

    def serve(self) -> list[Informer]:
        sets = self.watch(LEADER_WORKER_SETS, self.enqueue)
        return [sets, self.watch(PODS, self.owned_by("LeaderWorkerSet"))]

    async def reconcile(self, key: Key) -> None:
        lws = self.live(key)
        if lws is None:
            return
        pods = self.served[1]
        owned = self.owned(pods, lws)
        by_name = {str(_meta(p)["name"]): p for p in owned}
        size, replicas = size_of(lws), replicas_of(lws)
        ready_groups = 0
        for group in range(replicas):
            names = [str(_meta(group_pod(lws, group, w))["name"]) for w in range(size)]
            present = [by_name[n] for n in names if n in by_name]
            broken = [p for p in present if not is_active(p)] or (
                by_name.get(names[0]) is None and len(present) > 0
            )
            if broken:
                # RecreateGroupOnPodRestart: the whole group goes, then comes back.
                for pod in present:
                    if not _meta(pod).get("deletionTimestamp"):
                        await self._delete(pod)
                continue
            if names[0] not in by_name:
                await self._create(lws, group_pod(lws, group, 0))
                continue
            for worker in range(1, size):
                if names[worker] not in by_name:
                    await self._create(lws, group_pod(lws, group, worker))
            if len(present) == size and all(is_ready(p) for p in present):
                ready_groups += 1
        for pod in owned:  # groups beyond replicas (scaled down)
            index = (_meta(pod).get("labels") or {}).get(GROUP_INDEX_LABEL, "0")
            if index.isdigit() and int(index) >= replicas and not _meta(pod).get("deletionTimestamp"):
                await self._delete(pod)
        status = dict(lws.get("status") or {})
        status.update(replicas=replicas, readyReplicas=ready_groups, updatedReplicas=replicas)
        available = ready_groups >= replicas
        set_status_condition(
            status,
            "Available",
            available,
            "AllGroupsReady" if available else "GroupsNotReady",
            "All replicas are ready" if available else "Some replicas are not ready",
        )
        await self.write_status(LEADER_WORKER_SETS, lws, status)

    async def _create(self, lws: Obj, pod: Obj) -> None:
        try:
            await self.api.create(PODS, _meta(lws).get("namespace"), pod)
        except ApiError as exc:
            if exc.code != 409:
                self.queue.add_after(key_of(lws), 0.5)  # refused (a webhook, a quota): again later

    async def _delete(self, pod: Obj) -> None:
        await ignore_stale(self.api.delete(PODS, *key_of(pod)))
