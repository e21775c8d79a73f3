"""Members ⇄ Workload for composable kinds (Kueue's ``ReconcileGenericJob`` over a ``ComposableJob``).

A composable kind (plain Pods and what rides on pod groups) has one Workload for a set of
objects: a member alone, or every member sharing a group name. Members are gated rather than
suspended, start one by one as their pod set's info is merged in and the gate removed, and stop
by being deleted; a finalizer the webhook put on each member keeps it visible until kadmit has
seen how it ended. The steps are the job reconciler's (contract §4.5) in the same order: keep
exactly one matching Workload, finish it, stop when evicted and give the quota back once nothing
runs, start once admitted, stop when running unadmitted. Nothing here knows a kind: what a
member is, which pod set it runs in and how it is started or stopped come from the
:class:`~kadmit.controller.jobs.integration.ComposableIntegration`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

from kadmit import workload as ws
from kadmit.checks.multikueue_remote import CONTROLLER_NAME as MULTIKUEUE_CONTROLLER
from kadmit.controller.job_reconciler import WORKERS, IntegrationContext, IntegrationReconciler
from kadmit.controller.jobs.construct import (
    FINALIZER,
    JOB_UID_LABEL,
    PriorityClassNotFound,
    construct_workload_for,
    resolve_priority,
)
from kadmit.controller.jobs.integration import ComposableIntegration
from kadmit.controller.jobs.podtemplate import (
    FlavorNotFound,
    PodSetMergeError,
    pod_set_infos,
    valid_label_value,
)
from kadmit.controller.workload_reconciler import remove_finalizer
from kadmit.engine.parse import label_selector
from kadmit.kube import ApiError, Obj
from kadmit.kube.informer import Informer
from kadmit.kube.objects import (
    CONTROLLER_INDEX,
    REFERENCE_INDEX,
    controller_key,
    controller_of,
    reference_uids,
)
from kadmit.kube.resources import ADMISSION_CHECKS, WORKLOADS
from kadmit.kube.writes import replaced_by, update, update_status, update_unless_gone, without_finalizer
from kadmit.webhook.objects import metadata_of as _meta

logger = logging.getLogger(__name__)

GROUP_PREFIX = "group/"  # a key naming a group, not a member (no object name holds a "/")
GROUP_INDEX = "group-name"
IS_GROUP_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/is-group-workload"
WAITING_FOR_REPLACEMENT_PODS = "WaitingForReplacementPods"
TERMINATION_TARGET = "TerminationTarget"  # the Pod condition saying who stopped it, and why
RETRY_DELAY = 0.5


def _owner_reference(integration: ComposableIntegration, member: Obj, controller: bool) -> Obj:
    ref: Obj = {
        "apiVersion": integration.api_version,
        "kind": integration.kind,
        "name": _meta(member)["name"],
        "uid": _meta(member).get("uid", ""),
    }
    if controller:
        ref.update(controller=True, blockOwnerDeletion=True)
    return ref


class GroupReconciler(IntegrationReconciler):
    """Keeps the members of one composable integration and their Workloads in step."""

    def __init__(
        self,
        integration: ComposableIntegration,
        members: Informer,
        context: IntegrationContext,
        *,
        workers: int = WORKERS,
    ) -> None:
        super().__init__(integration.kind, context, workers)
        self.integration = integration
        self.members = self.watch(members, self._on_member)
        members.add_index(GROUP_INDEX, self._group_index)
        self.caches.workloads.add_index(REFERENCE_INDEX, reference_uids)
        self.watch(self.caches.workloads, self._on_workload)

    def _group_index(self, member: Obj) -> list[str]:
        group = self.integration.group_of(member)
        return [f"{_meta(member).get('namespace', '')}/{group}"] if group else []

    def key_of(self, member: Obj) -> tuple[str, str]:
        group = self.integration.group_of(member)
        namespace = str(_meta(member).get("namespace", ""))
        return namespace, (GROUP_PREFIX + group) if group else str(_meta(member)["name"])

    # -- events

    def _on_member(self, event: str, member: Obj, old: Obj | None) -> None:
        self.queue.add(self.key_of(member))

    def _on_workload(self, event: str, workload: Obj, old: Obj | None) -> None:
        meta = _meta(workload)
        namespace = str(meta.get("namespace", ""))
        if (meta.get("annotations") or {}).get(IS_GROUP_WORKLOAD_ANNOTATION) == "true":
            self.queue.add((namespace, GROUP_PREFIX + meta["name"]))
            return
        member = self._controlling_member(workload)
        if member is not None:
            self.queue.add((namespace, member))

    def _controlling_member(self, workload: Obj) -> str | None:
        """The name of the member (of this integration's kind) that controls ``workload``, if one does."""
        ref = controller_of(workload)
        if (
            ref is not None
            and ref.get("kind") == self.integration.kind
            and str(ref.get("apiVersion", "")) == self.integration.api_version
        ):
            return str(ref["name"])
        return None

    def initial_keys(self) -> list[tuple[str, str]]:
        return sorted({self.key_of(m) for m in self.members.list()})

    # -- the reconcile

    def _load(self, namespace: str, name: str) -> tuple[str | None, list[Obj]]:
        if name.startswith(GROUP_PREFIX):
            group = name[len(GROUP_PREFIX) :]
            found = self.members.by_index(GROUP_INDEX, f"{namespace}/{group}")
            found.sort(key=lambda m: (str(_meta(m).get("creationTimestamp") or ""), _meta(m)["name"]))
            return group, found
        member = self.members.get(namespace, name)
        if member is None or self.integration.group_of(member):
            return None, []
        return None, [member]

    async def reconcile(self, namespace: str, name: str) -> None:
        self.reconciles += 1
        group, members = self._load(namespace, name)
        integration = self.integration
        if members and not integration.is_managed(members[0]):
            return
        if group is not None and not members:
            # Every member is gone: the quota of an evicted group is given back (nothing of it
            # runs), and the group's Workload is let go unless a parent owns it too (a parent
            # that creates the members again, such as a StatefulSet).
            workload = self.caches.workloads.get(namespace, group)
            if workload is None or not self._is_group_workload(workload):
                return
            evicted = ws.find_condition(workload, ws.EVICTED)
            if (
                evicted is not None
                and evicted.get("status") == "True"
                and ws.is_true(workload, ws.QUOTA_RESERVED)
            ):
                reason, message, now = (
                    str(evicted.get("reason", "")),
                    str(evicted.get("message", "")),
                    self.clock(),
                )
                requeued = reason in ("Preempted", "NodeFailures")
                await update_status(
                    self.kube,
                    WORKLOADS,
                    workload,
                    lambda s: ws.clear_reservation(s, now, requeued, reason, message),
                )
            if all(
                ref.get("kind") == integration.kind for ref in _meta(workload).get("ownerReferences") or []
            ):
                await remove_finalizer(self.kube, workload)
            return
        if group is None and not members and self.members.get(namespace, name) is None:
            # A member alone, gone (its finalizer taken off by someone else): its Workload is let
            # go as a deleted member's is, whichever of the two watches told kadmit first (the
            # Workload reconciler, seeing the Workload's deletion while the member is still in its
            # cache, leaves it). Only the finalizer: a stale copy's removal writes nothing.
            for workload in self.caches.workloads.by_index(
                CONTROLLER_INDEX, controller_key(namespace, integration.kind, name)
            ):
                if (
                    self._controlling_member(workload) == name
                    and not self._is_group_workload(workload)
                    and FINALIZER in (_meta(workload).get("finalizers") or [])
                    and all(ref.get("kind") == integration.kind
                            for ref in _meta(workload).get("ownerReferences") or [])
                ):
                    await remove_finalizer(self.kube, workload)
            return
        if not members or not self._namespace_managed(namespace):
            return
        if group is None and _meta(members[0]).get("deletionTimestamp"):
            # A member alone that is being deleted: let it and its Workload go.
            await self._finalize(members)
            for workload in self._owned(members[0]):
                await remove_finalizer(self.kube, workload)
            return

        workload = self._find_workload(namespace, group, members)
        if workload is None and group is not None and self.caches.workloads.get(namespace, group) is not None:
            await self._event(
                members[0],
                "Warning",
                "WorkloadNameConflict",
                f'A Workload named "{group}" already exists but is not a pod group workload; '
                "this pod group cannot be admitted",
            )
            return
        absent = 0
        if workload is not None and group is not None:
            matched = await self._match_group(workload, group, members)
            if matched is None:
                await self._replace_workload(workload, members)
                return
            members, absent = matched

        # finished workload: let every member go, and the Workload
        if workload is not None and ws.is_true(workload, ws.FINISHED):
            await self._finalize(members)
            await remove_finalizer(self.kube, workload)
            return
        if workload is not None and _meta(workload).get("deletionTimestamp"):
            await self._stop(members, "Workload is deleted", workload_deleted=True)
            await self._finalize(members)
            await remove_finalizer(self.kube, workload)
            return
        finished = integration.finished(members, group)
        if finished is not None:
            if workload is not None:
                await update_status(
                    self.kube,
                    WORKLOADS,
                    workload,
                    lambda s: ws.finish(s, finished.reason, finished.message, self.clock()),
                )
                await self._event(
                    members[0],
                    "Normal",
                    "FinishedWorkload",
                    f"Workload '{namespace}/{workload['metadata']['name']}' is declared finished",
                )
            return
        if workload is None:
            await self._create(namespace, group, members)
            return
        await self._sync_status(workload, members, group, absent)
        evicted = ws.find_condition(workload, ws.EVICTED)
        if evicted is not None and evicted.get("status") == "True":
            await self._stop(members, str(evicted.get("message", "")))
            if ws.is_true(workload, ws.QUOTA_RESERVED) and not integration.is_active(self._fresh(members)):
                reason = str(evicted.get("reason", ""))
                requeued = reason in ("Preempted", "NodeFailures")
                message = str(evicted.get("message", ""))
                now = self.clock()
                await update_status(
                    self.kube,
                    WORKLOADS,
                    workload,
                    lambda s: ws.clear_reservation(s, now, requeued, reason, message),
                )
            elif ws.is_true(workload, ws.QUOTA_RESERVED):
                self.queue.add_after((namespace, name), RETRY_DELAY)
            return
        if integration.is_suspended(members):
            if ws.is_true(workload, ws.ADMITTED) and ws.is_true(workload, ws.QUOTA_RESERVED):
                if absent == 0:
                    await self._start(workload, members, group)
            elif not ws.is_true(workload, ws.QUOTA_RESERVED) and not integration.is_serving(members, group):
                await self._sync_queue_name(workload, integration.queue_name_of(members))
            return
        if not ws.is_true(workload, ws.ADMITTED):
            await self._stop(members, "Not admitted by cluster queue")

    # -- finding and making the Workload

    def _namespace_managed(self, namespace: str) -> bool:
        selector = self.config.managed_jobs_namespace_selector
        if selector is None:
            return True
        ns = self.caches.namespaces.get(None, namespace)
        labels = dict((ns or {}).get("metadata", {}).get("labels") or {})
        labels.setdefault("kubernetes.io/metadata.name", namespace)
        return label_selector(selector, "Configuration", "managedJobsNamespaceSelector").matches(labels)

    @staticmethod
    def _is_group_workload(workload: Obj) -> bool:
        return (_meta(workload).get("annotations") or {}).get(IS_GROUP_WORKLOAD_ANNOTATION) == "true"

    def _owned(self, member: Obj) -> list[Obj]:
        uid = str(_meta(member).get("uid", ""))
        return [
            w
            for w in self.caches.workloads.by_index(REFERENCE_INDEX, uid)
            if any(r.get("uid") == uid and r.get("controller") for r in _meta(w).get("ownerReferences") or [])
        ]

    def _find_workload(self, namespace: str, group: str | None, members: list[Obj]) -> Obj | None:
        if group is not None:
            workload = self.caches.workloads.get(namespace, group)
            return workload if workload is not None and self._is_group_workload(workload) else None
        owned = self._owned(members[0])
        expected = self.integration.workload_name(members, None)
        return next((w for w in owned if w["metadata"]["name"] == expected), owned[0] if owned else None)

    async def _create(self, namespace: str, group: str | None, members: list[Obj]) -> None:
        integration = self.integration
        if group is not None:
            active, inactive = integration.partition(members)
            await self._finalize(inactive)
            try:
                integration.check_group(members)
            except ValueError as exc:
                logger.debug("%s group %s/%s: %s", integration.kind, namespace, group, exc)
                return  # the next member's event brings us back
            excess = len(active) - integration.group_size(members)
            if excess > 0:
                # More runnable members than the group counts: the last ones go (Kueue's
                # removeExcessPods), before the Workload is made of the rest.
                active.sort(key=integration.keep_order)
                for member in active[-excess:]:
                    await self._finalize([member])
                    await self._delete(member)
                    await self._event(member, "Normal", "ExcessPodDeleted", "Excess pod deleted")
                active = active[:-excess]
            members = active
        elif not integration.is_suspended(members):
            await self._stop(members, "No matching Workload")
            return
        try:
            pod_sets = integration.pod_sets(members, group)
        except ValueError as exc:
            await self._event(members[0], "Warning", "ErrWorkloadCompose", str(exc))
            return
        first = members[0]
        try:
            priority = resolve_priority(
                first,
                pod_sets,
                lambda n: self.caches.workload_priority_classes.get(None, n),
                lambda n: self.caches.priority_classes.get(None, n) if self.caches.priority_classes else None,
                lambda: self.caches.priority_classes.list() if self.caches.priority_classes else [],
            )
        except PriorityClassNotFound as exc:
            await self._event(first, "Warning", "WorkloadPriorityClassNotFound", str(exc))
            return
        owners = [_owner_reference(integration, m, controller=group is None) for m in members]
        workload = construct_workload_for(
            name=integration.workload_name(members, group),
            namespace=namespace,
            job=first,
            pod_sets=pod_sets,
            queue_name=integration.queue_name_of(members),
            priority=priority,
            owner_references=owners,
            label_keys_to_copy=self.config.label_keys_to_copy,
        )
        if group is not None:
            workload["metadata"].setdefault("annotations", {})[IS_GROUP_WORKLOAD_ANNOTATION] = "true"
        else:
            uid = str(_meta(first).get("uid", ""))
            if uid and valid_label_value(uid):
                workload["metadata"]["labels"][JOB_UID_LABEL] = uid
        try:
            created = await self.kube.create(WORKLOADS, workload)
        except ApiError as exc:
            if exc.status == 409:
                return
            raise
        await self._event(
            first, "Normal", "CreatedWorkload", f"Created Workload: {namespace}/{created['metadata']['name']}"
        )

    async def _match_group(
        self, workload: Obj, group: str, members: list[Obj]
    ) -> tuple[list[Obj], int] | None:
        """Kueue's ``FindMatchingWorkloads`` for a group: per pod set, keep as many members as it
        counts (delete the excess, let replaced failed ones go); None when the Workload no longer
        matches the group. Returns the kept members and how many are missing."""
        integration = self.integration
        active, inactive = integration.partition(members)
        kept: list[Obj] = []
        excess: list[Obj] = []
        replaced: list[Obj] = []
        absent = 0
        for pod_set in (workload.get("spec") or {}).get("podSets") or []:
            name, count = pod_set.get("name"), int(pod_set.get("count", 1))
            role_active = sorted(
                (m for m in active if integration.pod_set_of(m, group) == name), key=integration.keep_order
            )
            role_inactive = [m for m in inactive if integration.pod_set_of(m, group) == name]
            absent += integration.absent(members, count, len(role_active))
            kept += role_active[:count]
            excess += role_active[count:]
            replaceable = min(len(role_inactive), len(role_inactive) + len(role_active) - count)
            if replaceable > 0:
                role_inactive.sort(key=lambda m: str(_meta(m).get("creationTimestamp") or ""))
                replaced += role_inactive[:replaceable]
                kept += role_inactive[replaceable:]
            else:
                kept += role_inactive
        names = {p.get("name") for p in (workload.get("spec") or {}).get("podSets") or []}
        if not kept or any(integration.pod_set_of(m, group) not in names for m in active):
            return None
        await self._own_all(workload, kept)
        for member in excess:
            await self._finalize([member])
            await self._delete(member)
            await self._event(member, "Normal", "ExcessPodDeleted", "Excess pod deleted")
        await self._finalize(replaced)
        return kept, absent

    async def _own_all(self, workload: Obj, members: list[Obj]) -> None:
        have = {r.get("uid") for r in _meta(workload).get("ownerReferences") or []}
        added = [
            _owner_reference(self.integration, m, controller=False)
            for m in members
            if _meta(m).get("uid") not in have
        ]
        if not added:
            return

        def own(obj: Obj) -> bool:
            refs = list(obj["metadata"].get("ownerReferences") or [])
            uids = {r.get("uid") for r in refs}
            new = [r for r in added if r["uid"] not in uids]
            obj["metadata"]["ownerReferences"] = refs + new
            return bool(new)

        if await update(self.kube, WORKLOADS, workload, own) is not None:
            await self._event(
                workload, "Normal", "OwnerReferencesAdded", f"Added {len(added)} owner reference(s)"
            )

    async def _replace_workload(self, workload: Obj, members: list[Obj]) -> None:
        """The Workload no longer matches the group: delete it, stopping what runs under it."""
        if ws.is_true(workload, ws.FINISHED):
            await self._finalize(members)
            await remove_finalizer(self.kube, workload)
            return
        await self._stop(members, "No matching Workload")
        with contextlib.suppress(ApiError):
            await remove_finalizer(self.kube, workload)
        meta = workload["metadata"]
        try:
            await self.kube.delete(WORKLOADS, meta.get("namespace"), meta["name"], uid=meta.get("uid"))
        except ApiError as exc:
            if not exc.not_found and exc.status != 409:
                raise
        await self._event(
            members[0],
            "Normal",
            "DeletedWorkload",
            f"Deleted not matching Workload: {meta.get('namespace')}/{meta['name']}",
        )

    # -- status

    async def _sync_status(self, workload: Obj, members: list[Obj], group: str | None, absent: int) -> None:
        integration = self.integration
        reserved = ws.is_true(workload, ws.QUOTA_RESERVED)
        reclaimable = integration.reclaimable_pods(members, group) if reserved else []
        wait_for_pods_ready = self.config.wait_for_pods_ready is not None
        admitted = ws.is_true(workload, ws.ADMITTED)
        ready = integration.pods_ready(members, group) and not any(_gated_or_pending(m) for m in members)
        evicted = ws.find_condition(workload, ws.EVICTED)
        now = self.clock()

        def sync(status: Obj) -> bool:
            changed = False
            have = {p.get("name"): int(p.get("count") or 0) for p in status.get("reclaimablePods") or []}
            if reclaimable and any(int(p["count"]) > have.get(p["name"], 0) for p in reclaimable):
                status["reclaimablePods"] = reclaimable
                changed = True
            if wait_for_pods_ready and admitted:
                changed |= ws.set_pods_ready(status, ready, now)
            if group is not None:
                changed |= _replacement_condition(status, absent, evicted, now)
            return changed

        await update_status(self.kube, WORKLOADS, workload, sync)

    # -- starting and stopping

    async def _start(self, workload: Obj, members: list[Obj], group: str | None) -> None:
        flavors = {f["metadata"]["name"]: f for f in self.caches.flavors.list()}
        try:
            infos = {info.name: info for info in pod_set_infos(workload, flavors)}
        except FlavorNotFound as exc:
            logger.info("cannot start %s yet: %s", workload["metadata"]["name"], exc)
            self.queue.add_after(self.key_of(members[0]), RETRY_DELAY * 4)
            return
        except PodSetMergeError as exc:
            await self._failed_to_start(workload, members[0], str(exc))
            return
        meta = workload["metadata"]
        fresh = await self.kube.get_or_none(WORKLOADS, meta["namespace"], meta["name"])
        if fresh is None or fresh["metadata"].get("uid") != meta.get("uid") or not ws.is_admitted(fresh):
            self.queue.add_after(self.key_of(members[0]), RETRY_DELAY)
            return
        if await self._runs_elsewhere(fresh):
            return  # MultiKueue runs the group on a worker; its members here stay gated
        cq = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
        integration = self.integration

        async def start_one(member: Obj) -> None:
            info = infos.get(integration.pod_set_of(member, group))
            if info is None:
                raise ValueError(
                    f"podSetInfo with the name '{integration.pod_set_of(member, group)}' is not found"
                )

            start = replaced_by(lambda obj: integration.started(obj, info))
            if await update_unless_gone(self.kube, integration.resource, member, start) is not None:
                await self._event(member, "Normal", "Started", f"Admitted by clusterQueue {cq}")

        try:
            await asyncio.gather(*(start_one(m) for m in members))
        except (PodSetMergeError, ValueError) as exc:
            await self._failed_to_start(workload, members[0], f"invalid podset infos: {exc}")

    async def _runs_elsewhere(self, workload: Obj) -> bool:
        """Kueue's ``ShouldSkipLocalExecution``: the Workload has a MultiKueue admission check, so
        its members run on the worker that admitted its copy, never here."""
        for entry in (workload.get("status") or {}).get("admissionChecks") or []:
            check = await self.kube.get_or_none(ADMISSION_CHECKS, None, str(entry.get("name") or ""))
            if check is not None and (check.get("spec") or {}).get("controllerName") == MULTIKUEUE_CONTROLLER:
                return True
        return False

    async def _failed_to_start(self, workload: Obj, member: Obj, message: str) -> None:
        await update_status(
            self.kube, WORKLOADS, workload, lambda s: ws.finish(s, "FailedToStart", message, self.clock())
        )
        await self._event(member, "Warning", "FailedToStart", message)

    async def _stop(self, members: Sequence[Obj], message: str, *, workload_deleted: bool = False) -> None:
        """Kueue's pod ``Stop``: mark each running member ``TerminationTarget`` and delete it."""
        targets = self.integration.to_stop(members, workload_deleted)
        reason = "WorkloadDeleted" if workload_deleted else "StoppedByKueue"
        now = self.clock()

        async def stop_one(member: Obj) -> None:
            def mark(status: Obj) -> bool:
                return ws.set_condition(status, TERMINATION_TARGET, "True", reason, message, now)

            try:
                await update_status(self.kube, self.integration.resource, member, mark)
            except ApiError as exc:
                if exc.not_found:
                    return
                raise
            await self._delete(member)
            await self._event(member, "Normal", "Stopped", message)

        await asyncio.gather(*(stop_one(m) for m in targets))

    async def _delete(self, member: Obj) -> None:
        meta = _meta(member)
        try:
            await self.kube.delete(
                self.integration.resource, meta.get("namespace"), meta["name"], uid=meta.get("uid")
            )
        except ApiError as exc:
            if not exc.not_found and exc.status != 409:
                raise

    async def _finalize(self, members: Sequence[Obj]) -> None:
        """Drop the integration's finalizer from each member that still has it."""
        finalizer = self.integration.finalizer

        async def one(member: Obj) -> None:
            if finalizer not in (_meta(member).get("finalizers") or []):
                return
            await update_unless_gone(
                self.kube, self.integration.resource, member, without_finalizer(finalizer)
            )

        await asyncio.gather(*(one(m) for m in members))

    def _fresh(self, members: Sequence[Obj]) -> list[Obj]:
        result = []
        for member in members:
            meta = _meta(member)
            current = self.members.get(meta.get("namespace"), meta["name"])
            if current is not None:
                result.append(current)
        return result


def _gated_or_pending(member: Obj) -> bool:
    return (
        bool((member.get("spec") or {}).get("schedulingGates"))
        and str((member.get("status") or {}).get("phase") or "Pending") == "Pending"
    )


def _replacement_condition(status: Obj, absent: int, evicted: Obj | None, now: float) -> bool:
    """Kueue's ``WaitingForReplacementPods``: True (why) while members of the group are missing."""
    current = next(
        (c for c in status.get("conditions") or [] if c.get("type") == WAITING_FOR_REPLACEMENT_PODS), None
    )
    if current is None and absent == 0:
        return False
    if absent > 0:
        if evicted is not None and evicted.get("status") == "True":
            reason, message = str(evicted.get("reason", "")), str(evicted.get("message", ""))
        elif current is not None and current.get("status") == "True":
            reason, message = str(current.get("reason", "")), str(current.get("message", ""))
        else:
            reason, message = "PodsFailed", "Some Failed pods need replacement"
        return ws.set_condition(status, WAITING_FOR_REPLACEMENT_PODS, "True", reason, message, now)
    return ws.set_condition(
        status, WAITING_FOR_REPLACEMENT_PODS, "False", "PodsReady", "No pods need replacement", now
    )
