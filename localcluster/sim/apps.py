"""The ``apps/v1`` controllers: Deployment → ReplicaSet → Pods, and StatefulSet → ordered Pods.

The parts of upstream's contracts a queueing controller depends on:

- **ReplicaSet**: keeps ``spec.replicas`` active Pods (not ended, not being deleted) from its
  template, named ``<replicaset>-<5 random>``, labelled as the template says and controlled by
  it; a Pod that ended or was deleted is replaced; extra Pods are deleted, unscheduled ones
  first, then the newest. Status: ``replicas``, ``readyReplicas``, ``availableReplicas``.
- **Deployment**: one ReplicaSet per pod template, named ``<deployment>-<pod-template-hash>``,
  the hash also a label of the ReplicaSet, its selector and its Pods; the current one gets
  ``spec.replicas``, older ones are scaled to 0 (a ``Recreate`` rollout: rolling updates are not
  simulated). Status: ``replicas``, ``updatedReplicas``, ``readyReplicas``,
  ``availableReplicas`` and the ``Available`` condition.
- **StatefulSet**: Pods ``<statefulset>-<ordinal>`` for ordinals ``0..replicas-1``, labelled
  ``statefulset.kubernetes.io/pod-name`` and ``apps.kubernetes.io/pod-index``; with the default
  ``OrderedReady`` policy Pod *n* is created only once Pods *0..n-1* are Running and Ready
  (``Parallel`` creates them all at once); scaling down deletes the highest ordinals first; a
  Pod that ended or was deleted is created again under the same name. Status: ``replicas``,
  ``readyReplicas``, ``currentReplicas``, ``availableReplicas``.

Like the Job controller, each remembers the Pods it created until their events arrive.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random

from .. import timestamps
from ..conditions import is_true, set_condition
from ..errors import ApiError
from ..objects import Obj
from ..objects import meta as _meta
from .client import PODS, Resource, ignore_stale, key_of
from .controller import Controller
from .jobs import _SUFFIX_ALPHABET, controller_of

Key = tuple[str, str]
DEPLOYMENTS = Resource("apps", "v1", "deployments")
REPLICA_SETS = Resource("apps", "v1", "replicasets")
STATEFUL_SETS = Resource("apps", "v1", "statefulsets")
POD_TEMPLATE_HASH = "pod-template-hash"
STS_POD_NAME = "statefulset.kubernetes.io/pod-name"
STS_POD_INDEX = "apps.kubernetes.io/pod-index"


def _replicas(obj: Obj) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def is_active(pod: Obj) -> bool:
    """Counts toward a controller's replicas: not ended and not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not _meta(pod).get("deletionTimestamp")


def is_ready(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and is_true(pod.get("status") or {}, "Ready")


def template_hash(template: Obj) -> str:
    """A stable short hash of a pod template (upstream's is an FNV hash, safely encoded)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    return "".join(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in digest[:10])


def owner_reference(owner: Obj, kind: str) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "name": _meta(owner)["name"],
        "uid": _meta(owner)["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def pod_from(owner: Obj, kind: str, name: str, extra_labels: dict[str, str]) -> Obj:
    template = copy.deepcopy((owner.get("spec") or {}).get("template") or {})
    meta = template.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": _meta(owner).get("namespace"),
            "labels": {**(meta.get("labels") or {}), **extra_labels},
            "annotations": dict(meta.get("annotations") or {}),
            "ownerReferences": [owner_reference(owner, kind)],
        },
        "spec": template.get("spec") or {},
    }


class _PodOwner(Controller[Key]):
    """What the ReplicaSet and StatefulSet controllers share: their Pods, as they believe them."""

    kind = ""
    resource: Resource

    def __init__(self) -> None:
        super().__init__()
        self._pods: dict[str, dict[str, Obj]] = {}  # owner uid -> pod name -> pod
        self._creating: dict[str, dict[str, Obj]] = {}  # owner uid -> created, not yet seen
        self.created = 0

    async def setup(self) -> None:
        self.owners = self.watch(self.resource, lambda kind, obj, old: self.queue.add(key_of(obj)))
        self.pods = self.watch(PODS, self._on_pod)

    def _on_pod(self, kind: str, pod: Obj, old: Obj | None) -> None:
        owner = controller_of(pod)
        if owner is None or owner.get("kind") != self.kind or owner.get("apiVersion") != "apps/v1":
            return
        uid, name = str(owner.get("uid", "")), str(_meta(pod).get("name", ""))
        if kind == "DELETED":
            self._pods.get(uid, {}).pop(name, None)
        else:
            self._pods.setdefault(uid, {})[name] = pod
        self._creating.get(uid, {}).pop(name, None)
        self.queue.add((str(_meta(pod).get("namespace", "")), str(owner.get("name", ""))))

    def owned(self, uid: str) -> list[Obj]:
        observed = self._pods.get(uid, {})
        return [*observed.values(), *(p for n, p in self._creating.get(uid, {}).items() if n not in observed)]

    async def create_pod(self, owner: Obj, pod: Obj) -> bool:
        try:
            created = await self.api.create(PODS, _meta(owner).get("namespace"), pod)
        except ApiError as exc:
            if exc.code == 409:
                self.queue.add(key_of(owner))
                return False
            self.queue.add_after(key_of(owner), 0.5)  # refused (a webhook, a quota): try again
            return False
        self.created += 1
        uid, name = str(_meta(owner)["uid"]), str(_meta(created)["name"])
        if name not in self._pods.get(uid, {}):
            self._creating.setdefault(uid, {})[name] = created
        return True

    async def delete_pod(self, pod: Obj) -> None:
        await ignore_stale(self.api.delete(PODS, *key_of(pod)))

    async def write_replica_status(self, owner: Obj, uid: str, *, current_replicas: bool = False) -> None:
        """What a ReplicaSet and a StatefulSet report: their active Pods, the ready (so available)
        ones and the generation seen; a StatefulSet counts them as ``currentReplicas`` too."""
        current = [p for p in self.owned(uid) if is_active(p)]
        ready = sum(1 for p in current if is_ready(p))
        status: Obj = {
            "replicas": len(current),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": _meta(owner).get("generation", 1),
        }
        if current_replicas:
            status["currentReplicas"] = len(current)
        await self.write_status(owner, status)

    async def write_status(self, owner: Obj, status: Obj) -> None:
        if {**(owner.get("status") or {}), **status} == (owner.get("status") or {}):
            return
        new = {**owner, "status": {**(owner.get("status") or {}), **status}}
        await ignore_stale(self.api.replace(self.resource, new, "status"))


class ReplicaSetController(_PodOwner):
    name = "replicaset-controller"
    kind = "ReplicaSet"
    resource = REPLICA_SETS
    workers = 2

    def __init__(self, seed: int | None = None) -> None:
        super().__init__()
        self._rng = random.Random(seed)

    async def reconcile(self, key: Key) -> None:
        rs = self.owners.get(*key)
        if rs is None or _meta(rs).get("deletionTimestamp"):
            return
        uid = str(_meta(rs)["uid"])
        active = [p for p in self.owned(uid) if is_active(p)]
        want = _replicas(rs)
        for _ in range(want - len(active)):
            name = f"{_meta(rs)['name']}-{''.join(self._rng.choice(_SUFFIX_ALPHABET) for _ in range(5))}"
            if not await self.create_pod(rs, pod_from(rs, self.kind, name, {})):
                break
        if len(active) > want:
            # Unscheduled Pods go first, then the newest (upstream's ranking, simplified).
            ranked = sorted(
                active, key=lambda p: (bool((p.get("spec") or {}).get("nodeName")), _newest_first(p))
            )
            for pod in ranked[: len(active) - want]:
                await self.delete_pod(pod)
        await self.write_replica_status(rs, uid)


class DeploymentController(Controller[Key]):
    name = "deployment-controller"
    workers = 2

    async def setup(self) -> None:
        self.deployments = self.watch(DEPLOYMENTS, lambda kind, obj, old: self.queue.add(key_of(obj)))
        self.replica_sets = self.watch(REPLICA_SETS, self._on_replica_set)

    def _on_replica_set(self, kind: str, rs: Obj, old: Obj | None) -> None:
        owner = controller_of(rs)
        if owner is not None and owner.get("kind") == "Deployment":
            self.queue.add((str(_meta(rs).get("namespace", "")), str(owner.get("name", ""))))

    async def reconcile(self, key: Key) -> None:
        deployment = self.deployments.get(*key)
        if deployment is None or _meta(deployment).get("deletionTimestamp"):
            return
        uid = str(_meta(deployment)["uid"])
        owned = [rs for rs in self.replica_sets.cache.values() if (controller_of(rs) or {}).get("uid") == uid]
        spec = deployment.get("spec") or {}
        template = copy.deepcopy(spec.get("template") or {})
        digest = template_hash(template)
        name = f"{_meta(deployment)['name']}-{digest}"
        want = _replicas(deployment)
        current = next((rs for rs in owned if _meta(rs)["name"] == name), None)
        for old in owned:
            if old is not current and _replicas(old) != 0:
                await self._scale(old, 0)
        if current is None:
            template.setdefault("metadata", {}).setdefault("labels", {})[POD_TEMPLATE_HASH] = digest
            selector = copy.deepcopy(spec.get("selector") or {})
            selector.setdefault("matchLabels", {})[POD_TEMPLATE_HASH] = digest
            rs = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": name,
                    "namespace": key[0],
                    "labels": {**(template["metadata"].get("labels") or {})},
                    "ownerReferences": [owner_reference(deployment, "Deployment")],
                },
                "spec": {"replicas": want, "selector": selector, "template": template},
            }
            try:
                await self.api.create(REPLICA_SETS, key[0], rs)
            except ApiError as exc:
                if exc.code != 409:
                    raise
            return
        if _replicas(current) != want:
            await self._scale(current, want)
            return
        status = current.get("status") or {}
        ready = int(status.get("readyReplicas") or 0)
        total = sum(int((rs.get("status") or {}).get("replicas") or 0) for rs in owned)
        new_status = dict(deployment.get("status") or {})
        new_status.update(
            replicas=total,
            updatedReplicas=int(status.get("replicas") or 0),
            readyReplicas=ready,
            availableReplicas=ready,
            observedGeneration=_meta(deployment).get("generation", 1),
        )
        available = ready >= want
        set_condition(
            new_status,
            "Available",
            "True" if available else "False",
            "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
            "Deployment has minimum availability."
            if available
            else "Deployment does not have minimum availability.",
            timestamps.now(),
        )
        if new_status != (deployment.get("status") or {}):
            await ignore_stale(self.api.replace(DEPLOYMENTS, {**deployment, "status": new_status}, "status"))

    async def _scale(self, rs: Obj, replicas: int) -> None:
        spec = {**(rs.get("spec") or {}), "replicas": replicas}
        await ignore_stale(self.api.replace(REPLICA_SETS, {**rs, "spec": spec}))


class StatefulSetController(_PodOwner):
    name = "statefulset-controller"
    kind = "StatefulSet"
    resource = STATEFUL_SETS
    workers = 2

    async def reconcile(self, key: Key) -> None:
        sts = self.owners.get(*key)
        if sts is None or _meta(sts).get("deletionTimestamp"):
            return
        uid = str(_meta(sts)["uid"])
        name = str(_meta(sts)["name"])
        want = _replicas(sts)
        parallel = (sts.get("spec") or {}).get("podManagementPolicy") == "Parallel"
        pods = {str(_meta(p)["name"]): p for p in self.owned(uid)}
        for pod in pods.values():
            ordinal = _ordinal(name, str(_meta(pod)["name"]))
            if ordinal is not None and ordinal >= want and not _meta(pod).get("deletionTimestamp"):
                await self.delete_pod(pod)  # scaled down: the highest ordinals go
            elif (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") and not _meta(pod).get(
                "deletionTimestamp"
            ):
                await self.delete_pod(pod)  # an ended Pod is deleted, then created again
        for ordinal in range(want):
            pod_name = f"{name}-{ordinal}"
            existing = pods.get(pod_name)
            if existing is None:
                labels = {STS_POD_NAME: pod_name, STS_POD_INDEX: str(ordinal)}
                if not await self.create_pod(sts, pod_from(sts, self.kind, pod_name, labels)):
                    break
                if not parallel:
                    break  # OrderedReady: the next one once this one is Running and Ready
            elif not parallel and not is_ready(existing):
                break
        await self.write_replica_status(sts, uid, current_replicas=True)


def _newest_first(pod: Obj) -> str:
    stamp = str(_meta(pod).get("creationTimestamp") or "")
    return "".join(chr(0x10FFFF - ord(c)) for c in stamp)


def _ordinal(sts_name: str, pod_name: str) -> int | None:
    prefix = f"{sts_name}-"
    tail = pod_name[len(prefix) :] if pod_name.startswith(prefix) else ""
    return int(tail) if tail.isdigit() else None
