"""The ``v1`` Pod webhooks (Kueue's ``pkg/controller/jobs/pod`` webhook), and the pod vocabulary.

Mutating (``/mutate--v1-pod``, CREATE): a Pod kadmit manages (a queue name, or
``manageJobsWithoutQueueName`` in a selected namespace, and no managed owner) gets the
``kueue.x-k8s.io/managed=true`` label, the ``kueue.x-k8s.io/managed`` finalizer, the
``kueue.x-k8s.io/admission`` scheduling gate and its ``kueue.x-k8s.io/role-hash``; the default
LocalQueue and WorkloadPriorityClass are filled in as for every job kind. A Pod its parent
suspends (``kueue.x-k8s.io/pod-suspending-parent``) is gated the same way, without the finalizer.

Validating (``/validate--v1-pod``, CREATE and UPDATE): Kueue's rules, with Kueue's messages: the
managed label's value, the pod-group label and total-count annotation set together, the group
name immutable, an unretriable group never made retriable again, the queue name fixed once the
Pod runs.

When the pod integration is not enabled both allow every Pod unchanged (Kueue's no-op webhook).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kadmit.engine.parse import label_selector
from kadmit.webhook.fielderrors import FieldError, forbidden, invalid, required
from kadmit.webhook.jobs import (
    ANNOTATIONS,
    FIELD_IMMUTABLE,
    LABELS,
    PREBUILT_WORKLOAD_KEY,
    PRIORITY_CLASS_LABEL,
    QUEUE_LABEL,
    ClusterView,
    FrameworkWebhooks,
    JobWebhookConfig,
    validate_managed_create,
)
from kadmit.webhook.names import dns1123_subdomain
from kadmit.webhook.objects import annotations_of as pod_annotations
from kadmit.webhook.objects import labels_of as pod_labels
from kadmit.webhook.objects import mapping as _m
from kadmit.workload import Obj

#: Integrations whose Pods the pod integration admits (Kueue's implicitly enabled ``pod``).
PARENT_KINDS = frozenset(
    {("apps", "Deployment"), ("apps", "StatefulSet"), ("leaderworkerset.x-k8s.io", "LeaderWorkerSet")}
)
MANAGED_LABEL = "kueue.x-k8s.io/managed"
MANAGED_VALUE = "true"
POD_FINALIZER = MANAGED_LABEL
SCHEDULING_GATE = "kueue.x-k8s.io/admission"
GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
GROUP_FAST_ADMISSION_ANNOTATION = "kueue.x-k8s.io/pod-group-fast-admission"
GROUP_SERVING_ANNOTATION = "kueue.x-k8s.io/pod-group-serving"
ROLE_HASH_ANNOTATION = "kueue.x-k8s.io/role-hash"
RETRIABLE_IN_GROUP_ANNOTATION = "kueue.x-k8s.io/retriable-in-group"
SUSPENDED_BY_PARENT_ANNOTATION = "kueue.x-k8s.io/pod-suspending-parent"
_GO_INT = re.compile(r"[+-]?[0-9]+")


# -- the role hash: which Pods of a group are the same pod set


# Go marshals a map with its keys sorted and a struct in its fields' order, leaving out empty
# ``omitempty`` fields: these are the orders of the structs a role's shape holds in lists.
_PORT_FIELDS = ("name", "hostPort", "containerPort", "protocol", "hostIP")
_TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


_ALWAYS = frozenset({"containerPort"})  # not omitempty
_POINTERS = frozenset({"tolerationSeconds"})  # omitempty pointers: only nil is left out


def _struct(value: Any, fields: tuple[str, ...]) -> Any:
    item = _m(value)
    return {
        f: item[f]
        for f in fields
        if f in item
        and (f in _ALWAYS or (item[f] is not None if f in _POINTERS else item[f] not in (None, "", 0)))
    }


def _containers_shape(containers: Any) -> list[Obj] | None:
    if not isinstance(containers, list) or not containers:
        return None
    shape = []
    for container in containers:
        ports = _m(container).get("ports")
        requests = _m(_m(container).get("resources")).get("requests")
        shape.append(
            {
                "ports": [_struct(p, _PORT_FIELDS) for p in ports]
                if isinstance(ports, list) and ports
                else None,
                "resources": {"requests": _sorted(requests) if requests is not None else None},
            }
        )
    return shape


def spec_shape(spec: Mapping[str, Any]) -> Obj:
    """Kueue's ``SpecShape``: the parts of a pod spec that matter to admission, keys in Go's order."""
    tolerations = spec.get("tolerations")
    shape: Obj = {
        "affinity": _sorted(spec.get("affinity")),
        "containers": _containers_shape(spec.get("containers")),
        "initContainers": _containers_shape(spec.get("initContainers")),
        "nodeSelector": _sorted(spec.get("nodeSelector")) or None,
        "overhead": _sorted(spec.get("overhead")) or None,
        "priority": spec.get("priority"),
        "resourceClaims": _sorted(spec.get("resourceClaims")) or None,
    }
    if spec.get("resources") is not None:
        shape["resources"] = _sorted(_m(spec.get("resources")).get("requests"))
    shape["runtimeClassName"] = spec.get("runtimeClassName")
    shape["tolerations"] = (
        [_struct(t, _TOLERATION_FIELDS) for t in tolerations]
        if isinstance(tolerations, list) and tolerations
        else None
    )
    shape["topologySpreadConstraints"] = _sorted(spec.get("topologySpreadConstraints")) or None
    return shape


def role_hash_of_spec(spec: Mapping[str, Any]) -> str:
    """Kueue's ``GenerateRoleHash``: the first 8 hex digits of the sha256 of the shape as Go's
    ``json.Marshal`` writes it (struct fields other than a role's ports and tolerations, such as
    an affinity's, are written with sorted keys: the one place the hash may differ from Kueue's)."""
    text = json.dumps({"spec": spec_shape(spec)}, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def role_hash(pod: Obj) -> str:
    """The role the webhook recorded on the Pod, else the one its spec gives now."""
    return pod_annotations(pod).get(ROLE_HASH_ANNOTATION) or role_hash_of_spec(_m(pod.get("spec")))


def is_gated(pod: Obj) -> bool:
    gates = _m(pod.get("spec")).get("schedulingGates")
    return (
        any(_m(g).get("name") == SCHEDULING_GATE for g in gates if isinstance(gates, list))
        if isinstance(gates, list)
        else False
    )


def is_pod_suspended(pod: Obj) -> bool:
    """Kueue's ``podSuspended``: gated, or already ended."""
    return is_gated(pod) or _m(pod.get("status")).get("phase") in ("Succeeded", "Failed")


def total_count_error(text: str) -> str | None:
    """Why ``pod-group-total-count`` is unusable (Kueue's message), or None."""
    if not _GO_INT.fullmatch(text):
        return f'strconv.Atoi: parsing "{text}": invalid syntax'
    if int(text) < 1:
        return (
            f"incorrect annotation value '{GROUP_TOTAL_COUNT_ANNOTATION}={text}': "
            "group total count should be greater than zero"
        )
    return None


@dataclass(frozen=True)
class PodOptions:
    """Configuration ``integrations.podOptions`` (v1beta1, deprecated in Kueue but honoured)."""

    namespace_selector: Mapping[str, Any] | None = None
    pod_selector: Mapping[str, Any] | None = None


class PodWebhooks(FrameworkWebhooks):
    """The Pod mutating and validating handlers."""

    gvk = ("", "v1", "Pod")

    def __init__(
        self, view: ClusterView, config: JobWebhookConfig | None = None, pod_options: PodOptions | None = None
    ) -> None:
        super().__init__(view, config)
        options = pod_options or PodOptions()
        self.pod_namespace_selector = (
            None
            if options.namespace_selector is None
            else label_selector(
                options.namespace_selector, "Configuration", "integrations.podOptions.namespaceSelector"
            )
        )
        self.pod_selector = (
            None
            if options.pod_selector is None
            else label_selector(options.pod_selector, "Configuration", "integrations.podOptions.podSelector")
        )

    @property
    def enabled(self) -> bool:
        """On with the pod integration, or implicitly with an integration that rides on it."""
        return self.explicit or bool(PARENT_KINDS & self.config.integration_kinds)

    @property
    def explicit(self) -> bool:
        return self.integration in self.config.integration_kinds

    def _owner_managed(self, pod: Obj) -> bool:
        """A Pod whose controller is a kind kadmit manages is covered by its owner's Workload."""
        refs = _m(pod.get("metadata")).get("ownerReferences")
        for ref in refs if isinstance(refs, list) else []:
            if isinstance(ref, dict) and ref.get("controller"):
                group = str(ref.get("apiVersion", "")).rpartition("/")[0]
                if (group, ref.get("kind")) in self.config.integration_kinds and ref.get("kind") != "Pod":
                    return True
        return False

    async def default(self, pod: Obj, namespace: str) -> Obj | None:
        metadata = dict(_m(pod.get("metadata")))
        labels = pod_labels(pod)
        annotations = pod_annotations(pod)
        by_parent = SUSPENDED_BY_PARENT_ANNOTATION in annotations
        if not by_parent and not self.explicit:
            return None  # implicitly enabled: only the Pods of a managed parent
        suspend = by_parent
        if not by_parent:
            ns_labels = await self.view.namespace_labels(namespace)
            if ns_labels is None:
                ns_labels = {"kubernetes.io/metadata.name": namespace}
            if self.namespace_selector is not None and not self.namespace_selector.matches(ns_labels):
                return None
            if self.pod_selector is not None and not self.pod_selector.matches(labels):
                return None
            if self.pod_namespace_selector is not None and not self.pod_namespace_selector.matches(ns_labels):
                return None
            if self._owner_managed(pod):
                return None
            labels = dict(await self.defaulted_labels(labels, namespace))
            suspend = bool(labels.get(QUEUE_LABEL)) or self.config.manage_jobs_without_queue_name
            if suspend:
                labels[MANAGED_LABEL] = MANAGED_VALUE
            if labels != pod_labels(pod):
                metadata["labels"] = labels
        if not suspend:
            if "labels" in metadata and metadata["labels"] is not _m(pod.get("metadata")).get("labels"):
                pod["metadata"] = metadata
                return pod
            return None
        if not by_parent:
            finalizers = list(metadata.get("finalizers") or [])
            if POD_FINALIZER not in finalizers:
                metadata["finalizers"] = [*finalizers, POD_FINALIZER]
        spec = dict(_m(pod.get("spec")))
        gates = [g for g in spec.get("schedulingGates") or [] if isinstance(g, dict)]
        if not any(g.get("name") == SCHEDULING_GATE for g in gates):
            spec["schedulingGates"] = [*gates, {"name": SCHEDULING_GATE}]
        if ROLE_HASH_ANNOTATION not in annotations:  # gates are not part of the role
            annotations[ROLE_HASH_ANNOTATION] = role_hash_of_spec(spec)
        metadata["annotations"] = annotations
        pod["metadata"] = metadata
        pod["spec"] = spec
        return pod

    async def object_errors(self, obj: Obj, old: Obj | None, namespace: str) -> list[FieldError]:
        errors = validate_pod(obj)
        if old is not None:
            errors += validate_pod_update(old, obj, await self.default_queue_exists(namespace))
        return errors


def validate_pod(pod: Obj) -> list[FieldError]:
    """Kueue's ``ValidateJobOnCreate`` and ``validateCommon`` for a Pod."""
    labels = pod_labels(pod)
    annotations = pod_annotations(pod)
    if not any(k.startswith("kueue.x-k8s.io/") for k in (*labels, *annotations)):
        return []  # nothing of Kueue's on it: nothing to check
    errors = validate_managed_create(pod)
    managed = labels.get(MANAGED_LABEL)
    if managed is not None and managed != MANAGED_VALUE:
        errors.append(
            forbidden(LABELS.key(MANAGED_LABEL), f"managed label value can only be '{MANAGED_VALUE}'")
        )
        return errors
    errors += _group_metadata(labels, annotations)
    group = labels.get(GROUP_NAME_LABEL, "")
    prebuilt = annotations.get(PREBUILT_WORKLOAD_KEY) or labels.get(PREBUILT_WORKLOAD_KEY) or ""
    if group and prebuilt and prebuilt != group:
        path = (
            ANNOTATIONS.key(PREBUILT_WORKLOAD_KEY)
            if PREBUILT_WORKLOAD_KEY in annotations
            else LABELS.key(PREBUILT_WORKLOAD_KEY)
        )
        errors.append(invalid(path, prebuilt, "prebuilt workload and pod group should be equal"))
    return errors


def _group_metadata(labels: Mapping[str, str], annotations: Mapping[str, str]) -> list[FieldError]:
    detail = (
        f"both the '{GROUP_TOTAL_COUNT_ANNOTATION}' annotation and the '{GROUP_NAME_LABEL}' "
        "label should be set"
    )
    group = labels.get(GROUP_NAME_LABEL, "")
    total = annotations.get(GROUP_TOTAL_COUNT_ANNOTATION)
    errors: list[FieldError] = []
    if not group:
        if total is not None:
            return [required(LABELS.key(GROUP_NAME_LABEL), detail)]
    else:
        if problems := dns1123_subdomain(group):
            errors.append(invalid(LABELS.key(GROUP_NAME_LABEL), group, ",".join(problems)))
        if total is None:
            return [*errors, required(ANNOTATIONS.key(GROUP_TOTAL_COUNT_ANNOTATION), detail)]
    if total is not None and (problem := total_count_error(total)):
        errors.append(invalid(ANNOTATIONS.key(GROUP_TOTAL_COUNT_ANNOTATION), total, problem))
    return errors


def validate_pod_update(old: Obj, new: Obj, default_queue_exists: bool) -> list[FieldError]:
    """Kueue's ``ValidateJobOnUpdate`` for a Pod, the group name and ``retriable-in-group``."""
    errors: list[FieldError] = []
    old_labels, new_labels = pod_labels(old), pod_labels(new)
    old_queue, new_queue = old_labels.get(QUEUE_LABEL, ""), new_labels.get(QUEUE_LABEL, "")
    if not is_pod_suspended(new) and old_queue != new_queue:
        errors.append(invalid(LABELS.key(QUEUE_LABEL), new_queue, FIELD_IMMUTABLE))
    if not new_queue and old_queue and default_queue_exists:
        errors.append(
            invalid(
                LABELS.key(QUEUE_LABEL), "", "queue-name must not be empty in namespace with default queue"
            )
        )
    old_class, new_class = old_labels.get(PRIORITY_CLASS_LABEL, ""), new_labels.get(PRIORITY_CLASS_LABEL, "")
    if not new_class and old_class:
        errors.append(
            invalid(
                LABELS.key(PRIORITY_CLASS_LABEL),
                new_class,
                "WorkloadPriorityClass cannot be removed from a workload",
            )
        )
    old_group, new_group = old_labels.get(GROUP_NAME_LABEL, ""), new_labels.get(GROUP_NAME_LABEL, "")
    if old_group and new_group != old_group:
        errors.append(invalid(LABELS.key(GROUP_NAME_LABEL), new_group, FIELD_IMMUTABLE))
    if (
        new_group
        and pod_annotations(old).get(RETRIABLE_IN_GROUP_ANNOTATION) == "false"
        and pod_annotations(new).get(RETRIABLE_IN_GROUP_ANNOTATION) != "false"
    ):
        errors.append(
            forbidden(
                ANNOTATIONS.key(RETRIABLE_IN_GROUP_ANNOTATION),
                "unretriable pod group can't be converted to retriable",
            )
        )
    return errors
