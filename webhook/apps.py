"""The webhooks of the kinds that ride on the pod integration: ``apps/v1`` Deployment and
StatefulSet, ``leaderworkerset.x-k8s.io/v1`` LeaderWorkerSet (Kueue's ``deployment``,
``statefulset`` and ``leaderworkerset`` integrations).

Neither kind is suspended: a managed one gets, in its pod template, the annotation
``kueue.x-k8s.io/pod-suspending-parent: <framework>``, so that the Pod webhook gates every Pod
its controller creates (without the Pod finalizer), and the Pods are admitted by the pod
integration: a Deployment's Pods one by one (``deployment`` also puts the managed label, the
queue name and the priority class into the template), a StatefulSet's as one pod group (the
statefulset pod labeller names the group). Validation, with Kueue's messages: the queue name
cannot change once a replica is ready, nor be removed; a managed StatefulSet may only be scaled
to zero or from zero (``spec.replicas: ... field is immutable``), and from zero only once its
Workload is on hold (see ``controller/jobs/statefulset.py``).
"""

from __future__ import annotations

from typing import Any

from kadmit.webhook.fielderrors import ROOT, FieldError, forbidden, invalid
from kadmit.webhook.jobs import (
    FIELD_IMMUTABLE,
    LABELS,
    PRIORITY_CLASS_LABEL,
    QUEUE_LABEL,
    FrameworkWebhooks,
    priority_class_update_errors,
)
from kadmit.webhook.names import dns1123_subdomain
from kadmit.webhook.objects import labels_of as _labels
from kadmit.webhook.objects import mapping as _m
from kadmit.webhook.pods import (
    GROUP_SERVING_ANNOTATION,
    MANAGED_LABEL,
    MANAGED_VALUE,
    SUSPENDED_BY_PARENT_ANNOTATION,
)
from kadmit.workload import Obj, is_on_hold

REPLICAS = ROOT.child("spec", "replicas")


def _replicas(obj: Obj) -> int:
    value = _m(obj.get("spec")).get("replicas")
    return 1 if value is None else int(value) if isinstance(value, int) else 1


class AppsWebhooks(FrameworkWebhooks):
    """What the Deployment and StatefulSet webhooks share; a subclass names the kind."""

    template_labels = False  # deployment: the managed label, queue and priority class go into the template

    @property
    def framework(self) -> str:
        """The parent's name in ``kueue.x-k8s.io/pod-suspending-parent`` (``deployment``)."""
        return self.kind.lower()

    async def is_managed(self, obj: Obj, namespace: str) -> bool:
        if _labels(obj).get(QUEUE_LABEL):
            return await self._namespace_selected(namespace)
        return self.config.manage_jobs_without_queue_name and await self._namespace_selected(namespace)

    async def default(self, obj: Obj, namespace: str) -> Obj | None:
        metadata = dict(_m(obj.get("metadata")))
        labels = await self.defaulted_labels(_labels(obj), namespace)
        if labels != _labels(obj):
            metadata["labels"] = labels
            obj["metadata"] = metadata
        if not await self.is_managed(obj, namespace):
            return obj
        spec = dict(_m(obj.get("spec")))
        self.mark_templates(spec, labels)
        obj["spec"] = spec
        return obj

    def mark_templates(self, spec: dict[str, Any], labels: dict[str, str]) -> None:
        """Mark the kind's pod template (in place in ``spec``, a copy): its Pods are the parent's."""
        template = dict(_m(spec.get("template")))
        template_meta = dict(_m(template.get("metadata")))
        annotations = dict(_m(template_meta.get("annotations")))
        annotations[SUSPENDED_BY_PARENT_ANNOTATION] = self.framework
        template_meta["annotations"] = annotations
        if self.template_labels:
            pod_labels = dict(_m(template_meta.get("labels")))
            pod_labels[MANAGED_LABEL] = MANAGED_VALUE
            if labels.get(QUEUE_LABEL):
                pod_labels[QUEUE_LABEL] = labels[QUEUE_LABEL]
            if labels.get(PRIORITY_CLASS_LABEL):
                pod_labels[PRIORITY_CLASS_LABEL] = labels[PRIORITY_CLASS_LABEL]
            template_meta["labels"] = pod_labels
        template["metadata"] = template_meta
        spec["template"] = template

    async def object_errors(self, obj: Obj, old: Obj | None, namespace: str) -> list[FieldError]:
        errors = self._queue_name(obj)
        if old is not None:
            errors += self.update_errors(old, obj)
            errors += await self.kind_update_errors(old, obj, namespace)
        return errors

    @staticmethod
    def _queue_name(obj: Obj) -> list[FieldError]:
        queue = _labels(obj).get(QUEUE_LABEL)
        if queue and (problems := dns1123_subdomain(queue)):
            return [invalid(LABELS.key(QUEUE_LABEL), queue, ",".join(problems))]
        return []

    @staticmethod
    def update_errors(old: Obj, new: Obj) -> list[FieldError]:
        """Kueue's: the queue name is fixed once a replica is ready, and may never be removed;
        a priority class may not be added to a running one nor removed."""
        errors: list[FieldError] = []
        suspended = int(_m(old.get("status")).get("readyReplicas") or 0) == 0
        old_labels, new_labels = _labels(old), _labels(new)
        old_queue, new_queue = old_labels.get(QUEUE_LABEL, ""), new_labels.get(QUEUE_LABEL, "")
        if (not suspended or not new_queue) and old_queue != new_queue:
            errors.append(invalid(LABELS.key(QUEUE_LABEL), new_queue, FIELD_IMMUTABLE))
        return errors + priority_class_update_errors(old_labels, new_labels, suspended)

    async def kind_update_errors(self, old: Obj, new: Obj, namespace: str) -> list[FieldError]:
        return []


class DeploymentWebhooks(AppsWebhooks):
    gvk = ("apps", "v1", "Deployment")
    template_labels = True


class StatefulSetWebhooks(AppsWebhooks):
    gvk = ("apps", "v1", "StatefulSet")

    async def kind_update_errors(self, old: Obj, new: Obj, namespace: str) -> list[FieldError]:
        """Kueue's: a managed StatefulSet is one pod group of ``replicas`` Pods, so it may only be
        scaled down to zero or up from zero (and not while Pods of the last run remain)."""
        if not await self.is_managed(new, namespace):
            return []
        old_replicas, new_replicas = _replicas(old), _replicas(new)
        if new_replicas != 0 and old_replicas != 0 and new_replicas != old_replicas:
            return [invalid(REPLICAS, new_replicas, FIELD_IMMUTABLE)]
        if old_replicas == 0 and new_replicas > 0:
            if int(_m(new.get("status")).get("replicas") or 0) > 0:
                return [forbidden(REPLICAS, "scaling down is still in progress")]
            # Kept on hold at zero, the Workload is admitted again on scale-up; one not on hold is
            # still being let go of.
            meta = _m(new.get("metadata"))
            name, uid = str(meta.get("name", "")), str(meta.get("uid", ""))
            workload = await self.view.job_workload(namespace, name, uid)
            if workload is not None and not is_on_hold(workload):
                return [forbidden(REPLICAS, "workload from previous scale-down is still being deleted")]
        return []


class LeaderWorkerSetWebhooks(AppsWebhooks):
    """Kueue's LeaderWorkerSet webhooks: both pod templates marked (parent, serving, queue)."""

    gvk = ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet")

    def mark_templates(self, spec: dict[str, Any], labels: dict[str, str]) -> None:
        lwt = dict(_m(spec.get("leaderWorkerTemplate")))
        for key in ("leaderTemplate", "workerTemplate"):
            if key == "leaderTemplate" and not lwt.get(key):
                continue
            template = dict(_m(lwt.get(key)))
            meta = dict(_m(template.get("metadata")))
            pod_labels = dict(_m(meta.get("labels")))
            for label in (QUEUE_LABEL, PRIORITY_CLASS_LABEL):
                if labels.get(label):
                    pod_labels[label] = labels[label]
            annotations = dict(_m(meta.get("annotations")))
            annotations[SUSPENDED_BY_PARENT_ANNOTATION] = self.framework
            annotations[GROUP_SERVING_ANNOTATION] = "true"
            meta["labels"], meta["annotations"] = pod_labels, annotations
            template["metadata"] = meta
            lwt[key] = template
        spec["leaderWorkerTemplate"] = lwt
