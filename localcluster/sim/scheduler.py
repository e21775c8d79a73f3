"""A binder standing in for kube-scheduler.

Each cycle takes the Pending Pods in priority then age order, filters the Nodes with the
rules in :mod:`.placement`, binds to the least allocated Node that fits, and marks a Pod that
fits nowhere ``PodScheduled=False`` / ``Unschedulable`` with kube-scheduler's message. A new
cycle starts whenever something that could change a decision happens: a Pod arrives or
ends, a Node joins or changes.

Nodes the autoscaler booked for a ProvisioningRequest take only the Pods that consume it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field
from fractions import Fraction

from .. import timestamps
from ..conditions import find, is_true, set_condition
from ..errors import ApiError
from ..objects import Obj
from ..quantity import Resources, add
from .client import NODES, PODS, ignore_stale, key_of
from .controller import Controller
from .jobstatus import is_active
from .placement import node_allocatable, pod_requests, rejections, unschedulable_message

BOOKED_FOR = "localcluster.kadmit.dev/booked-for"
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
BOOKED_REASON = "node(s) were booked for a ProvisioningRequest"
DEFAULT_SCHEDULER = "default-scheduler"
BIND_CONCURRENCY = 16
CYCLE = "cycle"


def booking_of(pod: Obj) -> str | None:
    """``namespace/name`` of the ProvisioningRequest whose capacity the Pod consumes."""
    metadata = pod.get("metadata") or {}
    request = (metadata.get("annotations") or {}).get(CONSUME_ANNOTATION)
    return f"{metadata.get('namespace')}/{request}" if request else None


def node_booking(node: Obj) -> str | None:
    value = ((node.get("metadata") or {}).get("annotations") or {}).get(BOOKED_FOR)
    return str(value) if value else None


def node_is_ready(node: Obj) -> bool:
    return is_true(node.get("status") or {}, "Ready") and not (node.get("metadata") or {}).get(
        "deletionTimestamp"
    )


@dataclass
class NodeUsage:
    requested: Resources = field(default_factory=dict)
    pods: int = 0


def _load(node: Obj, usage: NodeUsage) -> Fraction:
    """The mean share of cpu and memory already requested: lower is emptier (LeastAllocated)."""
    allocatable = node_allocatable(node)
    shares = [
        usage.requested.get(name, Fraction(0)) / allocatable[name]
        for name in ("cpu", "memory")
        if allocatable.get(name)
    ]
    return sum(shares, Fraction(0)) / len(shares) if shares else Fraction(0)


def _pending_order(pod: Obj) -> tuple[int, str, str]:
    metadata = pod.get("metadata") or {}
    priority = int((pod.get("spec") or {}).get("priority") or 0)
    return -priority, str(metadata.get("creationTimestamp") or ""), str(metadata.get("name") or "")


class Scheduler(Controller[str]):
    """Binds Pods whose ``schedulerName`` is ``default-scheduler`` (or unset)."""

    name = "scheduler"

    def __init__(self, scheduler_name: str = DEFAULT_SCHEDULER) -> None:
        super().__init__()
        self.scheduler_name = scheduler_name
        self._assumed: dict[str, tuple[str, Obj]] = {}  # pod uid -> (node, pod) bound but not yet observed
        self._use_binding = True
        self._request_cache: dict[str, Resources] = {}
        self._bound: dict[str, tuple[str, Resources]] = {}  # pod uid -> (node, requests), bound and active
        self._usage: dict[str, NodeUsage] = {}  # per Node: the sum over _bound, kept as Pods change
        self.bindings = 0

    async def setup(self) -> None:
        self.pods = self.watch(PODS, self._on_pod)
        self.nodes = self.watch(NODES, self._on_node)

    def _on_node(self, kind: str, node: Obj, old: Obj | None) -> None:
        self.queue.add(CYCLE)

    def _on_pod(self, kind: str, pod: Obj, old: Obj | None) -> None:
        spec = pod.get("spec") or {}
        uid = (pod.get("metadata") or {}).get("uid", "")
        self._count(uid, None if kind == "DELETED" else pod)
        if spec.get("nodeName") or kind == "DELETED":
            self._assumed.pop(uid, None)
        if kind == "DELETED":
            self._request_cache.pop(uid, None)
        if old is None or kind == "DELETED":
            self.queue.add(CYCLE)
            return
        old_spec = old.get("spec") or {}
        if (
            spec.get("nodeName") != old_spec.get("nodeName")
            or spec.get("schedulingGates") != old_spec.get("schedulingGates")
            or is_active(pod) != is_active(old)
        ):
            self.queue.add(CYCLE)

    def _wants(self, pod: Obj) -> bool:
        spec = pod.get("spec") or {}
        uid = (pod.get("metadata") or {}).get("uid", "")
        return (
            not spec.get("nodeName")
            and (spec.get("schedulerName") or DEFAULT_SCHEDULER) == self.scheduler_name
            and is_active(pod)
            and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
            and uid not in self._assumed
        )

    def _count(self, uid: str, pod: Obj | None) -> None:
        """Keep each Node's use as its Pods change (the informer reports every change, a relist's
        too), instead of summing every bound Pod's requests again in each cycle: kube-scheduler's
        cache of NodeInfo."""
        previous = self._bound.pop(uid, None)
        if previous is not None:
            node_name, requests = previous
            entry = self._usage[node_name]
            add(entry.requested, {name: -amount for name, amount in requests.items()})
            entry.pods -= 1
            if not entry.pods:
                del self._usage[node_name]
        node_name = str(((pod or {}).get("spec") or {}).get("nodeName") or "")
        if pod is not None and node_name and is_active(pod):
            requests = self._requests(pod)
            self._bound[uid] = (node_name, requests)
            entry = self._usage.setdefault(node_name, NodeUsage())
            add(entry.requested, requests)
            entry.pods += 1

    def node_usage(self) -> dict[str, NodeUsage]:
        """Each Node's bound, active Pods (their requests and count), as last observed."""
        return {name: NodeUsage(dict(use.requested), use.pods) for name, use in self._usage.items()}

    async def reconcile(self, key: str) -> None:
        nodes = sorted((n for n in self.nodes.cache.values() if node_is_ready(n)), key=lambda n: key_of(n)[1])
        usage = self.node_usage()
        for assumed_node, assumed_pod in self._assumed.values():
            entry = usage.setdefault(assumed_node, NodeUsage())
            add(entry.requested, self._requests(assumed_pod))
            entry.pods += 1
        pending = sorted((p for p in self.pods.cache.values() if self._wants(p)), key=_pending_order)
        # Decide every Pod in order (each decision sees the ones before it), then write the
        # bindings concurrently, as kube-scheduler's asynchronous binding cycle does.
        writes: list[Awaitable[None]] = []
        for pod in pending:
            node_name, reason, message = self._decide(pod, nodes, usage)
            if node_name is not None:
                self._assumed[str((pod.get("metadata") or {}).get("uid", ""))] = (node_name, pod)
                writes.append(self._bind(pod, node_name))
            else:
                writes.append(self._mark(pod, reason, message))
        limit = asyncio.Semaphore(BIND_CONCURRENCY)

        async def bounded(write: Awaitable[None]) -> None:
            async with limit:
                await write

        await asyncio.gather(*(bounded(w) for w in writes))

    def _decide(self, pod: Obj, nodes: list[Obj], usage: dict[str, NodeUsage]) -> tuple[str | None, str, str]:
        """The Node for ``pod`` (its use is counted at once), or why there is none."""
        spec = pod.get("spec") or {}
        if spec.get("schedulingGates"):
            return None, "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates"
        requests = self._requests(pod)
        booking = booking_of(pod)
        reasons: list[str] = []
        fitting: list[tuple[bool, Fraction, str]] = []
        for node in nodes:
            name = key_of(node)[1]
            node_use = usage.get(name) or NodeUsage()
            booked = node_booking(node)
            if booked is not None and booked != booking:
                reasons.append(BOOKED_REASON)
                continue
            rejected = rejections(spec, requests, node, node_use.requested, node_use.pods)
            if rejected:
                reasons.extend(rejected)
                continue
            # Booked capacity first for the Pods that consume it, then the emptiest Node.
            fitting.append((booked is None, _load(node, node_use), name))
        if not fitting:
            return None, "Unschedulable", unschedulable_message(len(nodes), reasons)
        _, _, node_name = min(fitting)
        entry = usage.setdefault(node_name, NodeUsage())
        add(entry.requested, requests)
        entry.pods += 1
        return node_name, "", ""

    def _requests(self, pod: Obj) -> Resources:
        """A Pod's requests, parsed once: a Pod's resources do not change after creation."""
        uid = str((pod.get("metadata") or {}).get("uid", ""))
        found = self._request_cache.get(uid)
        if found is None:
            found = self._request_cache[uid] = pod_requests(pod.get("spec") or {})
        return found

    async def _bind(self, pod: Obj, node_name: str) -> None:
        namespace, name = key_of(pod)
        metadata = pod.get("metadata") or {}
        uid = str(metadata.get("uid", ""))
        try:
            if self._use_binding:
                binding = {
                    "apiVersion": "v1", "kind": "Binding",
                    "metadata": {"name": name, "namespace": namespace, "uid": uid},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
                }
                try:
                    await self.api.request("POST", PODS.path(namespace, name, "binding"), body=binding)
                except ApiError as exc:
                    if exc.code not in (404, 405) or not await self._exists(namespace, name):
                        raise
                    self._use_binding = False  # a server without pods/binding takes spec.nodeName
            if not self._use_binding:
                bound = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": node_name}}
                await self.api.replace(PODS, bound)
        except Exception as exc:
            # Whatever failed (an error answer, a connection cut, a deadline), the Pod is not known
            # to be bound: forget the assumption, or it would never be scheduled again.
            self._assumed.pop(uid, None)
            if isinstance(exc, ApiError) and exc.code in (404, 409):
                self.queue.add(CYCLE)  # the Pod changed or went away; look again with fresh state
                return
            raise
        self.bindings += 1

    async def _exists(self, namespace: str, name: str) -> bool:
        try:
            await self.api.get(PODS, namespace, name)
        except ApiError:
            return False
        return True

    async def _mark(self, pod: Obj, reason: str, message: str) -> None:
        """Record why the Pod waits, unless it already says so."""
        status = dict(pod.get("status") or {})
        current = find(status, "PodScheduled")
        if current and current.get("status") == "False" and current.get("reason") == reason and (
            current.get("message") == message
        ):
            return
        set_condition(status, "PodScheduled", "False", reason, message, timestamps.now(), probed=True)
        status.setdefault("phase", "Pending")
        await ignore_stale(self.api.replace(PODS, {**pod, "status": status}, "status"))
