"""The batch/v1 Job webhooks: Kueue's defaulting and validation, plus kadmit's start guard.

Mutating (``/mutate-batch-v1-job``, CREATE): default the LocalQueue, default the
WorkloadPriorityClass, suspend managed Jobs, and hand MultiKueue Jobs to the MultiKueue
controller (contract §4.2). Validating (``/validate-batch-v1-job``, CREATE and UPDATE): Kueue's
label and annotation rules with Kueue's messages (§4.3), and the guard that keeps anyone but
kadmit's controller from starting a managed Job whose Workload is not admitted.

The handlers read the cluster only through :class:`ClusterView`, which the controller backs with
its informer caches, so a request never waits on the API server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kadmit.engine.parse import label_selector
from kadmit.webhook.fielderrors import ROOT, FieldError, aggregate, forbidden, invalid
from kadmit.webhook.names import dns1123_subdomain
from kadmit.webhook.objects import annotations_of as _annotations
from kadmit.webhook.objects import labels_of as _labels
from kadmit.webhook.objects import mapping as _m
from kadmit.webhook.objects import string_map as _string_map
from kadmit.webhook.review import AdmissionRequest, Denied, Webhook
from kadmit.webhook.tas import validate_tas_annotations
from kadmit.workload import ELASTIC_JOB_ANNOTATION as ELASTIC_JOB_ANNOTATION
from kadmit.workload import Obj, is_admitted
from kadmit.workload import is_elastic as is_elastic

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
PREBUILT_WORKLOAD_KEY = "kueue.x-k8s.io/prebuilt-workload-name"
MAX_EXEC_TIME_LABEL = "kueue.x-k8s.io/max-exec-time-seconds"
MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-completions-equal-parallelism"
ELASTIC_GATE = "kueue.x-k8s.io/elastic-job"
"""Kueue's ``ElasticJobSchedulingGate``: an elastic job's Pods are created with it, and it is lifted
for as many Pods as the job's admitted Workload slice grants."""
ADMISSION_GATED_BY_ANNOTATION = "kueue.x-k8s.io/admission-gated-by"
STOPPING_ANNOTATION = "kueue.x-k8s.io/stopping"
DEFAULT_LOCAL_QUEUE = "default"
DEFAULT_PRIORITY_CLASS = "default"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
JOB_CONTROLLER = "kubernetes.io/job-controller"
CONTROLLER_USERNAME = "system:serviceaccount:kadmit-system:kadmit-controller-manager"
FIELD_IMMUTABLE = "field is immutable"

LABELS = ROOT.child("metadata", "labels")
ANNOTATIONS = ROOT.child("metadata", "annotations")


def _default_namespace_selector() -> dict[str, Any]:
    return {
        "matchExpressions": [
            {
                "key": "kubernetes.io/metadata.name",
                "operator": "NotIn",
                "values": ["kube-system", "kadmit-system"],
            }
        ]
    }


class ClusterView(Protocol):
    """The cluster state the job webhooks consult; the controller implements it from its caches."""

    async def local_queue_exists(self, namespace: str, name: str) -> bool: ...

    async def cluster_queue_of(self, namespace: str, local_queue: str) -> str | None:
        """``spec.clusterQueue`` of the LocalQueue, or None when it does not exist."""
        ...

    async def admission_check_controllers(self, cluster_queue: str) -> list[str]:
        """``spec.controllerName`` of every existing AdmissionCheck the ClusterQueue lists."""
        ...

    async def workload_priority_class_exists(self, name: str) -> bool: ...

    async def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """The Namespace's labels, or None when it is not known."""
        ...

    async def job_workload(self, namespace: str, job_name: str, job_uid: str) -> Obj | None:
        """The Workload owned by the job, of any kind (a Job, a JobSet): by its controller
        ownerReference's uid or its ``kueue.x-k8s.io/job-uid`` label."""
        ...


@dataclass(frozen=True)
class JobWebhookConfig:
    """The Kueue Configuration fields the Job webhooks honour, and who may start a Job."""

    manage_jobs_without_queue_name: bool = False
    managed_jobs_namespace_selector: Mapping[str, Any] | None = field(
        default_factory=_default_namespace_selector
    )
    """None turns namespace filtering off, as a nil selector does in Kueue."""
    controller_username: str = CONTROLLER_USERNAME
    workload_priority_class_defaulting: bool = True  # gate WorkloadPriorityClassDefaulting, on at HEAD
    multikueue: bool = True  # gate MultiKueue: managedBy defaulting
    integration_kinds: frozenset[tuple[str, str]] = frozenset({("batch", "Job")})
    """(group, kind) of the enabled integrations: a Job owned by one of these is a child job."""


def _text(value: Any) -> str | None:
    """A label or annotation value as :func:`string_map` reads it (None when absent)."""
    return value if value is None or isinstance(value, str) else str(value)


def _label(obj: Obj, key: str) -> str | None:
    """One label as :func:`labels_of` gives it, without copying them all."""
    return _text(_m(_m(obj.get("metadata")).get("labels")).get(key))


def _spec(job: Obj) -> Mapping[str, Any]:
    """``spec`` to read (never a copy: nothing here writes through it)."""
    return _m(job.get("spec"))


def is_suspended(job: Obj) -> bool:
    """Kueue's ``Job.IsSuspended``: ``spec.suspend`` and not in the middle of being stopped."""
    return bool(_spec(job).get("suspend")) and _annotations(job).get(STOPPING_ANNOTATION) != "true"


def _owner_is_integration(job: Obj, kinds: frozenset[tuple[str, str]]) -> bool:
    refs = _m(job.get("metadata")).get("ownerReferences")
    for ref in refs if isinstance(refs, list) else []:
        if not isinstance(ref, dict) or not ref.get("controller"):
            continue
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        if (group, ref.get("kind")) in kinds:
            return True
    return False


def _go_atoi_error(value: str) -> str:
    return f'strconv.Atoi: parsing "{value}": invalid syntax'


def _parse_go_int(value: str) -> int | None:
    text = value[1:] if value[:1] in "+-" else value
    if not text.isascii() or not text.isdigit():
        return None
    return int(value)


def _parse_go_bool(value: str) -> bool | None:
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if value in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    return None


def _int_field(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _pods_count(job: Obj) -> int:
    spec = _spec(job)
    parallelism = _int_field(spec.get("parallelism"), 1)
    completions = spec.get("completions")
    return parallelism if completions is None else min(parallelism, _int_field(completions, parallelism))


class FrameworkWebhooks:
    """What the webhooks of every kind share: the configuration, its managedJobsNamespaceSelector
    (read once: a selector that cannot be evaluated is a configuration error, found at start),
    and the mutating and validating paths serving ``kinds``."""

    gvk: tuple[str, str, str] = ("", "", "")
    """(API group, version, kind) served; every name below follows from it, as kubebuilder makes them."""
    kind: str
    integration: tuple[str, str]
    """(API group, kind) of the integration (``integrations.frameworks``) the webhooks belong to."""
    kinds: frozenset[tuple[str, str, str]]
    mutate_path: str
    validate_path: str
    mutating_name: str
    """The mutating webhook's name in Kueue's configuration (``mjob.kb.io``)."""

    def __init__(self, view: ClusterView, config: JobWebhookConfig | None = None) -> None:
        group, version, kind = self.gvk
        stem = f"{group.replace('.', '-')}-{version}-{kind.lower()}"
        self.kind = kind
        self.integration = (group, kind)
        self.kinds = frozenset({self.gvk})
        self.mutate_path = f"/mutate-{stem}"
        self.validate_path = f"/validate-{stem}"
        self.mutating_name = f"m{kind.lower()}.kb.io"
        self.view = view
        self.config = config or JobWebhookConfig()
        selector = self.config.managed_jobs_namespace_selector
        self.namespace_selector = (
            None
            if selector is None
            else label_selector(selector, "Configuration", "managedJobsNamespaceSelector")
        )

    @property
    def enabled(self) -> bool:
        """Whether the kind's integration runs; if not, its webhooks allow everything unchanged,
        as Kueue's no-op webhooks for disabled frameworks do."""
        return self.integration in self.config.integration_kinds

    async def mutate(self, request: AdmissionRequest) -> Obj | None:
        """The mutating handler: what :meth:`to_mutate` picks, defaulted by the kind's
        :meth:`default` in the namespace it is created in; None when nothing is to change."""
        obj = self.to_mutate(request)
        if obj is None:
            return None
        return await self.default(obj, request.namespace_of(obj))

    def to_mutate(self, request: AdmissionRequest) -> Obj | None:
        """A shallow copy of the object a CREATE brings while the kind's integration runs, else
        None: the mutating webhooks default only what is being created."""
        if request.operation != "CREATE" or request.object is None or not self.enabled:
            return None
        return dict(request.object)

    async def default(self, obj: Obj, namespace: str) -> Obj | None:
        """The kind's defaulting (Kueue's ``Default``) of ``obj``, a shallow copy of the object
        being created in ``namespace``, changed copy on write: the object to answer with, or None
        when nothing changes."""
        raise NotImplementedError

    async def validate(self, request: AdmissionRequest) -> list[str]:
        """Kueue's validation of a created or updated object, then :meth:`guard`; denied with every
        field error at once."""
        found = request.to_validate()
        if found is None or not self.enabled:
            return []
        obj, old = found
        errors = await self.object_errors(obj, old, request.namespace_of(old or obj))
        if errors:
            raise Denied(aggregate(errors))
        await self.guard(request)
        return []

    async def object_errors(self, obj: Obj, old: Obj | None, namespace: str) -> list[FieldError]:
        """The kind's field errors for ``obj``, created or (``old`` given) updated in ``namespace``."""
        raise NotImplementedError

    async def guard(self, request: AdmissionRequest) -> None:
        """What the kind checks once the fields are valid (the start guard of the job kinds)."""

    async def default_queue_exists(self, namespace: str) -> bool:
        """Whether ``namespace`` has the LocalQueue ``default`` (its jobs may not drop their queue)."""
        return await self.view.local_queue_exists(namespace, DEFAULT_LOCAL_QUEUE)

    def webhooks(self) -> list[Webhook]:
        return [
            Webhook(self.mutate_path, self.kinds, mutate=self.mutate),
            Webhook(self.validate_path, self.kinds, validate=self.validate),
        ]

    async def defaulted_labels(self, labels: dict[str, Any], namespace: str) -> dict[str, Any]:
        """Kueue's jobframework defaulting, the same for every kind: the namespace's LocalQueue
        ``default`` when the object names no queue (in a namespace managedJobsNamespaceSelector
        selects), the WorkloadPriorityClass ``default`` when ``workloadPriorityClassDefaulting``
        is on and it names none. ``labels`` itself when nothing changes, else a new dict."""
        if (
            not _text(labels.get(QUEUE_LABEL))
            and await self.view.local_queue_exists(namespace, DEFAULT_LOCAL_QUEUE)
            and await self._namespace_selected(namespace)
        ):
            labels = {**labels, QUEUE_LABEL: DEFAULT_LOCAL_QUEUE}
        if (
            self.config.workload_priority_class_defaulting
            and PRIORITY_CLASS_LABEL not in labels
            and await self.view.workload_priority_class_exists(DEFAULT_PRIORITY_CLASS)
        ):
            labels = {**labels, PRIORITY_CLASS_LABEL: DEFAULT_PRIORITY_CLASS}
        return labels

    async def _namespace_selected(self, namespace: str) -> bool:
        if self.namespace_selector is None:
            return True
        labels = await self.view.namespace_labels(namespace)
        if labels is None:
            # The API server labels every namespace with its name; that is all we can rely on.
            labels = {"kubernetes.io/metadata.name": namespace}
        return self.namespace_selector.matches(labels)


class JobWebhooks(FrameworkWebhooks):
    """A job kind's mutating and validating handlers, bound to a view of the cluster and a configuration.

    The defaulting (queue, priority class, suspend, managedBy), the validation every kind shares
    and the start guard are Kueue's jobframework: a kind subclasses this, sets ``gvk`` and the
    class attributes below, and adds its own rules in :meth:`create_errors` (or :meth:`field_errors`).
    """

    default_managed_by = ""
    """``spec.managedBy`` that MultiKueue may replace: the kind's own controller (or unset)."""
    run_policy: tuple[str, ...] = ("spec",)
    """Where the kind keeps ``suspend`` and ``managedBy``: ``spec.runPolicy`` for the Kubeflow jobs."""

    def policy(self, job: Obj) -> Mapping[str, Any]:
        """The object holding the job's ``suspend`` and ``managedBy`` (read only)."""
        holder: Mapping[str, Any] = job
        for key in self.run_policy:
            holder = _m(holder.get(key))
        return holder

    def _set_policy(self, job: Obj, key: str, value: Any) -> None:
        """Set ``key`` in the job's policy object, copying each level on the way (copy on write)."""
        holder = job
        for step in self.run_policy:
            holder[step] = dict(_m(holder.get(step)))
            holder = holder[step]
        holder[key] = value

    def is_suspended(self, job: Obj) -> bool:
        """Kueue's ``IsSuspended``: suspended and not in the middle of being stopped."""
        return bool(self.policy(job).get("suspend")) and _annotations(job).get(STOPPING_ANNOTATION) != "true"

    async def is_managed(self, job: Obj, namespace: str) -> bool:
        """Kueue's ``WorkloadShouldBeSuspended``: a queue name, or no name but a selected namespace."""
        if _owner_is_integration(job, self.config.integration_kinds):
            return False
        if _label(job, QUEUE_LABEL):
            return True
        return self.config.manage_jobs_without_queue_name and await self._namespace_selected(namespace)

    # -- mutating ---------------------------------------------------------------------------------

    async def default(self, job: Obj, namespace: str) -> Obj:
        # Copy on write: a dict is copied only when something in it changes, so the rest stays
        # shared with the request and the patch walk skips it by identity (a deep copy dominated
        # the cost). A metadata, labels or spec that is not an object is answered as an empty one.
        metadata = job.get("metadata")
        if not isinstance(metadata, dict):
            metadata = job["metadata"] = {}
        if "labels" in metadata and not isinstance(metadata["labels"], dict):
            metadata = job["metadata"] = {**metadata, "labels": {}}
        if "spec" in job and not isinstance(job["spec"], dict):
            job["spec"] = {}
        owned = _owner_is_integration(job, self.config.integration_kinds)
        labels = _m(metadata.get("labels"))

        if not owned and (defaulted := await self.defaulted_labels(labels, namespace)) is not labels:
            labels = defaulted
            metadata = job["metadata"] = {**metadata, "labels": labels}

        if (
            not self.policy(job).get("suspend")
            and not metadata.get("deletionTimestamp")
            and await self.is_managed(job, namespace)
        ):
            self._set_policy(job, "suspend", True)

        queue = _text(labels.get(QUEUE_LABEL))
        if (
            self.config.multikueue
            and queue
            and self.policy(job).get("managedBy") in (None, self.default_managed_by)
        ):
            cluster_queue = await self.view.cluster_queue_of(namespace, queue)
            if (
                cluster_queue is not None
                and MULTIKUEUE_CONTROLLER in await self.view.admission_check_controllers(cluster_queue)
            ):
                self._set_policy(job, "managedBy", MULTIKUEUE_CONTROLLER)
        return job

    # -- validating -------------------------------------------------------------------------------

    async def object_errors(self, obj: Obj, old: Obj | None, namespace: str) -> list[FieldError]:
        return self.field_errors(obj, old, old is not None and await self.default_queue_exists(namespace))

    def field_errors(self, job: Obj, old: Obj | None, default_queue_exists: bool) -> list[FieldError]:
        """The kind's Kueue validation: create rules, plus update rules when ``old`` is given."""
        errors = self.create_errors(job)
        if old is not None:
            errors += self.update_errors(old, job, default_queue_exists)
        return errors

    def create_errors(self, job: Obj) -> list[FieldError]:
        """The kind's create rules (re-checked on update): the ones every kind shares, unless it has more."""
        return validate_managed_create(job)

    def update_errors(self, old: Obj, job: Obj, default_queue_exists: bool) -> list[FieldError]:
        """The update rules every kind shares: Kueue's ``ValidateJobOnUpdate`` and the admission gates."""
        errors = validate_managed_update(old, job, default_queue_exists, suspended=self.is_suspended)
        return errors + validate_admission_gates(old, job)

    async def guard(self, request: AdmissionRequest) -> None:
        """No self-admission: only kadmit's controller starts a managed Job, and only once admitted.

        Both conditions are required. The controller's identity alone would let a stale cache or a
        bug start a Job that holds no quota; admission alone would let a user start the Job before
        the controller has injected the flavors' nodeSelector, tolerations and the checks'
        podSetUpdates, so its pods would land on the wrong nodes. A replica whose cache lags
        merely delays the start: the controller retries.
        """
        job = request.object or {}
        old = request.old_object
        namespace = request.namespace_of(job)
        if request.operation == "CREATE":
            if not self.policy(job).get("suspend") and await self.is_managed(job, namespace):
                raise Denied(
                    f"{self.kind} {request.display_name} is managed by kadmit and must be created suspended "
                    f"(is the mutating webhook {self.mutating_name} registered?)"
                )
            return
        if old is None or not self.policy(old).get("suspend") or self.policy(job).get("suspend"):
            return
        if not await self.is_managed(old, namespace):
            return
        name = str(_m(old.get("metadata")).get("name") or request.name)
        who = f"{self.kind} {namespace}/{name}"
        if request.username != self.config.controller_username:
            raise Denied(
                f"{who} cannot be unsuspended by {request.username or 'an anonymous user'}: "
                f"kadmit starts it once its Workload is admitted"
            )
        uid = str(_m(old.get("metadata")).get("uid") or "")
        workload = await self.view.job_workload(namespace, name, uid)
        if workload is None or not is_admitted(workload):
            raise Denied(f"{who} cannot be unsuspended: its Workload is not admitted by kadmit")


def with_elastic_gate(holder: Obj, key: str) -> Obj:
    """``holder`` with the pod template at ``holder[key]`` gated by :data:`ELASTIC_GATE` (Kueue's
    ``GateTemplate``), copying each level it changes (copy on write)."""
    template = dict(_m(holder.get(key)))
    spec = dict(_m(template.get("spec")))
    gates = spec.get("schedulingGates")
    gates = list(gates) if isinstance(gates, list) else []
    if {"name": ELASTIC_GATE} in gates:
        return holder
    spec["schedulingGates"] = [*gates, {"name": ELASTIC_GATE}]
    template["spec"] = spec
    return {**holder, key: template}


class BatchJobWebhooks(JobWebhooks):
    """The batch/v1 Job handlers: Job's own create and update rules."""

    gvk = ("batch", "v1", "Job")
    default_managed_by = JOB_CONTROLLER

    @property
    def enabled(self) -> bool:
        """Jobs are always handled."""
        return True

    async def default(self, job: Obj, namespace: str) -> Obj:
        """The shared defaulting, then an elastic Job's Pods gated (Kueue's
        ``applyWorkloadSliceSchedulingGate``): each starts once a Workload slice grants it."""
        job = await super().default(job, namespace)
        if is_elastic(job):
            job["spec"] = with_elastic_gate(dict(_m(job.get("spec"))), "template")
        return job

    def field_errors(self, job: Obj, old: Obj | None, default_queue_exists: bool) -> list[FieldError]:
        errors = validate_job_create(job)
        if old is not None:
            if _annotations(job).get(MIN_PARALLELISM_ANNOTATION) == _annotations(old).get(
                MIN_PARALLELISM_ANNOTATION
            ):
                errors = [
                    e for e in errors if str(e.field) != str(ANNOTATIONS.key(MIN_PARALLELISM_ANNOTATION))
                ]
            errors += validate_job_update(old, job, default_queue_exists)
        return errors


def validate_managed_create(job: Obj) -> list[FieldError]:
    """Kueue's ``ValidateJobOnCreate`` rules every job kind shares: queue, prebuilt workload, max time."""
    errors: list[FieldError] = []
    labels = _labels(job)
    annotations = _annotations(job)
    for key in (QUEUE_LABEL, PREBUILT_WORKLOAD_KEY):
        if key in labels and (problems := dns1123_subdomain(labels[key])):
            errors.append(invalid(LABELS.key(key), labels[key], ",".join(problems)))
    if PREBUILT_WORKLOAD_KEY in annotations and (
        problems := dns1123_subdomain(annotations[PREBUILT_WORKLOAD_KEY])
    ):
        errors.append(
            invalid(
                ANNOTATIONS.key(PREBUILT_WORKLOAD_KEY), annotations[PREBUILT_WORKLOAD_KEY], ",".join(problems)
            )
        )
    if MAX_EXEC_TIME_LABEL in labels:
        text = labels[MAX_EXEC_TIME_LABEL]
        value = _parse_go_int(text)
        if value is None:
            errors.append(invalid(LABELS.key(MAX_EXEC_TIME_LABEL), text, _go_atoi_error(text)))
        elif value <= 0:
            errors.append(invalid(LABELS.key(MAX_EXEC_TIME_LABEL), value, "should be greater than 0"))
    return errors


def validate_job_create(job: Obj) -> list[FieldError]:
    """Kueue's create-time rules for a Job (also re-checked on every update)."""
    errors = validate_managed_create(job)
    annotations = _annotations(job)
    if MIN_PARALLELISM_ANNOTATION in annotations:
        text = annotations[MIN_PARALLELISM_ANNOTATION]
        value = _parse_go_int(text)
        path = ANNOTATIONS.key(MIN_PARALLELISM_ANNOTATION)
        if value is None:
            errors.append(invalid(path, text, _go_atoi_error(text)))
        elif value >= _pods_count(job) or value <= 0:
            errors.append(invalid(path, value, f"should be between 0 and {_pods_count(job) - 1}"))
        if ELASTIC_JOB_ANNOTATION in annotations:
            errors.append(forbidden(path, f"not allowed together with {ELASTIC_JOB_ANNOTATION}"))
    if COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION in annotations:
        text = annotations[COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION]
        path = ANNOTATIONS.key(COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION)
        enabled = _parse_go_bool(text)
        if enabled is None:
            errors.append(invalid(path, text, f'strconv.ParseBool: parsing "{text}": invalid syntax'))
        elif enabled:
            spec = _spec(job)
            if spec.get("completionMode", "NonIndexed") != "Indexed":
                errors.append(invalid(path, text, "should not be enabled for NonIndexed jobs"))
            parallelism = spec.get("parallelism", 1)
            completions = spec.get("completions", 1)
            if (1 if parallelism is None else parallelism) != (1 if completions is None else completions):
                errors.append(
                    invalid(
                        ROOT.child("spec", "completions"),
                        completions,
                        f"should be equal to parallelism when {COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION} "
                        "is annotation is true",
                    )
                )
    # Last, as in Kueue's validateCreate, so that several errors aggregate in Kueue's order.
    template_meta = _m(_m(_spec(job).get("template")).get("metadata"))
    errors += validate_tas_annotations(
        _string_map(template_meta.get("annotations")),
        ROOT.child("spec", "template", "metadata"),
        _pods_count(job),
    )
    return errors


def prebuilt_workload_name(job: Obj) -> str:
    """``kueue.x-k8s.io/prebuilt-workload-name``: the annotation, else the label (Kueue's order)."""
    return _annotations(job).get(PREBUILT_WORKLOAD_KEY) or _labels(job).get(PREBUILT_WORKLOAD_KEY) or ""


def validate_managed_update(
    old: Obj,
    new: Obj,
    default_queue_exists: bool,
    elastic: bool = False,
    suspended: Callable[[Obj], bool] = is_suspended,
) -> list[FieldError]:
    """Kueue's ``ValidateJobOnUpdate`` rules every job kind shares: what may not change while the
    job runs (queue, prebuilt workload, max time, an added priority class) and what may never go.
    ``suspended`` reads the kind's suspend flag (the Kubeflow jobs keep it in ``spec.runPolicy``)."""
    errors: list[FieldError] = []
    new_suspended = suspended(new)
    old_suspended = suspended(old)
    old_labels, new_labels = _labels(old), _labels(new)
    old_queue, new_queue = old_labels.get(QUEUE_LABEL, ""), new_labels.get(QUEUE_LABEL, "")
    if not new_suspended and old_queue != new_queue:
        errors.append(invalid(LABELS.key(QUEUE_LABEL), new_queue, FIELD_IMMUTABLE))
    if not new_queue and old_queue and default_queue_exists:
        errors.append(
            invalid(
                LABELS.key(QUEUE_LABEL), "", "queue-name must not be empty in namespace with default queue"
            )
        )
    prebuilt = prebuilt_workload_name(new)
    if not new_suspended and not elastic and prebuilt_workload_name(old) != prebuilt:
        errors.append(invalid(LABELS.key(PREBUILT_WORKLOAD_KEY), prebuilt, FIELD_IMMUTABLE))
    if (not new_suspended or not old_suspended) and old_labels.get(MAX_EXEC_TIME_LABEL, "") != new_labels.get(
        MAX_EXEC_TIME_LABEL, ""
    ):
        errors.append(
            invalid(LABELS.key(MAX_EXEC_TIME_LABEL), new_labels.get(MAX_EXEC_TIME_LABEL, ""), FIELD_IMMUTABLE)
        )
    return errors + priority_class_update_errors(old_labels, new_labels, new_suspended)


def priority_class_update_errors(
    old_labels: Mapping[str, str], new_labels: Mapping[str, str], suspended: bool
) -> list[FieldError]:
    """Kueue's rule for every kind: a WorkloadPriorityClass may not be added to a running
    workload, nor removed from any."""
    old_class, new_class = old_labels.get(PRIORITY_CLASS_LABEL, ""), new_labels.get(PRIORITY_CLASS_LABEL, "")
    if not suspended and not old_class and new_class:
        return [
            invalid(
                LABELS.key(PRIORITY_CLASS_LABEL),
                new_class,
                "WorkloadPriorityClass cannot be added to a non-suspended workload",
            )
        ]
    if old_class and not new_class:
        return [
            invalid(
                LABELS.key(PRIORITY_CLASS_LABEL),
                new_class,
                "WorkloadPriorityClass cannot be removed from a workload",
            )
        ]
    return []


def validate_admission_gates(old: Obj, new: Obj) -> list[FieldError]:
    """``kueue.x-k8s.io/admission-gated-by``: gates are set at creation and may only be removed."""
    old_gates = _split_gates(_annotations(old).get(ADMISSION_GATED_BY_ANNOTATION))
    new_gates = _split_gates(_annotations(new).get(ADMISSION_GATED_BY_ANNOTATION))
    if new_gates <= old_gates:
        return []
    return [
        invalid(
            ANNOTATIONS.key(ADMISSION_GATED_BY_ANNOTATION),
            _annotations(new).get(ADMISSION_GATED_BY_ANNOTATION, ""),
            "admission gates can only be removed, not added, after creation",
        )
    ]


def validate_job_update(old: Obj, new: Obj, default_queue_exists: bool) -> list[FieldError]:
    """Kueue's update rules for a Job: the shared ones, then elastic jobs and partial admission."""
    elastic = _annotations(old).get(ELASTIC_JOB_ANNOTATION) == "true"
    errors = validate_managed_update(old, new, default_queue_exists, elastic)
    new_suspended = is_suspended(new)
    old_suspended = is_suspended(old)
    new_elastic = _annotations(new).get(ELASTIC_JOB_ANNOTATION) == "true"
    if elastic != new_elastic:
        errors.append(invalid(LABELS.key(ELASTIC_JOB_ANNOTATION), new_elastic, FIELD_IMMUTABLE))
    errors += validate_admission_gates(old, new)
    if MIN_PARALLELISM_ANNOTATION in _annotations(old):
        old_parallelism = _spec(old).get("parallelism", 1)
        new_parallelism = _spec(new).get("parallelism", 1)
        if not _spec(old).get("suspend") and old_parallelism != new_parallelism:
            errors.append(
                forbidden(
                    ROOT.child("spec", "parallelism"),
                    "cannot change when partial admission is enabled and the job is not suspended",
                )
            )
    if (
        old_suspended == new_suspended
        and not new_suspended
        and _syncs_completions(old) != _syncs_completions(new)
    ):
        errors.append(
            forbidden(
                ANNOTATIONS.key(COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION),
                f"{FIELD_IMMUTABLE} while the job is not suspended",
            )
        )
    return errors


def _split_gates(value: str | None) -> set[str]:
    return {gate.strip() for gate in (value or "").split(",") if gate.strip()}


def _syncs_completions(job: Obj) -> bool:
    return _parse_go_bool(_annotations(job).get(COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION, "")) is True
