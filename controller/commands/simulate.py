"""``kadmit simulate FILE...``: Kueue YAML in, what the engine would admit out.

Loads ResourceFlavors, ClusterQueues, Cohorts, LocalQueues, WorkloadPriorityClasses,
AdmissionChecks, Namespaces, LimitRanges, RuntimeClasses, PriorityClasses, Workloads and batch/v1
Jobs (turned into the Workloads kadmit's job reconciler would write), runs the engine until
nothing changes — preempted jobs stop at once — and prints one line per workload: admitted with
its flavors, or why it waits.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kadmit.controller.cli import CommandError, add_command

if TYPE_CHECKING:  # imported where they run, so that ``kadmit --help`` stays light
    from kadmit.engine import Engine

ENGINE_KINDS = (
    "ResourceFlavor",
    "ClusterQueue",
    "Cohort",
    "LocalQueue",
    "WorkloadPriorityClass",
    "AdmissionCheck",
)
IGNORED_KUEUE_KINDS = ("ProvisioningRequestConfig", "MultiKueueConfig", "MultiKueueCluster", "Topology")
IGNORED_KINDS = (
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "ResourceQuota",
    "Service",
    "Deployment",
    "Node",
)
"""Kubernetes kinds that may sit beside Kueue objects in a manifest and do not affect admission."""
BASE_TIME = 1767225600.0  # 2026-01-01T00:00:00Z: creation time of objects that carry none
MAX_ROUNDS = 10_000


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers, "simulate", run,
        help="run the admission engine over Kueue YAML and show what would be admitted",
        description=__doc__,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="YAML files ('-' reads standard input)")
    parser.add_argument("--output", "-o", choices=("text", "json"), default="text", help="output format")
    parser.add_argument(
        "--checks-ready",
        action="store_true",
        help="treat every AdmissionCheck as Active and every check as Ready (no check controllers run here)",
    )
    parser.add_argument(
        "--fair-sharing",
        action="store_true",
        help="schedule as with the Configuration's fairSharing block (default preemption strategies)",
    )


@dataclass
class _Document:
    source: str
    index: int
    obj: Mapping[str, Any]

    @property
    def where(self) -> str:
        return f"{self.source}: document {self.index + 1}"


@dataclass
class _Loaded:
    setup: list[_Document] = field(default_factory=list)
    workloads: list[_Document] = field(default_factory=list)
    jobs: list[_Document] = field(default_factory=list)
    priority_classes: list[Mapping[str, Any]] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


def _documents(files: list[str]) -> Iterator[_Document]:
    """The objects of ``files``, read as strictly as the API server reads them: a duplicate key,
    an unknown field or a wrong type is an error naming the file, the line and the field."""
    from kadmit.controller import strict

    for name in files:
        try:
            docs = strict.read_documents(name)
        except strict.StrictError as exc:
            raise CommandError(f"{name}:{exc.line}: {exc.message}") from None
        except strict.ReadError as exc:
            raise CommandError(f"{name}: {exc}") from None
        for index, document in enumerate(docs):
            doc = document.obj
            if not isinstance(doc, Mapping):
                raise CommandError(
                    f"{name}:{document.line}: document {index + 1}: not a Kubernetes object (a mapping)"
                )
            if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
                for position, item in enumerate(doc["items"]):
                    if not isinstance(item, Mapping):
                        raise CommandError(f"{name}: document {index + 1}: List item is not an object")
                    _check(name, document, ("items", position), item)
                    yield _Document(name, index, item)
                continue
            _check(name, document, (), doc)
            yield _Document(name, index, doc)


def _check(name: str, document: Any, at: tuple[str | int, ...], obj: Mapping[str, Any]) -> None:
    """An object its CRD's schema refuses is an error: ``FILE:LINE: Kind "name": field: why``."""
    from kadmit.controller import strict

    schema = strict.schema_for(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if schema is None:
        return
    found = list(strict.errors(obj, schema))
    if not found:
        return
    path, why = found[0]
    line = document.line_of((*at, *path))
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    who = f'{obj.get("kind")} "{meta.get("name") or meta.get("generateName") or "?"}"'
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    raise CommandError(f"{name}:{line}: {who}: {why}{more}")


def _classify(files: list[str]) -> _Loaded:
    loaded = _Loaded()
    for doc in _documents(files):
        kind = doc.obj.get("kind")
        api = str(doc.obj.get("apiVersion", ""))
        if not isinstance(kind, str) or not kind:
            raise CommandError(f"{doc.where}: missing kind")
        if api.startswith("kueue.x-k8s.io/") and kind in ENGINE_KINDS:
            loaded.setup.append(doc)
        elif api.startswith("kueue.x-k8s.io/") and kind == "Workload":
            loaded.workloads.append(doc)
        elif api.startswith("kueue.x-k8s.io/") and kind in IGNORED_KUEUE_KINDS:
            loaded.ignored.append(kind)
        elif (api, kind) in (("v1", "Namespace"), ("v1", "LimitRange"), ("node.k8s.io/v1", "RuntimeClass")):
            loaded.setup.append(doc)
        elif api == "batch/v1" and kind == "Job":
            loaded.jobs.append(doc)
        elif api == "scheduling.k8s.io/v1" and kind == "PriorityClass":
            loaded.priority_classes.append(doc.obj)  # a Job's pods may take their priority from it
        elif kind in IGNORED_KINDS:
            loaded.ignored.append(kind)
        else:
            raise CommandError(f"{doc.where}: {api or '?'} {kind} is not something simulate understands")
    return loaded


def _named_job(doc: _Document, ordinal: int) -> dict[str, Any]:
    """The Job with a deterministic name (for generateName), UID and creation time."""
    from kadmit.engine.timestamps import format_time

    job: dict[str, Any] = json.loads(json.dumps(doc.obj))
    meta = job.setdefault("metadata", {})
    if not meta.get("name"):
        prefix = meta.get("generateName")
        if not prefix:
            raise CommandError(f"{doc.where}: Job has neither metadata.name nor metadata.generateName")
        digest = hashlib.sha1(f"{doc.source}\n{doc.index}".encode(), usedforsecurity=False).hexdigest()
        meta["name"] = f"{prefix}{digest[:5]}"
    meta.setdefault("namespace", "default")
    meta.setdefault("uid", f"simulated-{meta['namespace']}-{meta['name']}")
    meta.setdefault("creationTimestamp", format_time(BASE_TIME + ordinal))
    return job


@dataclass(frozen=True)
class JobWorkload:
    """A Workload simulate made from a Job, and that Job's name."""

    job: str
    workload: dict[str, Any]


def load(engine: Engine, files: list[str], checks_ready: bool = False) -> dict[tuple[str, str], JobWorkload]:
    """Feed the engine the objects in ``files``; returns the Workloads made from Jobs by key."""
    return _load(engine, _classify(files), checks_ready)


def _load(engine: Engine, loaded: _Loaded, checks_ready: bool) -> dict[tuple[str, str], JobWorkload]:
    from kadmit.controller.jobs.batch_job import JobConversionError, workload_for_job
    from kadmit.controller.jobs.integration import QUEUE_NAME_LABEL
    from kadmit.engine import InvalidObject
    from kadmit.engine.timestamps import format_time

    for doc in loaded.setup:
        obj: Mapping[str, Any] = doc.obj
        if checks_ready and obj.get("kind") == "AdmissionCheck":
            obj = {
                **obj,
                "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active"}]},
            }
        try:
            engine.upsert(obj)
        except InvalidObject as exc:
            raise CommandError(f"{doc.where}: {exc}") from None
    jobs: dict[tuple[str, str], JobWorkload] = {}
    ordinal = 0
    for doc in loaded.workloads + loaded.jobs:
        ordinal += 1
        if doc in loaded.jobs:
            job = _named_job(doc, ordinal)
            if not (job["metadata"].get("labels") or {}).get(QUEUE_NAME_LABEL):
                continue  # not managed by Kueue (manageJobsWithoutQueueName is false by default)
            try:
                workload = workload_for_job(job, engine.priority_classes, loaded.priority_classes)
            except JobConversionError as exc:
                raise CommandError(f"{doc.where}: Job {job['metadata']['name']!r}: {exc}") from None
            # The API server stamps a new Workload; the engine queues by that time.
            workload["metadata"]["creationTimestamp"] = job["metadata"]["creationTimestamp"]
            key = (workload["metadata"]["namespace"], workload["metadata"]["name"])
            jobs[key] = JobWorkload(job["metadata"]["name"], workload)
        else:
            workload = json.loads(json.dumps(doc.obj))
            meta = workload.setdefault("metadata", {})
            meta.setdefault("namespace", "default")
            meta.setdefault("creationTimestamp", format_time(BASE_TIME + ordinal))
        try:
            engine.upsert_workload(workload)
        except InvalidObject as exc:
            raise CommandError(f"{doc.where}: {exc}") from None
    return jobs


def settle(engine: Engine, checks_ready: bool, start: float = BASE_TIME + 3600) -> None:
    """Run cycles until nothing changes; preempted workloads stop and requeue at once."""
    now = start
    for _ in range(MAX_ROUNDS):
        decisions = engine.schedule(now)
        for preemption in decisions.preemptions:
            engine.release(*preemption.victim)
        if checks_ready:
            for reservation in decisions.reservations:
                if reservation.admission_checks:
                    states = [
                        {"name": n, "state": "Ready", "message": "simulated"}
                        for n in reservation.admission_checks
                    ]
                    engine.set_check_states(*reservation.workload, states)
        if not (decisions.reservations or decisions.preemptions or decisions.admitted or decisions.requeues):
            return
        now += 1
    raise CommandError(f"the simulation did not settle within {MAX_ROUNDS} cycles")


def _report(engine: Engine, jobs: Mapping[tuple[str, str], JobWorkload]) -> list[dict[str, Any]]:
    rows = []
    for namespace, name in engine.workload_keys():
        status = engine.status(namespace, name)
        row: dict[str, Any] = {
            "namespace": namespace,
            "name": name,
            "state": status.state,
            "clusterQueue": status.cluster_queue,
        }
        if status.borrowing:
            row["borrowing"] = True
        if (namespace, name) in jobs:
            row["job"] = jobs[(namespace, name)].job
        if status.flavors:
            wanted = engine.requested_counts(namespace, name)
            row["podSets"] = [
                {
                    "name": ps,
                    "count": status.counts.get(ps, 0),
                    "requestedCount": wanted.get(ps, 0),
                    "flavors": flavors,
                }
                for ps, flavors in status.flavors.items()
            ]
        if status.reason:
            row["reason"] = status.reason
            row["message"] = status.message
            if status.cluster_queue is not None:
                active, cq_reason, cq_message = engine.cluster_queue_active(status.cluster_queue)
                if not active:
                    row["clusterQueueInactive"] = {"reason": cq_reason, "message": cq_message}
        rows.append(row)
    return rows


def _text_line(row: Mapping[str, Any]) -> str:
    who = f"{row['namespace']}/{row['name']}"
    if "job" in row:
        who += f" (job {row['job']})"
    if row["state"] in ("Admitted", "QuotaReserved", "Evicted"):
        parts = []
        for ps in row.get("podSets", []):
            by_flavor: dict[str, list[str]] = {}
            for resource, flavor in sorted(ps["flavors"].items()):
                by_flavor.setdefault(flavor, []).append(resource)
            where = "; ".join(f"{f} ({', '.join(rs)})" for f, rs in by_flavor.items()) or "no flavor"
            pods = f"{ps['count']} pods"
            if ps["count"] != ps["requestedCount"]:
                pods = f"{ps['count']} of {ps['requestedCount']} pods (partial admission)"
            parts.append(f"{ps['name']}: {pods} on {where}")
        state = {"QuotaReserved": "QuotaReserved, waiting for admission checks"}.get(
            row["state"], row["state"]
        )
        borrowing = " (borrowing)" if row.get("borrowing") else ""
        return f"{who}: {state} in {row['clusterQueue']}{borrowing}: {', '.join(parts)}"
    line = f"{who}: {row['state']}: {row.get('reason', '')}: {row.get('message', '')}"
    inactive = row.get("clusterQueueInactive")
    if inactive:
        line += f" ({inactive['reason']}: {inactive['message']})"
    return line


def run(args: argparse.Namespace) -> int:
    from kadmit.engine import Engine, UnsupportedConfiguration

    loaded = _classify(list(args.files))
    try:
        engine = Engine(fair_sharing=args.fair_sharing)
    except UnsupportedConfiguration as exc:
        raise CommandError(str(exc)) from None
    jobs = _load(engine, loaded, args.checks_ready)
    settle(engine, args.checks_ready)
    rows = _report(engine, jobs)
    if args.output == "json":
        print(json.dumps({"workloads": rows, "ignoredKinds": sorted(set(loaded.ignored))}, indent=2))
    else:
        if not rows:
            print("no workloads (add Workloads or Jobs with the kueue.x-k8s.io/queue-name label)")
        for row in rows:
            print(_text_line(row))
    return 0
