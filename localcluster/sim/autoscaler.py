"""A cluster-autoscaler stand-in that answers ``autoscaling.x-k8s.io/v1`` ProvisioningRequests.

For each request it reads the referenced PodTemplates and counts, then:

- sets ``Accepted``;
- ``check-capacity.autoscaling.x-k8s.io``: ``Provisioned=True`` when the Pods fit on the
  existing Nodes' free capacity, else ``Provisioned=False`` / ``CapacityIsNotFound`` and a new
  look whenever Nodes or Pods change;
- ``best-effort-atomic-scale-up.autoscaling.x-k8s.io``: adds the Nodes the Pods need (all or
  none, within each pool's ``maxCount``), booked for the request, and sets ``Provisioned=True``;
  ``Failed`` when no pool can grow enough;
- ``BookingExpired`` when no Pod consuming the request (annotation
  ``autoscaling.x-k8s.io/consume-provisioning-request``) appears within ``booking_expiry``
  seconds; booked Nodes are then released and the empty ones removed;
- ``CapacityRevoked`` on :meth:`Autoscaler.revoke` or the annotation
  ``localcluster.kadmit.dev/revoke-capacity: "true"`` on the request.

Requests of other classes are left alone, as cluster-autoscaler leaves them.
"""

from __future__ import annotations

import asyncio
from importlib import resources

import yaml

from .. import timestamps
from ..conditions import is_true, set_condition
from ..errors import ApiError
from ..objects import Obj
from ..quantity import Resources, add
from .capacity import CapacityError, SimNode, expand, fits_existing, plan_scale_up, sim_nodes
from .client import CRDS, NODES, PODS, PODTEMPLATES, PROVISIONING_REQUESTS, ignore_stale, key_of, selecting
from .controller import Controller
from .informer import Informer
from .jobstatus import is_active
from .nodeconfig import POOL_LABEL, NodeConfig
from .nodes import register_node
from .placement import pod_requests
from .scheduler import BOOKED_FOR, CONSUME_ANNOTATION, node_booking, node_is_ready

Key = tuple[str, str]
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
ATOMIC_SCALE_UP = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CLASSES = (CHECK_CAPACITY, ATOMIC_SCALE_UP)
REVOKE_ANNOTATION = "localcluster.kadmit.dev/revoke-capacity"
DEFAULT_BOOKING_EXPIRY_SECONDS = 600.0
CRD_NAME = "provisioningrequests.autoscaling.x-k8s.io"
_FINAL = ("Failed", "BookingExpired", "CapacityRevoked")


def crd_manifest() -> Obj:
    text = resources.files(__package__).joinpath("provisioningrequest-crd.yaml").read_text()
    manifest: Obj = yaml.safe_load(text)
    return manifest


def with_condition(obj: Obj, kind: str, value: str, reason: str, message: str) -> Obj:
    """A copy of the request's status with a ``metav1.Condition`` set for its current generation."""
    status = dict(obj.get("status") or {})
    generation = (obj.get("metadata") or {}).get("generation", 1)
    set_condition(status, kind, value, reason, message, timestamps.now(), generation=generation)
    status.setdefault("provisioningClassDetails", {})
    return status


class Autoscaler(Controller[Key]):
    name = "autoscaler"
    workers = 1  # decisions about shared capacity are made one at a time

    def __init__(self, config: NodeConfig, booking_expiry: float = DEFAULT_BOOKING_EXPIRY_SECONDS) -> None:
        super().__init__()
        if booking_expiry <= 0:
            raise ValueError("booking_expiry must be positive")
        self.config = config
        self.booking_expiry = booking_expiry
        self._provisioned_at: dict[Key, float] = {}
        self._consumed: set[Key] = set()
        self._released: set[Key] = set()
        self.nodes_added: list[str] = []

    # ---- wiring ------------------------------------------------------------------------

    async def setup(self) -> None:
        await self._ensure_crd()
        self.requests = self.watch(PROVISIONING_REQUESTS, self._on_request)
        self.nodes = self.watch(NODES, self._on_capacity_change)
        self.pods = self.watch(PODS, self._on_pod)

    async def _ensure_crd(self) -> None:
        """Create the CRD and wait, on a watch, until the server serves it."""
        established = asyncio.Event()

        def on_crd(kind: str, crd: Obj, old: Obj | None) -> None:
            if key_of(crd)[1] == CRD_NAME and is_true(crd.get("status") or {}, "Established"):
                established.set()

        watcher = Informer(self.api, CRDS, on_crd, selecting(name=CRD_NAME))
        watcher.start()
        try:
            try:
                await self.api.create(CRDS, None, crd_manifest())
            except ApiError as exc:
                if exc.code != 409:
                    raise
            await asyncio.wait_for(established.wait(), 30)
        finally:
            await watcher.stop()

    def _on_request(self, kind: str, request: Obj, old: Obj | None) -> None:
        key = key_of(request)
        if kind == "DELETED":
            self._provisioned_at.pop(key, None)
            self._consumed.discard(key)
        self.queue.add(key)

    def _waiting_on_capacity(self) -> None:
        for key, request in self.requests.cache.items():
            status = request.get("status") or {}
            if not any(is_true(status, c) for c in ("Provisioned", *_FINAL)):
                self.queue.add(key)

    def _on_capacity_change(self, kind: str, node: Obj, old: Obj | None) -> None:
        self._waiting_on_capacity()

    def _on_pod(self, kind: str, pod: Obj, old: Obj | None) -> None:
        metadata = pod.get("metadata") or {}
        consumed = (metadata.get("annotations") or {}).get(CONSUME_ANNOTATION)
        if consumed and kind != "DELETED":
            key = (str(metadata.get("namespace", "")), str(consumed))
            if key not in self._consumed:
                self._consumed.add(key)
                self.queue.add(key)
        if kind == "DELETED" or (old is not None and is_active(old) and not is_active(pod)):
            self._waiting_on_capacity()

    # ---- public knobs ------------------------------------------------------------------

    async def revoke(self, namespace: str, name: str, message: str = "Capacity was revoked") -> None:
        """Take back the capacity of a provisioned request, as a cloud reclaiming VMs would."""
        request = await self.api.get(PROVISIONING_REQUESTS, namespace, name)
        status = with_condition(request, "CapacityRevoked", "True", "CapacityRevoked", message)
        await self.api.replace(PROVISIONING_REQUESTS, {**request, "status": status}, "status")
        await self._release((namespace, name), remove_empty=True)

    # ---- reconcile ---------------------------------------------------------------------

    async def reconcile(self, key: Key) -> None:
        request = self.requests.get(*key)
        if request is None:
            await self._release(key, remove_empty=False)
            return
        spec = request.get("spec") or {}
        if spec.get("provisioningClassName") not in CLASSES:
            return
        status = request.get("status") or {}
        annotations = (request.get("metadata") or {}).get("annotations") or {}
        if annotations.get(REVOKE_ANNOTATION) == "true" and not is_true(status, "CapacityRevoked"):
            await self.revoke(*key, message="Capacity was revoked on request")
            return
        if any(is_true(status, c) for c in _FINAL):
            if key not in self._released:
                await self._release(key, remove_empty=not is_true(status, "Failed"))
            return
        if is_true(status, "Provisioned"):
            await self._watch_booking(key, request)
            return
        if not is_true(status, "Accepted"):
            await self._write(request, with_condition(
                request, "Accepted", "True", "Accepted", "Provisioning Request was accepted"))
            return
        await self._provision(key, request)

    async def _provision(self, key: Key, request: Obj) -> None:
        spec = request.get("spec") or {}
        pod_sets: list[tuple[Obj, int]] = []
        for pod_set in spec.get("podSets") or []:
            name = (pod_set.get("podTemplateRef") or {}).get("name", "")
            try:
                template = await self.api.get(PODTEMPLATES, key[0], name)
            except ApiError as exc:
                if exc.code != 404:
                    raise
                await self._write(request, with_condition(
                    request, "Failed", "True", "PodTemplateNotFound",
                    f"PodTemplate {key[0]}/{name} referenced by the request does not exist"))
                return
            pod_spec = ((template.get("template") or {}).get("spec")) or {}
            pod_sets.append((pod_spec, int(pod_set.get("count", 1))))
        pods = expand(pod_sets)
        left = fits_existing(pods, self._free_nodes())
        if spec.get("provisioningClassName") == CHECK_CAPACITY:
            if left:
                await self._write(request, with_condition(
                    request, "Provisioned", "False", "CapacityIsNotFound",
                    f"Capacity is not found, {len(left)} of {len(pods)} pods do not fit; "
                    "CA will try to find it later"))
                return
            await self._provisioned(key, request, "CapacityIsFound", "Capacity is found in the cluster")
            return
        pool_sizes: dict[str, int] = {}
        for node in self.nodes.cache.values():
            pool = ((node.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL)
            if pool:
                pool_sizes[pool] = pool_sizes.get(pool, 0) + 1
        try:
            scale_up = plan_scale_up(left, self.config.pools, pool_sizes)
        except CapacityError as exc:
            await self._write(request, with_condition(
                request, "Failed", "True", "FailedToScaleUp", f"Cannot provision {len(left)} pods: {exc}"))
            return
        booking = f"{key[0]}/{key[1]}"
        for pool_name, count in scale_up.new_nodes.items():
            pool = self.config.pool(pool_name)
            if pool is None:
                continue
            for _ in range(count):
                node = pool.node(self._next_name(pool_name))
                node["metadata"].setdefault("annotations", {})[BOOKED_FOR] = booking
                created = await register_node(self.api, node)
                self.nodes_added.append(key_of(created)[1])
        await self._provisioned(
            key, request, "Provisioned",
            f"Provisioning Request was successfully provisioned with {scale_up.total} new nodes",
        )

    async def _provisioned(self, key: Key, request: Obj, reason: str, message: str) -> None:
        if await self._write(request, with_condition(request, "Provisioned", "True", reason, message)):
            self._provisioned_at[key] = asyncio.get_running_loop().time()
            self.queue.add_after(key, self.booking_expiry)

    async def _watch_booking(self, key: Key, request: Obj) -> None:
        loop = asyncio.get_running_loop()
        started = self._provisioned_at.setdefault(key, loop.time())
        if key in self._consumed:
            return  # the capacity is in use: the booking is honoured, nothing expires
        remaining = started + self.booking_expiry - loop.time()
        if remaining > 0:
            self.queue.add_after(key, remaining)
            return
        await self._write(request, with_condition(
            request, "BookingExpired", "True", "BookingExpired",
            "Capacity booking for the Provisioning Request has expired and the nodes are now available "
            "to other pods"))

    def _free_nodes(self) -> list[SimNode]:
        """Ready Nodes not booked for another request, with their current use."""
        usage: dict[str, tuple[Resources, int]] = {}
        for pod in self.pods.cache.values():
            node = (pod.get("spec") or {}).get("nodeName")
            if node and is_active(pod):
                requested, count = usage.get(node, ({}, 0))
                add(requested, pod_requests(pod.get("spec") or {}))
                usage[node] = (requested, count + 1)
        nodes = [n for n in self.nodes.cache.values() if node_is_ready(n) and node_booking(n) is None]
        return sim_nodes(nodes, usage)

    def _next_name(self, pool: str) -> str:
        taken = {key_of(n)[1] for n in self.nodes.cache.values()} | set(self.nodes_added)
        index = 0
        while f"{pool}-{index}" in taken:
            index += 1
        return f"{pool}-{index}"

    async def _release(self, key: Key, remove_empty: bool) -> None:
        """Unbook the request's Nodes; remove those no Pod runs on when the capacity is given back."""
        self._released.add(key)
        booking = f"{key[0]}/{key[1]}"
        busy = {
            (p.get("spec") or {}).get("nodeName") for p in self.pods.cache.values() if is_active(p)
        }
        for node in list(self.nodes.cache.values()):
            if node_booking(node) != booking:
                continue
            name = key_of(node)[1]
            try:
                if remove_empty and name not in busy:
                    await self.api.delete(NODES, None, name)
                else:
                    patch = {"metadata": {"annotations": {BOOKED_FOR: None}}}
                    await self.api.merge_patch(NODES, None, name, patch)
            except ApiError as exc:
                if exc.code != 404:
                    raise

    async def _write(self, request: Obj, status: Obj) -> bool:
        if status == (request.get("status") or {}):
            return True
        new = {**request, "status": status}
        return await ignore_stale(self.api.replace(PROVISIONING_REQUESTS, new, "status"))
