"""Defaulting and validation of built-in kinds: what the real registry strategies do on write.

Only the rules that clients notice are here: the defaults controllers read back (Job parallelism,
completions, selector and labels; Pod restartPolicy, dnsPolicy and container pull policies;
Namespace labels and phase) and the validations a real server rejects with 422.
"""

from __future__ import annotations

import re
from typing import Any

from kadmit.localcluster.errors import cause, forbidden_field, invalid_value, required, unsupported_value
from kadmit.localcluster.limitranges import default_limit_range, validate_limit_range
from kadmit.localcluster.objects import Obj, copy_json
from kadmit.localcluster.quantity import Quantity, QuantityError

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")

# Kinds whose names must be DNS-1123 labels rather than subdomains.
LABEL_NAMED = {("", "namespaces"), ("", "services")}


# -- defaulting ---------------------------------------------------------------------------------


def default_object(group: str, plural: str, obj: Obj) -> None:
    """Fill server-side defaults in place (the object is a fresh copy owned by the request)."""
    if group == "" and plural == "namespaces":
        meta = obj["metadata"]
        labels = meta.get("labels") or {}
        labels["kubernetes.io/metadata.name"] = meta["name"]
        meta["labels"] = labels
        spec = obj.get("spec") or {}
        spec.setdefault("finalizers", ["kubernetes"])
        obj["spec"] = spec
        status = obj.get("status") or {}
        status.setdefault("phase", "Active")
        obj["status"] = status
    elif group == "" and plural == "pods":
        spec = obj.get("spec")
        if isinstance(spec, dict):
            default_pod_spec(spec, restart_policy="Always")
            _default_requests_to_limits(spec)
        status = obj.get("status") or {}
        status.setdefault("phase", "Pending")
        status.setdefault("qosClass", _qos_class(spec if isinstance(spec, dict) else {}))
        obj["status"] = status
    elif group == "" and plural == "limitranges":
        default_limit_range(obj)
    elif group == "" and plural == "podtemplates":
        template = obj.get("template")
        if isinstance(template, dict) and isinstance(template.get("spec"), dict):
            default_pod_spec(template["spec"], restart_policy="Always")
    elif group == "batch" and plural == "jobs":
        default_job(obj)
    elif group == "apps" and plural in ("deployments", "replicasets", "statefulsets"):
        default_apps(plural, obj)
    elif group == "" and plural == "secrets":
        obj.setdefault("type", "Opaque")
    elif group == "" and plural == "services":
        spec = obj.get("spec")
        if isinstance(spec, dict):
            spec.setdefault("type", "ClusterIP")
            spec.setdefault("sessionAffinity", "None")
            for port in spec.get("ports") or []:
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")
                    port.setdefault("targetPort", port.get("port"))
    elif group == "apiregistration.k8s.io" and plural == "apiservices":
        service = (obj.get("spec") or {}).get("service")
        if isinstance(service, dict):
            service.setdefault("port", 443)
    elif group == "admissionregistration.k8s.io":
        for hook in obj.get("webhooks") or []:
            if isinstance(hook, dict):
                hook.setdefault("failurePolicy", "Fail")
                hook.setdefault("matchPolicy", "Equivalent")
                hook.setdefault("namespaceSelector", {})
                hook.setdefault("objectSelector", {})
                hook.setdefault("timeoutSeconds", 10)
                if plural == "mutatingwebhookconfigurations":
                    hook.setdefault("reinvocationPolicy", "Never")
                service = (hook.get("clientConfig") or {}).get("service")
                if isinstance(service, dict):
                    service.setdefault("port", 443)
                for rule in hook.get("rules") or []:
                    if isinstance(rule, dict):
                        rule.setdefault("scope", "*")


def default_apps(plural: str, obj: Obj) -> None:
    """apps/v1 defaults: one replica, the template's pod spec, and the status counts that are not
    ``omitempty`` (a ReplicaSet's and StatefulSet's ``replicas``, a StatefulSet's ``availableReplicas``)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("replicas", 1)
    template = spec.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        default_pod_spec(template["spec"], restart_policy="Always")
    if plural == "statefulsets":
        spec.setdefault("podManagementPolicy", "OrderedReady")
    found = obj.get("status")
    status: Obj = found if isinstance(found, dict) else {}
    if plural in ("replicasets", "statefulsets"):
        status.setdefault("replicas", 0)
    if plural == "statefulsets":
        status.setdefault("availableReplicas", 0)
    obj["status"] = status


def default_pod_spec(spec: Obj, restart_policy: str) -> None:
    spec.setdefault("restartPolicy", restart_policy)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            if not isinstance(container, dict):
                continue
            image = str(container.get("image", ""))
            tag = image.rsplit("/", 1)[-1]
            latest = ":" not in tag or tag.endswith(":latest")
            container.setdefault("imagePullPolicy", "Always" if latest and "@" not in tag else "IfNotPresent")
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            container.setdefault("resources", {})
            for port in container.get("ports") or []:
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")


def _default_requests_to_limits(spec: Obj) -> None:
    """``SetDefaults_Pod``: a container's missing request is its limit. Pods only, not templates;
    it runs before admission, so a LimitRange's ``defaultRequest`` never undercuts a stated limit."""
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            resources = container.get("resources") if isinstance(container, dict) else None
            limits = resources.get("limits") if isinstance(resources, dict) else None
            if not isinstance(resources, dict) or not isinstance(limits, dict) or not limits:
                continue
            requests = resources.get("requests")
            if not isinstance(requests, dict):
                requests = resources["requests"] = {}
            for name, value in limits.items():
                requests.setdefault(name, value)


def prepare_pod_for_create(pod: Obj) -> None:
    """The pod strategy's ``PrepareForCreate``, after mutating admission: the QoS class of the
    resources as admitted (a LimitRange or a webhook may have filled them in)."""
    spec = pod.get("spec")
    status = pod.get("status")
    if isinstance(status, dict):
        status["qosClass"] = _qos_class(spec if isinstance(spec, dict) else {})


QOS_RESOURCES = ("cpu", "memory")  # helper/qos isSupportedQoSComputeResource


def _qos_class(spec: Obj) -> str:
    """``ComputePodQOS`` (pkg/apis/core/helper/qos, PodLevelResources off as in 1.32): the cpu and
    memory requests and limits above zero, summed over the containers and the init containers.
    BestEffort with none; Guaranteed when every container limits both and the sums of the
    requests equal the sums of the limits, resource by resource; Burstable otherwise."""
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}
    guaranteed = True
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                resources = {}
            _sum_qos(resources.get("requests"), requests)
            if not set(QOS_RESOURCES) <= _sum_qos(resources.get("limits"), limits):
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    equal = all(name in limits and limits[name].value == q.value for name, q in requests.items())
    return "Guaranteed" if guaranteed and equal and len(requests) == len(limits) else "Burstable"


def _sum_qos(values: Any, total: dict[str, Quantity]) -> set[str]:
    """Add the cpu and memory amounts above zero of one ResourceList into ``total``; their names."""
    found: set[str] = set()
    if not isinstance(values, dict):
        return found
    for name in QOS_RESOURCES:
        if name not in values:
            continue
        try:
            amount = Quantity.parse(values[name])
        except QuantityError:
            continue  # validation has refused it already
        if amount.value > 0:
            found.add(name)
            total[name] = total[name] + amount if name in total else amount
    return found


def default_job(obj: Obj) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6 if spec.get("backoffLimitPerIndex") is None else 2147483647)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("manualSelector", None)
    if spec["manualSelector"] is None:
        spec.pop("manualSelector")
    if "podFailurePolicy" not in spec:
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    template = spec.get("template")
    if isinstance(template, dict):
        tspec = template.get("spec")
        if isinstance(tspec, dict):
            default_pod_spec(tspec, restart_policy="")
            if tspec.get("restartPolicy") == "":
                tspec.pop("restartPolicy")
    meta = obj["metadata"]
    if not spec.get("manualSelector") and isinstance(template, dict):
        uid = meta.get("uid", "")
        selector_labels = {"batch.kubernetes.io/controller-uid": uid}
        if "selector" not in spec:
            spec["selector"] = {"matchLabels": dict(selector_labels)}
        tmeta = template.get("metadata") or {}
        labels = tmeta.get("labels") or {}
        labels.setdefault("batch.kubernetes.io/controller-uid", uid)
        labels.setdefault("batch.kubernetes.io/job-name", meta["name"])
        labels.setdefault("controller-uid", uid)
        labels.setdefault("job-name", meta["name"])
        tmeta["labels"] = labels
        template["metadata"] = tmeta


# -- validation ---------------------------------------------------------------------------------


def validate_metadata(group: str, plural: str, obj: Obj) -> list[Obj]:
    meta = obj.get("metadata") or {}
    causes: list[Obj] = []
    name = meta.get("name", "")
    pattern = DNS1123_LABEL if (group, plural) in LABEL_NAMED else DNS1123_SUBDOMAIN
    limit = 63 if (group, plural) in LABEL_NAMED else 253
    if not isinstance(name, str) or not pattern.fullmatch(name) or len(name) > limit:
        kind = "RFC 1123 label" if limit == 63 else "RFC 1123 subdomain"
        causes.append(
            invalid_value(
                "metadata.name",
                name,
                f"a lowercase {kind} must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character",
            )
        )
    for key, value in (meta.get("labels") or {}).items():
        prefix, _, local = key.rpartition("/")
        if (
            not LABEL_NAME.fullmatch(local)
            or len(local) > 63
            or (prefix and not DNS1123_SUBDOMAIN.fullmatch(prefix))
        ):
            causes.append(
                invalid_value(
                    "metadata.labels",
                    key,
                    "name part must consist of alphanumeric characters, '-', '_' or '.'",
                )
            )
        if not isinstance(value, str) or not LABEL_VALUE.fullmatch(value) or len(value) > 63:
            causes.append(
                invalid_value(
                    "metadata.labels",
                    value,
                    "a valid label must be an empty string or "
                    "consist of alphanumeric characters, '-', '_' or '.'",
                )
            )
    for key, value in (meta.get("annotations") or {}).items():
        if not isinstance(value, str):
            causes.append(invalid_value(f"metadata.annotations[{key}]", value, "must be a string"))
    return causes


def validate_object(group: str, plural: str, obj: Obj, old: Obj | None) -> list[Obj]:
    """Field causes for an invalid object (empty when it is valid)."""
    causes = validate_metadata(group, plural, obj)
    if group == "" and plural == "pods":
        causes += validate_pod_spec(obj.get("spec"), "spec", allowed_restart=("Always", "OnFailure", "Never"))
        if old is not None:
            causes += _pod_update(obj, old)
    elif group == "batch" and plural == "jobs":
        causes += validate_job(obj, old)
    elif group == "" and plural == "configmaps":
        for key in ("data", "binaryData"):
            for k, v in (obj.get(key) or {}).items():
                if not isinstance(v, str):
                    causes.append(invalid_value(f"{key}[{k}]", v, "must be a string"))
    elif group == "" and plural == "limitranges":
        causes += validate_limit_range(obj)
    elif group == "coordination.k8s.io" and plural == "leases":
        duration = (obj.get("spec") or {}).get("leaseDurationSeconds")
        if duration is not None and (not isinstance(duration, int) or duration <= 0):
            causes.append(invalid_value("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    elif group == "admissionregistration.k8s.io":
        for i, hook in enumerate(obj.get("webhooks") or []):
            causes += _validate_webhook(hook, f"webhooks[{i}]")
    elif group == "apiregistration.k8s.io" and plural == "apiservices":
        causes += _validate_apiservice(obj)
    return causes


def _validate_apiservice(obj: Obj) -> list[Obj]:
    """kube-aggregator's ``ValidateAPIService``: the name is ``<version>.<group>``, the
    priorities in range, a service with a name and namespace, caBundle or insecure, not both."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    causes: list[Obj] = []
    version, group = spec.get("version"), spec.get("group")
    if not version:
        causes.append(required("spec.version"))
    if not group and version != "v1":
        causes.append(required("spec.group", "only v1 may have an empty group and it better be legacy kube"))
    if version and obj["metadata"].get("name") != f"{version}.{group or ''}".rstrip("."):
        causes.append(
            invalid_value(
                "metadata.name", obj["metadata"].get("name"), 'must be `spec.version+"."+spec.group`'
            )
        )
    for key, ceiling in (("groupPriorityMinimum", 20000), ("versionPriority", 1000)):
        value = spec.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= ceiling:
            causes.append(invalid_value(f"spec.{key}", value, f"must be positive and less than {ceiling}"))
    if spec.get("insecureSkipTLSVerify") and spec.get("caBundle"):
        causes.append(
            invalid_value("spec.insecureSkipTLSVerify", True, "may not be true if caBundle is present")
        )
    service = spec.get("service")
    if service is not None:
        if not isinstance(service, dict):
            causes.append(invalid_value("spec.service", service, "must be an object"))
        else:
            for key in ("namespace", "name"):
                if not service.get(key):
                    causes.append(required(f"spec.service.{key}"))
    return causes


def validate_pod_spec(spec: Any, path: str, allowed_restart: tuple[str, ...]) -> list[Obj]:
    if not isinstance(spec, dict):
        return [required(path)]
    causes: list[Obj] = []
    containers = spec.get("containers")
    if not containers:
        causes.append(required(f"{path}.containers"))
    names: set[str] = set()
    for key in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(key) or []):
            where = f"{path}.{key}[{i}]"
            if not isinstance(container, dict):
                causes.append(invalid_value(where, container, "must be an object"))
                continue
            name = container.get("name")
            if not name:
                causes.append(required(f"{where}.name"))
            elif not isinstance(name, str) or not DNS1123_LABEL.fullmatch(name):
                causes.append(invalid_value(f"{where}.name", name, "must be a DNS-1123 label"))
            elif name in names:
                causes.append(cause("FieldValueDuplicate", f"{where}.name", f'Duplicate value: "{name}"'))
            else:
                names.add(name)
            if not container.get("image"):
                causes.append(required(f"{where}.image"))
            causes += _requests_within_limits(container.get("resources"), f"{where}.resources")
    restart = spec.get("restartPolicy")
    if restart is None or restart == "":
        causes.append(required(f"{path}.restartPolicy"))
    elif restart not in allowed_restart:
        causes.append(unsupported_value(f"{path}.restartPolicy", restart, list(allowed_restart)))
    return causes


def _requests_within_limits(resources: Any, path: str) -> list[Obj]:
    """``ValidateResourceRequirements``: a request may not exceed the limit of its resource (the
    limit may be LimitRanger's default, which admission gave it before validation)."""
    if not isinstance(resources, dict):
        return []
    requests, limits = resources.get("requests"), resources.get("limits")
    if not isinstance(requests, dict) or not isinstance(limits, dict):
        return []
    causes: list[Obj] = []
    for name in sorted(requests):
        if name not in limits:
            continue
        try:
            request, limit = Quantity.parse(requests[name]), Quantity.parse(limits[name])
        except QuantityError:
            continue  # refused where quantities are read
        if request.value > limit.value:
            detail = f"must be less than or equal to {name} limit of {limit}"
            causes.append(invalid_value(f"{path}.requests[{name}]", str(request), detail))
    return causes


_POD_MUTABLE_SPEC = (
    "activeDeadlineSeconds",
    "tolerations",
    "terminationGracePeriodSeconds",
    "schedulingGates",
)


def _pod_update(obj: Obj, old: Obj) -> list[Obj]:
    new_spec = {k: v for k, v in (obj.get("spec") or {}).items() if k not in _POD_MUTABLE_SPEC}
    old_spec = {k: v for k, v in (old.get("spec") or {}).items() if k not in _POD_MUTABLE_SPEC}
    causes = _scheduling_gate_update(obj.get("spec") or {}, old.get("spec") or {})
    if (old.get("spec") or {}).get("schedulingGates"):
        # Pod scheduling readiness: while a Pod is gated, its node selector may grow and its
        # affinity may be set, so that whoever removes the gate can say where it runs.
        causes += _node_selector_additions(
            new_spec.pop("nodeSelector", None), old_spec.pop("nodeSelector", None)
        )
        new_spec.pop("affinity", None)
        old_spec.pop("affinity", None)
    # Container images may change; compare the rest.
    for spec in (new_spec, old_spec):
        spec["containers"] = [
            {k: v for k, v in c.items() if k != "image"}
            for c in spec.get("containers") or []
            if isinstance(c, dict)
        ]
        spec["initContainers"] = [
            {k: v for k, v in c.items() if k != "image"}
            for c in spec.get("initContainers") or []
            if isinstance(c, dict)
        ]
    if new_spec.get("nodeName") and not old_spec.get("nodeName"):
        old_spec["nodeName"] = new_spec["nodeName"]  # binding
    if new_spec != old_spec:
        causes.append(
            forbidden_field(
                "spec",
                "pod updates may not change fields other than `spec.containers[*].image`,"
                "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
                "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
                "(allow it to be set to 1 if it was previously negative)",
            )
        )
    return causes


def _gate_names(spec: Obj) -> list[str]:
    return [str(g.get("name")) for g in spec.get("schedulingGates") or [] if isinstance(g, dict)]


def _scheduling_gate_update(spec: Obj, old_spec: Obj) -> list[Obj]:
    """Scheduling gates are set at creation; an update may only remove them."""
    old_gates = set(_gate_names(old_spec))
    for name in _gate_names(spec):
        if name not in old_gates:
            return [
                forbidden_field(
                    "spec.schedulingGates",
                    f"only deletion is allowed, but found new scheduling gate '{name}'",
                )
            ]
    return []


def _node_selector_additions(new: Any, old: Any) -> list[Obj]:
    old_map = old if isinstance(old, dict) else {}
    new_map = new if isinstance(new, dict) else {}
    if any(new_map.get(key) != value for key, value in old_map.items()):
        return [
            invalid_value(
                "spec.nodeSelector",
                new_map,
                "only additions to spec.nodeSelector are allowed (no mutations or deletions)",
            )
        ]
    return []


# Pod template fields of a suspended Job that may change (the scheduling directives Kueue injects).
_JOB_MUTABLE_TEMPLATE = ("nodeSelector", "tolerations", "affinity", "schedulingGates")


def validate_job(obj: Obj, old: Obj | None) -> list[Obj]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    causes: list[Obj] = []
    template = spec.get("template")
    if not isinstance(template, dict):
        causes.append(required("spec.template"))
    else:
        causes += validate_pod_spec(template.get("spec"), "spec.template.spec", ("OnFailure", "Never"))
    for field in (
        "parallelism",
        "completions",
        "backoffLimit",
        "activeDeadlineSeconds",
        "ttlSecondsAfterFinished",
    ):
        value = spec.get(field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            causes.append(invalid_value(f"spec.{field}", value, "must be greater than or equal to 0"))
    mode = spec.get("completionMode")
    if mode not in (None, "NonIndexed", "Indexed"):
        causes.append(unsupported_value("spec.completionMode", mode, ["NonIndexed", "Indexed"]))
    if mode == "Indexed" and spec.get("completions") is None:
        causes.append(required("spec.completions", "when completion mode is Indexed"))
    if old is not None:
        causes += _job_update(spec, old.get("spec") or {}, old)
    return causes


def _job_update(spec: Obj, old_spec: Obj, old: Obj) -> list[Obj]:
    causes: list[Obj] = []
    for field in ("selector", "completionMode", "podFailurePolicy", "manualSelector"):
        if spec.get(field) != old_spec.get(field):
            causes.append(invalid_value(f"spec.{field}", spec.get(field), "field is immutable"))
    if spec.get("completions") != old_spec.get("completions") and spec.get("completionMode") != "Indexed":
        causes.append(invalid_value("spec.completions", spec.get("completions"), "field is immutable"))
    new_t, old_t = spec.get("template") or {}, old_spec.get("template") or {}
    if new_t != old_t:
        never_started = old_spec.get("suspend") and not (old.get("status") or {}).get("startTime")
        if not never_started or _strip_mutable(new_t) != _strip_mutable(old_t):
            causes.append(invalid_value("spec.template", new_t, "field is immutable"))
    return causes


def _strip_mutable(template: Obj) -> Obj:
    out = copy_json(template)
    meta = out.get("metadata") or {}
    meta.pop("labels", None)
    meta.pop("annotations", None)
    spec = out.get("spec") or {}
    for key in _JOB_MUTABLE_TEMPLATE:
        spec.pop(key, None)
    return out  # type: ignore[no-any-return]


def _validate_webhook(hook: Any, path: str) -> list[Obj]:
    if not isinstance(hook, dict):
        return [invalid_value(path, hook, "must be an object")]
    causes: list[Obj] = []
    if not hook.get("name"):
        causes.append(required(f"{path}.name"))
    config = hook.get("clientConfig") or {}
    if bool(config.get("url")) == bool(config.get("service")):
        causes.append(required(f"{path}.clientConfig", "exactly one of url or service is required"))
    if not hook.get("sideEffects"):
        causes.append(required(f"{path}.sideEffects"))
    if not hook.get("admissionReviewVersions"):
        causes.append(required(f"{path}.admissionReviewVersions"))
    policy = hook.get("failurePolicy")
    if policy not in (None, "Fail", "Ignore"):
        causes.append(unsupported_value(f"{path}.failurePolicy", policy, ["Fail", "Ignore"]))
    return causes
