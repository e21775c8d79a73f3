"""The queue CLI behind ``kadmit list|describe|stop|resume`` (in the spirit of Kueue's kueuectl).

Everything goes through kadmit's one client against whatever cluster the kubeconfig names;
positions come from the Visibility API (``visibility.kueue.x-k8s.io/v1beta2``) when the
cluster serves it, and are left blank when it does not. The explanations (:func:`explain`) are
computed from the objects alone: the Workload's pod sets, its conditions, its queues' spec and
status, the other ClusterQueues of its cohort.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from kadmit.controller.queue_stats import flavor_amounts
from kadmit.engine import InvalidObject, QuantityError, format_milli, to_milli
from kadmit.engine import parse as engine_parse
from kadmit.engine.engine import Engine
from kadmit.engine.model import STOP_NONE, ClusterQueue, FlavorResource
from kadmit.engine.quota import QuotaNode, add_usage, available, potential_available
from kadmit.kube import ApiError, Client, NotFound, Obj
from kadmit.kube.resources import CLUSTER_QUEUES, COHORTS, LOCAL_QUEUES, NAMESPACES, WORKLOADS, Resource
from kadmit.workload import find_condition, is_true, parse_time

VISIBILITY = "/apis/visibility.kueue.x-k8s.io/v1beta2"
KINDS: dict[str, tuple[str, Resource]] = {
    "clusterqueue": ("clusterqueue", CLUSTER_QUEUES),
    "clusterqueues": ("clusterqueue", CLUSTER_QUEUES),
    "cq": ("clusterqueue", CLUSTER_QUEUES),
    "localqueue": ("localqueue", LOCAL_QUEUES),
    "localqueues": ("localqueue", LOCAL_QUEUES),
    "lq": ("localqueue", LOCAL_QUEUES),
    "workload": ("workload", WORKLOADS),
    "workloads": ("workload", WORKLOADS),
    "wl": ("workload", WORKLOADS),
}


class QueueCommandError(Exception):
    """One line for the user; the command turns it into exit code 1."""


# -- kubeconfig ------------------------------------------------------------------------------


def current_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace kubectl would use: the context's, else ``default`` (in a pod: the pod's)."""
    paths = (
        [kubeconfig] if kubeconfig else [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    )
    if not paths:
        default = Path.home() / ".kube" / "config"
        if default.is_file():
            paths = [str(default)]
        else:
            in_pod = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
            return in_pod.read_text().strip() if in_pod.is_file() else "default"
    current = context
    contexts: dict[str, Any] = {}
    for path in paths:
        try:
            document = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError):
            continue  # the client reports an unusable kubeconfig in its own words
        if not isinstance(document, dict):
            continue
        current = current or document.get("current-context")
        for entry in document.get("contexts") or []:
            if isinstance(entry, dict) and entry.get("name") not in contexts:
                contexts[str(entry.get("name"))] = entry.get("context") or {}
    found = contexts.get(str(current)) or {}
    return str(found.get("namespace") or "default")


# -- small formatting helpers ---------------------------------------------------------------


def age(timestamp: str | None, now: float) -> str:
    """kubectl's short age: 42s, 5m, 3h, 2d (with the next unit below 10 of the larger)."""
    started = parse_time(timestamp)
    if started is None:
        return "<unknown>"
    seconds = max(0, int(now - started))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], out: TextIO) -> None:
    """Columns as kubectl prints them; on a terminal, the last column is cut to fit its width."""
    rows = [list(r) for r in rows]
    if not rows:
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    limit = shutil.get_terminal_size().columns if out.isatty() else None
    for line in [list(headers), *rows]:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(line[:-1])]
        text = "   ".join([*cells, line[-1]]).rstrip()
        if limit is not None and len(text) > limit:
            text = text[: max(limit - 1, 0)] + "…"
        out.write(text + "\n")


def dump(document: Obj, output: str, out: TextIO) -> None:
    if output == "json":
        out.write(json.dumps(document, indent=2) + "\n")
    else:
        out.write(yaml.safe_dump(document, sort_keys=False))


# -- reading the cluster --------------------------------------------------------------------


async def _get(kube: Client, kind: str, resource: Resource, namespace: str | None, name: str) -> Obj:
    try:
        return await kube.get(resource, namespace, name)
    except NotFound:
        where = f' in namespace "{namespace}"' if namespace else ""
        raise QueueCommandError(f'{kind} "{name}" not found{where}') from None


async def pending_positions(kube: Client, namespace: str, local_queue: str) -> dict[str, Obj] | None:
    """The Visibility API's pending workloads of a LocalQueue by name (None: not served here)."""
    path = f"{VISIBILITY}/namespaces/{namespace}/localqueues/{local_queue}/pendingworkloads"
    try:
        summary = await kube.request("GET", path)
    except ApiError:
        return None
    return {str(i["metadata"]["name"]): i for i in summary.get("items") or []}


def workload_status(wl: Obj) -> str:
    """Kueue's ``workload.Status``: finished, admitted, quotaReserved or pending."""
    if is_true(wl, "Finished"):
        return "finished"
    if is_true(wl, "Admitted"):
        return "admitted"
    if is_true(wl, "QuotaReserved"):
        return "quotaReserved"
    return "pending"


def waiting_reason(wl: Obj) -> str:
    """One line: why a pending Workload waits, in the words of its conditions."""
    spec = wl.get("spec") or {}
    if spec.get("active") is False:
        return "stopped (spec.active is false)"
    status = workload_status(wl)
    if status == "quotaReserved":
        states = [
            s for s in (wl.get("status") or {}).get("admissionChecks") or [] if s.get("state") != "Ready"
        ]
        if states:
            return "; ".join(
                f"admission check {s.get('name')}: {s.get('state')} {s.get('message', '')}".strip()
                for s in states
            )
        return "quota reserved, waiting for admission"
    if status != "pending":
        return ""
    for kind in ("QuotaReserved", "Evicted", "Requeued"):
        condition = find_condition(wl, kind)
        if condition is not None and condition.get("status") == "False" and condition.get("message"):
            return str(condition["message"])
    return "waiting to be evaluated"


def owner(wl: Obj) -> str:
    refs = (wl.get("metadata") or {}).get("ownerReferences") or []
    return ", ".join(f"{r.get('kind')}/{r.get('name')}" for r in refs) or "-"


# -- list ------------------------------------------------------------------------------------


def owned_by_matches(wl: Obj, wanted: str) -> bool:
    """kueuectl's ``--for TYPE/NAME``: an owner of that kind (``job``, ``jobs``, ``job.batch``,
    ``jobset``) and name."""
    kind, _, name = wanted.partition("/")
    kind = kind.split(".", 1)[0].lower()
    for ref in (wl.get("metadata") or {}).get("ownerReferences") or []:
        ref_kind = str(ref.get("kind", "")).lower()
        if ref.get("name") == name and kind in (ref_kind, ref_kind + "s"):
            return True
    return False


@dataclass
class Scope:
    """Where and what to list: the namespace (or all), and kubectl's label and field selectors."""

    namespace: str
    all_namespaces: bool
    label_selector: str | None = None
    field_selector: str | None = None

    async def list(self, kube: Client, resource: Resource) -> list[Obj]:
        namespace = self.query_namespace if resource.namespaced else None
        found = await kube.list_all(
            resource, namespace, label_selector=self.label_selector, field_selector=self.field_selector
        )
        return list(found["items"])

    @property
    def query_namespace(self) -> str | None:
        return None if self.all_namespaces else self.namespace


def _render(
    rows: list[dict[str, Any]],
    columns: Sequence[tuple[str, str]],
    scope: Scope | None,
    what: str,
    output: str | None,
    out: TextIO,
) -> None:
    """``rows`` as ``-o json|yaml`` (a List of them) or as a table of ``columns`` (header, key)."""
    if output:
        dump({"apiVersion": "v1", "kind": "List", "items": rows}, output, out)
        return
    if not rows:
        out.write(
            f"No {what} found"
            + (f" in {scope.namespace} namespace" if scope and not scope.all_namespaces else "")
            + ".\n"
        )
        return
    if scope is not None and scope.all_namespaces:
        columns = [("NAMESPACE", "namespace"), *columns]
    cells = ([_cell(row.get(key), upper=header == "STATUS") for header, key in columns] for row in rows)
    table([h for h, _ in columns], cells, out)


def _cell(value: Any, upper: bool = False) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value).upper() if upper else str(value)


COUNT_COLUMNS = [
    ("PENDING", "pendingWorkloads"),
    ("RESERVING", "reservingWorkloads"),
    ("ADMITTED", "admittedWorkloads"),
]
TAIL_COLUMNS = [("STOP POLICY", "stopPolicy"), ("AGE", "age")]


def _counts(status: Mapping[str, Any]) -> dict[str, Any]:
    """A queue's workload counts, as its status says (the ``COUNT_COLUMNS``)."""
    return {key: status.get(key, 0) for _, key in COUNT_COLUMNS}


def _stop_policy_and_age(queue: Obj, now: float) -> dict[str, Any]:
    """A queue's stop policy and age (the ``TAIL_COLUMNS``), and its creation time."""
    created = queue["metadata"].get("creationTimestamp")
    return {
        "stopPolicy": (queue.get("spec") or {}).get("stopPolicy") or STOP_NONE,
        "creationTimestamp": created,
        "age": age(created, now),
    }


async def list_cluster_queues(
    kube: Client, scope: Scope, output: str | None, out: TextIO, now: float, *, active: bool | None = None
) -> None:
    items = await scope.list(kube, CLUSTER_QUEUES)
    rows = []
    for cq in sorted(items, key=lambda o: str(o["metadata"]["name"])):
        spec, status = cq.get("spec") or {}, cq.get("status") or {}
        condition = find_condition(cq, "Active")
        is_active = condition is not None and condition.get("status") == "True"
        if active is not None and is_active != active:
            continue
        rows.append(
            {
                "name": cq["metadata"]["name"],
                "cohort": spec.get("cohortName") or spec.get("cohort") or "",
                **_counts(status),
                "active": is_active,
                **_stop_policy_and_age(cq, now),
            }
        )
    columns = [("NAME", "name"), ("COHORT", "cohort"), *COUNT_COLUMNS, ("ACTIVE", "active"), *TAIL_COLUMNS]
    _render(rows, columns, None, "ClusterQueues", output, out)


async def list_local_queues(kube: Client, scope: Scope, output: str | None, out: TextIO, now: float) -> None:
    items = await scope.list(kube, LOCAL_QUEUES)
    rows = []
    for lq in sorted(
        items, key=lambda o: (str(o["metadata"].get("namespace", "")), str(o["metadata"]["name"]))
    ):
        spec, status = lq.get("spec") or {}, lq.get("status") or {}
        rows.append(
            {
                "namespace": lq["metadata"].get("namespace", ""),
                "name": lq["metadata"]["name"],
                "clusterQueue": spec.get("clusterQueue", ""),
                **_counts(status),
                **_stop_policy_and_age(lq, now),
            }
        )
    columns = [("NAME", "name"), ("CLUSTERQUEUE", "clusterQueue"), *COUNT_COLUMNS, *TAIL_COLUMNS]
    _render(rows, columns, scope, "LocalQueues", output, out)


async def list_workloads(
    kube: Client,
    scope: Scope,
    output: str | None,
    out: TextIO,
    now: float,
    *,
    cluster_queue: str | None = None,
    local_queue: str | None = None,
    statuses: Sequence[str] = (),
    owned_by: str | None = None,
) -> None:
    """Workloads with their status and, for pending ones, their position (in the LocalQueue, and
    in the ClusterQueue in brackets, from 0 as the Visibility API counts) and why they wait."""
    items = await scope.list(kube, WORKLOADS)
    queues = {
        (q["metadata"]["namespace"], q["metadata"]["name"]): str(
            (q.get("spec") or {}).get("clusterQueue", "")
        )
        for q in (await kube.list_all(LOCAL_QUEUES, scope.query_namespace))["items"]
    }

    def cq_of(wl: Obj) -> str:
        admission = (wl.get("status") or {}).get("admission") or {}
        if admission.get("clusterQueue"):
            return str(admission["clusterQueue"])
        return queues.get((wl["metadata"]["namespace"], str((wl.get("spec") or {}).get("queueName", ""))), "")

    wanted = {s.lower() for s in statuses if s.lower() != "all"}
    selected = [
        wl
        for wl in items
        if (cluster_queue is None or cq_of(wl) == cluster_queue)
        and (local_queue is None or (wl.get("spec") or {}).get("queueName") == local_queue)
        and (not wanted or workload_status(wl).lower() in wanted)
        and (owned_by is None or owned_by_matches(wl, owned_by))
    ]
    selected.sort(
        key=lambda o: (
            str(o["metadata"]["namespace"]),
            str(o["metadata"].get("creationTimestamp") or ""),
            str(o["metadata"]["name"]),
        )
    )
    positions: dict[tuple[str, str], dict[str, Obj] | None] = {}
    rows = []
    for wl in selected:
        meta, spec = wl["metadata"], wl.get("spec") or {}
        key = (str(meta["namespace"]), str(spec.get("queueName", "")))
        status = workload_status(wl)
        found: Obj | None = None
        if status == "pending" and key[1]:
            if key not in positions:
                positions[key] = await pending_positions(kube, *key)
            found = (positions[key] or {}).get(str(meta["name"]))
        rows.append(
            {
                "namespace": meta["namespace"],
                "name": meta["name"],
                "job": owner(wl),
                "localQueue": spec.get("queueName", ""),
                "clusterQueue": cq_of(wl),
                "status": status,
                "positionInLocalQueue": None if found is None else found["positionInLocalQueue"],
                "positionInClusterQueue": None if found is None else found["positionInClusterQueue"],
                "position": ""
                if found is None
                else f"{found['positionInLocalQueue']} ({found['positionInClusterQueue']})",
                "reason": waiting_reason(wl),
                "creationTimestamp": meta.get("creationTimestamp"),
                "age": age(meta.get("creationTimestamp"), now),
            }
        )
    if output:
        for row in rows:
            del row["position"]
    columns = [
        ("NAME", "name"),
        ("JOB", "job"),
        ("LOCALQUEUE", "localQueue"),
        ("CLUSTERQUEUE", "clusterQueue"),
        ("STATUS", "status"),
        ("POSITION", "position"),
        ("AGE", "age"),
        ("REASON", "reason"),
    ]
    _render(rows, columns, scope, "Workloads", output, out)


# -- describe --------------------------------------------------------------------------------


@dataclass
class FlavorGap:
    """What one flavor lacks for one resource of the Workload."""

    flavor: str
    resource: str
    requested: int  # milli-units, all pod sets together
    nominal: int
    used: int  # reserved in the ClusterQueue now
    borrow: int | None  # what the cohort could lend it now (None: no cohort)
    cohort: str | None
    most: int  # the most the ClusterQueue could ever hold of it (nominal + borrowing)

    def sentence(self) -> str:
        r = self.resource
        free = max(0, self.nominal - self.used)
        missing = self.requested - free

        def show(value: int) -> str:
            return format_milli(r, value)

        if self.requested > self.most:
            limit = f"{show(self.most)} {r} (its nominal {show(self.nominal)}"
            if self.cohort is not None:
                limit += f" and at most {show(self.most - self.nominal)} borrowed from cohort {self.cohort}"
            asks = f"it asks {show(self.requested)} {r}"
            return f"nothing, as the quotas stand: {asks}, flavor {self.flavor} can give it {limit})"
        if missing <= 0:
            return f"fits in flavor {self.flavor}: {show(free)} {r} of {show(self.nominal)} free"
        text = f"needs {show(missing)} more {r} in flavor {self.flavor}"
        if self.cohort is None:
            return text + (
                f" ({show(self.used)} of {show(self.nominal)} in use, no cohort to borrow from): "
                "it waits for running workloads to free it"
            )
        if not self.borrow:
            return (
                text
                + f"; cohort {self.cohort} has none to lend now: it waits for running workloads to free it"
            )
        if self.borrow >= missing:
            return text + f"; cohort {self.cohort} could lend {show(self.borrow)} (enough, by borrowing)"
        return text + (
            f"; cohort {self.cohort} could lend {show(self.borrow)}, "
            f"{show(missing - self.borrow)} short until running workloads free it"
        )


@dataclass
class Explanation:
    namespace: str
    name: str
    status: str
    local_queue: str
    cluster_queue: str | None
    priority: int
    requests: dict[str, int]
    waiting_for: list[str] = field(default_factory=list)
    would_let_in: list[str] = field(default_factory=list)
    job: str = "-"
    position: Obj | None = None
    pending_in_cluster_queue: int | None = None

    def document(self) -> Obj:
        out: Obj = {
            "namespace": self.namespace,
            "name": self.name,
            "status": self.status,
            "job": self.job,
            "localQueue": self.local_queue,
            "clusterQueue": self.cluster_queue,
            "priority": self.priority,
            "requests": {r: format_milli(r, v) for r, v in self.requests.items()},
            "waitingFor": self.waiting_for,
            "wouldLetIn": self.would_let_in,
        }
        if self.position is not None:
            out["positionInClusterQueue"] = self.position["positionInClusterQueue"]
            out["positionInLocalQueue"] = self.position["positionInLocalQueue"]
        return out


def _usage(cq: Obj) -> dict[FlavorResource, int]:
    reserved = flavor_amounts((cq.get("status") or {}).get("flavorsReservation") or [], "total")
    return {FlavorResource(*fr): amount for fr, amount in reserved.items()}


def _parsed(cq: Obj) -> ClusterQueue | None:
    try:
        return engine_parse.cluster_queue(cq)
    except InvalidObject:
        return None


def quota_tree(cluster_queues: Sequence[Obj], cohorts: Sequence[Obj] = ()) -> dict[str, QuotaNode]:
    """The engine's cohort tree (Cohorts' own quotas, nested cohorts, lending and borrowing limits)
    over these objects, each ClusterQueue charged with the reservations its status reports:
    per ClusterQueue, its node. Objects the engine cannot read are left out, as it leaves them."""
    engine = Engine()
    for kind, upsert, objects in (
        ("Cohort", engine.upsert_cohort, cohorts),
        ("ClusterQueue", engine.upsert_cluster_queue, cluster_queues),
    ):
        for obj in objects:
            try:
                upsert({**obj, "kind": kind})
            except InvalidObject:
                continue
    nodes = {node.name: node for node in engine.nodes() if not node.is_cohort}
    for obj in cluster_queues:
        node = nodes.get(str((obj.get("metadata") or {}).get("name", "")))
        if node is not None:
            add_usage(node, _usage(obj))
    return nodes


def flavor_gaps(
    requests: Mapping[str, int], cq: Obj, cluster_queues: Sequence[Obj], cohorts: Sequence[Obj] = ()
) -> list[FlavorGap]:
    """For each requested resource, each flavor of the group covering it: what is missing, and
    what its cohort tree could lend now (the engine's ``available`` on the tree of
    ``cluster_queues`` and ``cohorts`` less the ClusterQueue's own free quota) and could ever give
    it (``potential_available``)."""
    model = _parsed(cq)
    if model is None:
        return []
    name = str((cq.get("metadata") or {}).get("name", ""))
    others = [c for c in cluster_queues if (c.get("metadata") or {}).get("name") != name]
    node = quota_tree([cq, *others], cohorts).get(name)
    if node is None:
        return []
    gaps = []
    for resource, requested in requests.items():
        group = next((g for g in model.resource_groups if resource in g.covered_resources), None)
        if group is None:
            continue
        for flavor in group.flavors:
            quota = next((q for q in flavor.resources if q.name == resource), None)
            if quota is None:
                continue
            fr = FlavorResource(flavor.name, resource)
            used = node.usage.get(fr, 0)
            borrow: int | None = None
            if node.parent is not None:
                borrow = max(0, available(node, fr) - max(0, quota.nominal - used))
            most = potential_available(node, fr)
            gaps.append(
                FlavorGap(flavor.name, resource, requested, quota.nominal, used, borrow, model.cohort, most)
            )
    return gaps


def total_requests(wl: Obj) -> dict[str, int]:
    """What all pod sets ask together (milli-units): as the scheduler last counted them for a
    pending Workload (``status.resourceRequests``, with LimitRange defaults, RuntimeClass
    overhead and the Configuration's transformations), else as the engine reads the spec."""
    totals: dict[str, int] = {}
    counted = (wl.get("status") or {}).get("resourceRequests")
    if counted:
        try:
            for pod_set in counted:
                resources = pod_set.get("resources") if isinstance(pod_set, dict) else None
                for resource, value in (resources if isinstance(resources, dict) else {}).items():
                    totals[resource] = totals.get(resource, 0) + to_milli(resource, value)
            return totals
        except QuantityError:
            totals = {}  # not as the scheduler writes it: read the spec
    parsed = engine_parse.workload(wl)
    for pod_set in parsed.pod_sets:
        for resource, value in pod_set.requests.items():
            totals[resource] = totals.get(resource, 0) + value * pod_set.count
    return totals


async def explain(kube: Client, namespace: str, name: str) -> Explanation:
    wl = await _get(kube, "workload", WORKLOADS, namespace, name)
    spec, status = wl.get("spec") or {}, wl.get("status") or {}
    lq_name = str(spec.get("queueName", ""))
    try:
        requests = total_requests(wl)
    except InvalidObject as exc:
        raise QueueCommandError(f'workload "{name}" cannot be read: {exc}') from None
    state = workload_status(wl)
    admission = status.get("admission") or {}
    explanation = Explanation(
        namespace,
        name,
        state,
        lq_name,
        admission.get("clusterQueue"),
        int(spec.get("priority") or 0),
        requests,
    )
    explanation.job = owner(wl)
    waits, helps = explanation.waiting_for, explanation.would_let_in
    if state == "finished":
        condition = find_condition(wl, "Finished") or {}
        waits.append(f"nothing: it finished ({condition.get('reason', '')}: {condition.get('message', '')})")
        return explanation
    if spec.get("active") is False:
        waits.append("it is stopped (spec.active is false)")
        helps.append(f"kadmit resume workload {name} -n {namespace}")
    if state == "admitted":
        flavors = [
            f"{p.get('name')}: {', '.join(f'{r}={f}' for r, f in (p.get('flavors') or {}).items())}"
            for p in admission.get("podSetAssignments") or []
        ]
        waits.append(
            f"nothing: admitted to ClusterQueue {admission.get('clusterQueue')} ({'; '.join(flavors)})"
        )
        return explanation
    if state == "quotaReserved":
        waits.append(waiting_reason(wl))
        helps.append("the admission checks above becoming Ready")
        return explanation
    lq = await kube.get_or_none(LOCAL_QUEUES, namespace, lq_name) if lq_name else None
    if lq is None:
        waits.append(
            f'its LocalQueue "{lq_name}" does not exist in namespace {namespace}'
            if lq_name
            else "it names no LocalQueue (spec.queueName is empty)"
        )
        helps.append("a LocalQueue of that name in its namespace")
        return explanation
    lq_spec = lq.get("spec") or {}
    if (lq_spec.get("stopPolicy") or STOP_NONE) != STOP_NONE:
        waits.append(f"LocalQueue {lq_name} is stopped (stopPolicy {lq_spec['stopPolicy']})")
        helps.append(f"kadmit resume localqueue {lq_name} -n {namespace}")
    cq_name = str(lq_spec.get("clusterQueue", ""))
    explanation.cluster_queue = cq_name
    cq = await kube.get_or_none(CLUSTER_QUEUES, None, cq_name)
    if cq is None:
        waits.append(f'ClusterQueue "{cq_name}" (of LocalQueue {lq_name}) does not exist')
        helps.append(f"a ClusterQueue named {cq_name}")
        return explanation
    cq_spec = cq.get("spec") or {}
    explanation.pending_in_cluster_queue = int((cq.get("status") or {}).get("pendingWorkloads") or 0)
    if (cq_spec.get("stopPolicy") or STOP_NONE) != STOP_NONE:
        waits.append(f"ClusterQueue {cq_name} is stopped (stopPolicy {cq_spec['stopPolicy']})")
        helps.append(f"kadmit resume clusterqueue {cq_name}")
    active = find_condition(cq, "Active")
    stopped = (cq_spec.get("stopPolicy") or STOP_NONE) != STOP_NONE
    if active is not None and active.get("status") == "False" and not stopped:
        waits.append(f"ClusterQueue {cq_name} is inactive: {active.get('message', active.get('reason', ''))}")
    model = _parsed(cq)
    ns = await kube.get_or_none(NAMESPACES, None, namespace)
    if model is not None and ns is not None and model.namespace_selector is not None:
        labels = (ns.get("metadata") or {}).get("labels") or {}
        if not model.namespace_selector.matches(labels):
            waits.append(f"ClusterQueue {cq_name}'s namespaceSelector does not match namespace {namespace}")
            helps.append(f"a namespaceSelector on ClusterQueue {cq_name} that selects namespace {namespace}")
    explanation.position = (await pending_positions(kube, namespace, lq_name) or {}).get(name)
    reason = waiting_reason(wl)
    if reason:
        waits.append(reason)
    cluster_queues: list[Obj] = []
    cohorts: list[Obj] = []
    if model is not None and model.cohort:  # the whole forest: the cohort may hang in a larger tree
        cluster_queues = (await kube.list_all(CLUSTER_QUEUES))["items"]
        try:
            cohorts = (await kube.list_all(COHORTS))["items"]
        except NotFound:  # a cluster with an older Kueue API serves no Cohorts
            cohorts = []
    gaps = flavor_gaps(requests, cq, cluster_queues, cohorts)
    short = [g for g in gaps if g.requested > max(0, g.nominal - g.used)]
    by_flavor: dict[str, list[FlavorGap]] = {}
    for gap in gaps:
        by_flavor.setdefault(gap.flavor, []).append(gap)
    for flavor_gaps_ in by_flavor.values():
        missing = [g for g in flavor_gaps_ if g in short]
        if missing:
            helps.append("; and ".join(g.sentence() for g in missing))
    if gaps and not short and not helps and explanation.position is not None:
        helps.append(
            f"its turn: {explanation.position['positionInClusterQueue']} workloads are ahead of it "
            f"in ClusterQueue {cq_name}"
        )
    return explanation


def render_explanation(explanation: Explanation, out: TextIO) -> None:
    def line(label: str, value: str) -> None:
        out.write(f"{label + ':':<22}{value}\n")

    line("Name", explanation.name)
    line("Namespace", explanation.namespace)
    line("Job", explanation.job)
    queue = f"LocalQueue {explanation.local_queue or '-'}"
    if explanation.cluster_queue:
        queue += f" -> ClusterQueue {explanation.cluster_queue}"
    line("Queue", queue)
    line("Priority", str(explanation.priority))
    line("Requests", ", ".join(f"{r} {format_milli(r, v)}" for r, v in explanation.requests.items()) or "-")
    status = explanation.status.upper()
    if explanation.position is not None:
        ahead_cq = explanation.position["positionInClusterQueue"]
        ahead_lq = explanation.position["positionInLocalQueue"]
        total = explanation.pending_in_cluster_queue
        status += (
            f": {ahead_cq} pending ahead of it in ClusterQueue {explanation.cluster_queue}"
            + (f" (of {total})" if total is not None else "")
            + f", {ahead_lq} in LocalQueue {explanation.local_queue}"
        )
    line("Status", status)
    out.write("Waiting for:\n")
    for item in explanation.waiting_for or ["-"]:
        out.write(f"  {item}\n")
    if explanation.would_let_in:
        out.write("What would let it in:\n")
        for item in explanation.would_let_in:
            out.write(f"  {item}\n")


async def describe_workload(kube: Client, namespace: str, name: str, output: str | None, out: TextIO) -> None:
    explanation = await explain(kube, namespace, name)
    if output:
        dump(explanation.document(), output, out)
        return
    render_explanation(explanation, out)


# -- stop / resume ---------------------------------------------------------------------------


async def set_stopped(
    kube: Client, kind: str, namespace: str | None, name: str, stop: bool, keep_running: bool, out: TextIO
) -> None:
    """kueuectl's semantics: a queue's ``spec.stopPolicy`` (HoldAndDrain, or Hold with
    ``--keep-already-running``; None to resume), a Workload's ``spec.active``."""
    _, resource = KINDS[kind]
    await _get(kube, kind, resource, namespace if resource.namespaced else None, name)
    if kind == "workload":
        patch: Obj = {"spec": {"active": not stop}}
    else:
        patch = {"spec": {"stopPolicy": ("Hold" if keep_running else "HoldAndDrain") if stop else "None"}}
    await kube.patch(resource, namespace if resource.namespaced else None, name, patch)
    out.write(f"{kind}.kueue.x-k8s.io/{name} {'stopped' if stop else 'resumed'}\n")


def now() -> float:
    return time.time()


def stdout() -> TextIO:
    return sys.stdout
