"""Defaulting and validation of the Kueue objects, with Kueue's rules and Kueue's messages.

Only what the CRD schemas cannot say lives here (contract §1): cross-field rules, rules that
compare with the stored object, and label/taint syntax. After these rules pass, the object is
also read by :mod:`kadmit.engine.parse`, the model the scheduler runs on, so the webhook never admits
an object that the engine would refuse; the engine's message is then the denial.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from kadmit.engine import parse as engine_parse
from kadmit.engine.concurrent_admission import TRY_PREFERRED_FLAVORS
from kadmit.engine.errors import InvalidObject, UnsupportedConfiguration
from kadmit.engine.model import Workload as EngineWorkload
from kadmit.engine.quantity import QuantityError, parse_exact, resource_value
from kadmit.webhook.fielderrors import (
    NOT_FOUND,
    OMIT,
    ROOT,
    FieldError,
    Path,
    Quantity,
    aggregate,
    duplicate,
    forbidden,
    invalid,
    not_supported,
    required,
    too_many,
)
from kadmit.webhook.names import dns1035_label, dns1123_label, dns1123_subdomain, label_value, qualified_name
from kadmit.webhook.objects import mapping as _m
from kadmit.webhook.review import AdmissionRequest, Denied, Webhook
from kadmit.workload import Obj, is_true

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
FINALIZER = "kueue.x-k8s.io/resource-in-use"
FIELD_IMMUTABLE = "field is immutable"
NEGATIVE = "must be greater than or equal to 0"
TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
SPEC = ROOT.child("spec")

Rules = Callable[[Obj, Obj | None], list[FieldError]]


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _name_ref(value: Any, path: Path) -> list[FieldError]:
    if not isinstance(value, str):
        return [invalid(path, value, "must be a string")]
    return [invalid(path, value, msg) for msg in dns1123_subdomain(value)]


def _quantity(value: Any, path: Path) -> tuple[Fraction | None, list[FieldError]]:
    try:
        number = parse_exact(value)
    except QuantityError as exc:
        return None, [invalid(path, value, str(exc))]
    if number < 0:
        return number, [invalid(path, str(value), NEGATIVE)]
    return number, []


# -- shared pieces ---------------------------------------------------------------------------------


def validate_resource_groups(groups: Any, path: Path, has_parent: bool, is_cohort: bool) -> list[FieldError]:
    """Kueue's ``validateResourceGroups``: duplicates, order, limits that need a parent."""
    errors: list[FieldError] = []
    groups = _l(groups)
    if len(groups) > 16:
        errors.append(too_many(path, len(groups), 16))
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    parent_word = "parent" if is_cohort else "cohort"
    for i, raw_group in enumerate(groups):
        group = _m(raw_group)
        gpath = path.index(i)
        covered = [str(c) for c in _l(group.get("coveredResources"))]
        for j, name in enumerate(covered):
            cpath = gpath.child("coveredResources").index(j)
            errors += [invalid(cpath, name, msg) for msg in qualified_name(name)]
            if name in seen_resources:
                errors.append(duplicate(cpath, name))
            seen_resources.add(name)
        for j, raw_flavor in enumerate(_l(group.get("flavors"))):
            flavor = _m(raw_flavor)
            fpath = gpath.child("flavors").index(j)
            resources = _l(flavor.get("resources"))
            if len(resources) != len(covered):
                # Kueue's CRD says this (CEL); kept here for API servers that do not run CEL.
                message = "must have the same number of resources as the coveredResources"
                errors.append(invalid(fpath.child("resources"), OMIT, message))
            for k, raw_quota in enumerate(resources[: len(covered)]):
                errors += _validate_quota(
                    _m(raw_quota),
                    covered[k],
                    fpath.child("resources").index(k),
                    has_parent,
                    is_cohort,
                    parent_word,
                )
            flavor_name = flavor.get("name")
            if str(flavor_name) in seen_flavors:
                errors.append(duplicate(fpath.child("name"), flavor_name))
            seen_flavors.add(str(flavor_name))
    return errors


def _validate_quota(
    quota: Obj, covered: str, qpath: Path, has_parent: bool, is_cohort: bool, parent_word: str
) -> list[FieldError]:
    """One ResourceQuota, in the order Kueue's ``validateFlavorQuotas`` reports."""
    errors: list[FieldError] = []
    if quota.get("name") != covered:
        errors.append(
            invalid(qpath.child("name"), quota.get("name"), "must match the name in coveredResources")
        )
    nominal, problems = _quantity(quota.get("nominalQuota", 0), qpath.child("nominalQuota"))
    errors += problems
    parentless = f"must be nil when {parent_word} is empty"
    if quota.get("borrowingLimit") is not None:
        bpath = qpath.child("borrowingLimit")
        if not has_parent:
            errors.append(invalid(bpath, str(quota["borrowingLimit"]), parentless))
        errors += _quantity(quota["borrowingLimit"], bpath)[1]
    if quota.get("lendingLimit") is not None:
        lpath = qpath.child("lendingLimit")
        lending, problems = _quantity(quota["lendingLimit"], lpath)
        errors += problems
        if not has_parent:
            errors.append(invalid(lpath, str(quota["lendingLimit"]), parentless))
        if not is_cohort and lending is not None and nominal is not None and lending > nominal:
            errors.append(
                invalid(lpath, str(quota["lendingLimit"]), "must be less than or equal to the nominalQuota")
            )
    return errors


def validate_group_totals(groups: Any, path: Path) -> list[FieldError]:
    """Kueue's limits on the totals: flavors, covered resources, flavor-resource pairs per group."""
    errors: list[FieldError] = []
    groups = [_m(g) for g in _l(groups)]
    flavors = sum(len(_l(g.get("flavors"))) for g in groups)
    if flavors > 256:
        errors.append(
            invalid(
                path,
                flavors,
                f"total number of flavors across all resourceGroups must be ≤ 256, got {flavors}",
            )
        )
    covered = sum(len(_l(g.get("coveredResources"))) for g in groups)
    if covered > 256:
        message = f"total number of covered resources across all resourceGroups must be ≤ 256, got {covered}"
        errors.append(invalid(path, covered, message))
    for i, group in enumerate(groups):
        combinations = sum(len(_l(_m(f).get("resources"))) for f in _l(group.get("flavors")))
        if combinations > 512:
            message = (
                f"number of flavor-resource combinations in a resourceGroup must be ≤ 512, got {combinations}"
            )
            errors.append(invalid(path.index(i), combinations, message))
    return errors


def validate_fair_sharing(spec: Obj, path: Path) -> list[FieldError]:
    """Kueue's ``validateFairSharing``: errors name ``fairSharing`` itself, not its weight."""
    weight = _m(spec.get("fairSharing")).get("weight")
    if weight is None:
        return []
    fpath = path.child("fairSharing")
    value, errors = _quantity(weight, fpath)
    if value is not None and 0 < value <= Fraction(1, 10**9):
        errors.append(invalid(fpath, str(weight), "When not 0, weight must be > 10e-9"))
    return errors


def validate_label_selector(selector: Any, path: Path) -> list[FieldError]:
    """``metav1validation.ValidateLabelSelector`` (operators and their values)."""
    errors: list[FieldError] = []
    selector = _m(selector)
    for i, raw in enumerate(_l(selector.get("matchExpressions"))):
        expr = _m(raw)
        epath = path.child("matchExpressions").index(i)
        operator, values = expr.get("operator"), _l(expr.get("values"))
        if operator in ("In", "NotIn"):
            if not values:
                errors.append(
                    required(epath.child("values"), "must be specified when `operator` is 'In' or 'NotIn'")
                )
        elif operator in ("Exists", "DoesNotExist"):
            if values:
                errors.append(
                    forbidden(
                        epath.child("values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    )
                )
        else:
            errors.append(invalid(epath.child("operator"), operator, "not a valid selector operator"))
        errors += [
            invalid(epath.child("key"), expr.get("key"), m) for m in qualified_name(str(expr.get("key", "")))
        ]
    for key, value in _m(selector.get("matchLabels")).items():
        mpath = path.child("matchLabels")
        errors += [invalid(mpath, key, m) for m in qualified_name(str(key))]
        errors += [invalid(mpath, value, m) for m in label_value(str(value))]
    return errors


def validate_labels(labels: Any, path: Path) -> list[FieldError]:
    """``metav1validation.ValidateLabels``: keys are qualified names, values label values."""
    errors: list[FieldError] = []
    for key, value in _m(labels).items():
        errors += [invalid(path, key, m) for m in qualified_name(str(key))]
        errors += [invalid(path, value, m) for m in label_value(str(value))]
    return errors


def validate_annotations(annotations: Any, path: Path) -> list[FieldError]:
    errors: list[FieldError] = []
    for key in _m(annotations):
        errors += [invalid(path, key, m) for m in qualified_name(str(key).lower())]
    return errors


def validate_tolerations(tolerations: Any, path: Path) -> list[FieldError]:
    """Kubernetes' core ``validateTolerations``, as the flavor and podSetUpdates webhooks use it."""
    errors: list[FieldError] = []
    for i, raw in enumerate(_l(tolerations)):
        toleration = _m(raw)
        tpath = path.index(i)
        key = str(toleration.get("key") or "")
        operator = toleration.get("operator") or "Equal"
        value = str(toleration.get("value") or "")
        effect = toleration.get("effect") or ""
        if key:
            errors += [invalid(tpath.child("key"), key, m) for m in qualified_name(key)]
        if not key and operator != "Exists":
            errors.append(
                invalid(
                    tpath.child("operator"),
                    operator,
                    "operator must be Exists when `key` is empty, "
                    'which means "match all values and all keys"',
                )
            )
        if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
            errors.append(
                invalid(
                    tpath.child("effect"),
                    effect,
                    "effect must be 'NoExecute' when `tolerationSeconds` is set",
                )
            )
        if operator == "Equal":
            if problems := label_value(value):
                errors.append(invalid(tpath.child("operator"), value, ";".join(problems)))
        elif operator == "Exists":
            if value:
                errors.append(
                    invalid(
                        tpath.child("operator"), toleration, "value must be empty when `operator` is 'Exists'"
                    )
                )
        else:
            errors.append(not_supported(tpath.child("operator"), operator, ["Equal", "Exists"]))
        if effect and effect not in TAINT_EFFECTS:
            errors.append(not_supported(tpath.child("effect"), effect, TAINT_EFFECTS))
    return errors


# -- per kind --------------------------------------------------------------------------------------


def validate_cluster_queue(cq: Obj, old: Obj | None, concurrent_admission: bool = False) -> list[FieldError]:
    """Kueue's ``ValidateClusterQueue`` / ``ValidateClusterQueueUpdate`` (HEAD), in its order;
    ``concurrent_admission``: the ConcurrentAdmission feature gate (the policy is checked)."""
    spec = _m(cq.get("spec"))
    cohort = spec.get("cohortName") or ""
    errors: list[FieldError] = []
    groups_path = SPEC.child("resourceGroups")
    errors += validate_resource_groups(spec.get("resourceGroups"), groups_path, bool(cohort), False)
    if spec.get("namespaceSelector") is not None:
        errors += validate_label_selector(spec.get("namespaceSelector"), SPEC.child("namespaceSelector"))
    preemption = _m(spec.get("preemption"))
    borrow = _m(preemption.get("borrowWithinCohort")).get("policy") or "Never"
    if (preemption.get("reclaimWithinCohort") or "Never") == "Never" and borrow != "Never":
        errors.append(
            invalid(
                SPEC.child("preemption"),
                preemption,
                "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
            )
        )
    fungibility = _m(spec.get("flavorFungibility"))
    preference = fungibility.get("preference")
    if preference is not None and (
        (fungibility.get("whenCanBorrow") or "MayStopSearch") != "TryNextFlavor"
        or (fungibility.get("whenCanPreempt") or "TryNextFlavor") != "TryNextFlavor"
    ):
        message = f"preference {json.dumps(preference)} requires both whenCanBorrow and whenCanPreempt"
        message += " to be TryNextFlavor"
        errors.append(invalid(SPEC.child("flavorFungibility", "preference"), preference, message))
    errors += validate_fair_sharing(spec, SPEC)
    errors += validate_group_totals(spec.get("resourceGroups"), groups_path)
    if concurrent_admission:
        errors += validate_concurrent_admission_policy(spec)
    errors += _validate_on_flavors(spec, _m(old.get("spec")) if old is not None else None)
    if old is not None and spec.get("concurrentAdmissionPolicy") != _m(old.get("spec")).get(
        "concurrentAdmissionPolicy"
    ):
        errors.append(invalid(SPEC.child("concurrentAdmissionPolicy"), OMIT, FIELD_IMMUTABLE))
    return errors


MAX_CONCURRENT_ADMISSION_FLAVORS = 16


def validate_concurrent_admission_policy(spec: Obj) -> list[FieldError]:
    """Kueue's ``validateConcurrentAdmissionPolicy`` (with the ConcurrentAdmission gate on)."""
    policy = spec.get("concurrentAdmissionPolicy")
    if policy is None:
        return []
    errors: list[FieldError] = []
    groups = _l(spec.get("resourceGroups"))
    groups_path = SPEC.child("resourceGroups")
    if len(groups) != 1:
        errors.append(
            invalid(
                groups_path,
                len(groups),
                "must have exactly one ResourceGroup when ConcurrentAdmissionPolicy is defined",
            )
        )
    elif len(_l(_m(groups[0]).get("flavors"))) > MAX_CONCURRENT_ADMISSION_FLAVORS:
        errors.append(
            invalid(
                groups_path.index(0).child("flavors"),
                len(_l(_m(groups[0]).get("flavors"))),
                f"cannot have more than {MAX_CONCURRENT_ADMISSION_FLAVORS} resource flavors in the "
                "ResourceGroup when ConcurrentAdmissionPolicy is defined",
            )
        )
    migration = _m(_m(policy).get("migration"))
    constraints = migration.get("constraints")
    path = SPEC.child("concurrentAdmissionPolicy", "migration", "constraints")
    if constraints is not None:
        mode = migration.get("mode") or ""
        last = _m(constraints).get("lastAcceptableFlavorName")
        if mode and mode != TRY_PREFERRED_FLAVORS:
            errors.append(
                forbidden(
                    path, f'may only be set when migration.mode is "{TRY_PREFERRED_FLAVORS}" (got "{mode}")'
                )
            )
        elif last is not None and last not in (flavors := _cq_flavors(spec)):
            errors.append(
                invalid(
                    path.child("lastAcceptableFlavorName"),
                    last,
                    f"must be one of the flavors defined in the ClusterQueue: [{' '.join(sorted(flavors))}]",
                )
            )
    if spec.get("queueingStrategy") == "StrictFIFO":
        errors.append(
            invalid(
                SPEC.child("queueingStrategy"),
                "StrictFIFO",
                "StrictFIFO queueing strategy cannot be used when ConcurrentAdmissionPolicy is defined",
            )
        )
    return errors


def _cq_flavors(spec: Obj) -> set[str]:
    return {str(_m(f).get("name")) for g in _l(spec.get("resourceGroups")) for f in _l(_m(g).get("flavors"))}


def _validate_on_flavors(spec: Obj, old_spec: Obj | None) -> list[FieldError]:
    """``onFlavors`` must name flavors of this CQ.

    On update, a check whose ``onFlavors`` did not change is tolerated as long as the CQ's
    flavors did not change either (Kueue, with RejectUpdatesToCQWithInvalidOnFlavors off).
    """
    flavors = _cq_flavors(spec)
    tolerated: dict[str, set[str]] = {}
    if old_spec is not None and _cq_flavors(old_spec) == flavors:
        for raw in _l(_m(old_spec.get("admissionChecksStrategy")).get("admissionChecks")):
            tolerated[str(_m(raw).get("name"))] = {str(f) for f in _l(_m(raw).get("onFlavors"))}
    errors: list[FieldError] = []
    path = SPEC.child("admissionChecksStrategy", "admissionChecks")
    for i, raw in enumerate(_l(_m(spec.get("admissionChecksStrategy")).get("admissionChecks"))):
        check = _m(raw)
        on_flavors = _l(check.get("onFlavors"))
        before = tolerated.get(str(check.get("name")))
        if before is not None and before == {str(f) for f in on_flavors}:
            continue
        for j, flavor in enumerate(on_flavors):
            if not isinstance(flavor, str) or flavor not in flavors:
                errors.append(
                    not_supported(path.index(i).child("onFlavors").index(j), flavor, sorted(flavors))
                )
    return errors


def validate_cohort(cohort: Obj, old: Obj | None) -> list[FieldError]:
    spec = _m(cohort.get("spec"))
    parent = spec.get("parentName") or ""
    errors: list[FieldError] = []
    if parent:
        errors += _name_ref(parent, SPEC.child("parentName"))
    errors += validate_fair_sharing(spec, SPEC)  # first, as in Kueue's validateCohort
    errors += validate_resource_groups(
        spec.get("resourceGroups"), SPEC.child("resourceGroups"), bool(parent), True
    )
    return errors


def validate_resource_flavor(flavor: Obj, old: Obj | None) -> list[FieldError]:
    spec = _m(flavor.get("spec"))
    errors: list[FieldError] = []
    node_labels = _m(spec.get("nodeLabels"))
    if len(node_labels) > 8:
        errors.append(too_many(SPEC.child("nodeLabels"), len(node_labels), 8))
    errors += validate_labels(node_labels, SPEC.child("nodeLabels"))
    taints = _l(spec.get("nodeTaints"))
    if len(taints) > 8:
        errors.append(too_many(SPEC.child("nodeTaints"), len(taints), 8))
    seen: set[tuple[str, str]] = set()
    for i, raw in enumerate(taints):
        taint = _m(raw)
        tpath = SPEC.child("nodeTaints").index(i)
        key, value, effect = str(taint.get("key", "")), str(taint.get("value") or ""), taint.get("effect")
        errors += [invalid(tpath.child("key"), key, m) for m in qualified_name(key)]
        if problems := label_value(value):
            errors.append(invalid(tpath.child("value"), value, ";".join(problems)))
        if effect not in TAINT_EFFECTS:
            errors.append(not_supported(tpath.child("effect"), effect, TAINT_EFFECTS))
        if (key, str(effect)) in seen:
            errors.append(
                FieldError("Duplicate value", tpath, taint, "taints must be unique by key and effect pair")
            )
            continue
        seen.add((key, str(effect)))
    tolerations = _l(spec.get("tolerations"))
    if len(tolerations) > 8:
        errors.append(too_many(SPEC.child("tolerations"), len(tolerations), 8))
    errors += validate_tolerations(tolerations, SPEC.child("tolerations"))
    topology = spec.get("topologyName")
    if topology and not node_labels:
        errors.append(
            required(SPEC.child("nodeLabels"), "at least one nodeLabel is required when topology is set")
        )
    if old is not None:
        old_topology = _m(old.get("spec")).get("topologyName")
        if old_topology and topology != old_topology:
            errors.append(invalid(SPEC.child("topologyName"), topology, FIELD_IMMUTABLE))
    return errors


def validate_local_queue(queue: Obj, old: Obj | None) -> list[FieldError]:
    spec = _m(queue.get("spec"))
    errors = _name_ref(spec.get("clusterQueue", ""), SPEC.child("clusterQueue"))
    errors += validate_fair_sharing(spec, SPEC)
    if old is not None and spec.get("clusterQueue") != _m(old.get("spec")).get("clusterQueue"):
        errors.append(invalid(SPEC.child("clusterQueue"), spec.get("clusterQueue"), FIELD_IMMUTABLE))
    return errors


def validate_admission_check(check: Obj, old: Obj | None) -> list[FieldError]:
    """Kueue's ``validateAdmissionCheck`` and its update rule."""
    errors: list[FieldError] = []
    spec = _m(check.get("spec"))
    name = spec.get("controllerName")
    if old is not None:
        before = _m(old.get("spec")).get("controllerName")
        if name != before:
            # Kueue passes the old value first, so the old name is the one the message shows.
            errors.append(invalid(SPEC.child("controllerName"), before, FIELD_IMMUTABLE))
    if not name:
        errors.append(invalid(SPEC.child("controllerName"), name or "", "must be non-empty"))
    parameters = spec.get("parameters")
    if isinstance(parameters, dict):
        ppath = SPEC.child("parameters")
        group, kind, ref = (str(parameters.get(k) or "") for k in ("apiGroup", "kind", "name"))
        if problems := dns1123_subdomain(group):
            errors.append(invalid(ppath.child("apiGroup"), group, "should match: " + ",".join(problems)))
        if problems := dns1035_label(kind.lower()):
            message = "may have mixed case, but should otherwise match: " + ",".join(problems)
            errors.append(invalid(ppath.child("kind"), kind, message))
        if problems := dns1123_label(ref):
            errors.append(invalid(ppath.child("name"), ref, "should match: " + ",".join(problems)))
    return errors


def validate_workload_priority_class(wpc: Obj, old: Obj | None) -> list[FieldError]:
    errors: list[FieldError] = []
    value = wpc.get("value")
    if value is None:
        errors.append(required(ROOT.child("value")))
    elif isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
        errors.append(invalid(ROOT.child("value"), value, "must be a 32-bit integer"))
    description = wpc.get("description")
    if isinstance(description, str) and len(description) > 2048:
        errors.append(
            FieldError("Too long", ROOT.child("description"), None, "may not be more than 2048 bytes")
        )
    return errors


# -- Workload --------------------------------------------------------------------------------------

RESOURCE_SECTIONS = ("requests", "limits")


def _validate_pod_resources(pod_spec: Obj, path: Path) -> list[FieldError]:
    errors: list[FieldError] = []
    targets: list[tuple[Path, Obj]] = []
    for field in ("initContainers", "containers"):
        for i, raw in enumerate(_l(pod_spec.get(field))):
            targets.append((path.child(field).index(i).child("resources"), _m(_m(raw).get("resources"))))
    if "resources" in pod_spec:
        targets.append((path.child("resources"), _m(pod_spec.get("resources"))))
    for rpath, resources in targets:
        for section in RESOURCE_SECTIONS:
            for name, quantity in _m(resources.get(section)).items():
                qpath = rpath.child(section).key(name)
                if name == "pods":
                    errors.append(invalid(qpath, name, "the key is reserved for internal kueue use"))
                _, problems = _quantity(quantity, qpath)
                errors += problems
    return errors


def _pod_sets(workload: Obj) -> list[Obj]:
    return [_m(p) for p in _l(_m(workload.get("spec")).get("podSets"))]


def _pod_set_count(pod_set: Obj) -> int:
    count = pod_set.get("count", 1)
    return count if isinstance(count, int) else 1


def validate_workload(workload: Obj, old: Obj | None, incremental_dispatch: bool = False) -> list[FieldError]:
    """Kueue's ``ValidateWorkload`` and ``ValidateWorkloadUpdate``.

    ``incremental_dispatch``: the MultiKueue dispatcher is the incremental one, which nominates
    clusters; only then must a ``clusterName`` be one of the nominated ones.
    """
    errors: list[FieldError] = []
    spec = _m(workload.get("spec"))
    pod_sets = _pod_sets(workload)
    ppath = SPEC.child("podSets")
    names = [str(p.get("name", "main")) for p in pod_sets]
    with_min = 0
    for i, pod_set in enumerate(pod_sets):
        path = ppath.index(i)
        template = _m(pod_set.get("template"))
        errors += validate_labels(
            _m(template.get("metadata")).get("labels"), path.child("template", "metadata", "labels")
        )
        errors += validate_annotations(
            _m(template.get("metadata")).get("annotations"), path.child("template", "metadata", "annotations")
        )
        errors += _validate_pod_resources(_m(template.get("spec")), path.child("template", "spec"))
        if pod_set.get("minCount") is not None:
            with_min += 1
            min_count = pod_set["minCount"]
            if not isinstance(min_count, int) or min_count > _pod_set_count(pod_set):
                errors.append(
                    invalid(
                        path.child("minCount"),
                        min_count,
                        f"must be less than or equal to {_pod_set_count(pod_set)}",
                    )
                )
    if with_min > 1:
        errors.append(invalid(ppath, with_min, "at most one podSet can use minCount"))
    ref = spec.get("priorityClassRef")
    if ref is not None and spec.get("priority") is None:
        errors.append(
            required(SPEC.child("priority"), "priority should not be nil when priorityClassRef is set")
        )

    status = _m(workload.get("status"))
    reserved = is_true(workload, "QuotaReserved")
    admission = status.get("admission")
    spath = ROOT.child("status")
    if reserved and admission is None:
        errors.append(required(spath.child("admission"), "admission must be set when QuotaReserved is True"))
    if reserved and admission is not None:
        apath = spath.child("admission", "podSetAssignments")
        assignments = _l(_m(admission).get("podSetAssignments"))
        if len(assignments) != len(pod_sets):
            errors.append(
                invalid(apath, len(assignments), "must have the same number of podSets as the spec")
            )
        for i, raw in enumerate(assignments):
            assignment = _m(raw)
            if assignment.get("name") not in names:
                errors.append(FieldError(NOT_FOUND, apath.index(i).child("name"), assignment.get("name")))
            count = assignment.get("count")
            if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
                continue
            for name, quantity in _m(assignment.get("resourceUsage")).items():
                try:
                    units = resource_value(str(name), quantity)
                except QuantityError:
                    continue
                if units % count != 0:
                    errors.append(
                        invalid(
                            apath.index(i).child("resourceUsage").key(str(name)),
                            Quantity(str(quantity)),
                            f"is not a multiple of {count}",
                        )
                    )
    for raw in _l(status.get("reclaimablePods")):
        entry = _m(raw)
        rpath = spath.child("reclaimablePods").key(str(entry.get("name")))
        if entry.get("name") in names:
            limit = _pod_set_count(pod_sets[names.index(entry["name"])])
            if isinstance(entry.get("count"), int) and entry["count"] > limit:
                errors.append(
                    invalid(rpath.child("count"), entry["count"], f"should be less or equal to {limit}")
                )
        else:
            errors.append(not_supported(rpath.child("name"), entry.get("name"), names))
    for i, raw in enumerate(_l(status.get("admissionChecks"))):
        cpath = spath.child("admissionChecks").index(i).child("podSetUpdates")
        for j, raw_update in enumerate(_l(_m(raw).get("podSetUpdates"))):
            update = _m(raw_update)
            upath = cpath.index(j)
            if update.get("name") not in names:
                errors.append(not_supported(upath.child("name"), update.get("name"), names))
            errors += validate_labels(update.get("labels"), upath.child("labels"))
            errors += validate_annotations(update.get("annotations"), upath.child("annotations"))
            errors += validate_labels(update.get("nodeSelector"), upath.child("nodeSelector"))
            errors += validate_tolerations(update.get("tolerations"), upath.child("tolerations"))
    if old is not None:
        errors += _validate_workload_update(workload, old, incremental_dispatch)
    return errors


def _validate_workload_update(new: Obj, old: Obj, incremental_dispatch: bool) -> list[FieldError]:
    errors: list[FieldError] = []
    spec, old_spec = _m(new.get("spec")), _m(old.get("spec"))
    status, old_status = _m(new.get("status")), _m(old.get("status"))
    spath = ROOT.child("status")
    was_reserved = is_true(old, "QuotaReserved")
    reserved = was_reserved and is_true(new, "QuotaReserved")
    if was_reserved:
        new_sets, old_sets = _l(spec.get("podSets")), _l(old_spec.get("podSets"))
        if len(new_sets) != len(old_sets):
            errors.append(invalid(SPEC.child("podSets"), OMIT, FIELD_IMMUTABLE))
        else:
            for i, (new_set, old_set) in enumerate(zip(new_sets, old_sets, strict=True)):
                if _scaled_down(new_set, old_set):  # an elastic workload gives pods back (Kueue)
                    new_set = {**_m(new_set), "count": _m(old_set).get("count")}
                if new_set != old_set:
                    # Kueue's path for this one is "spec.podSets.<i>" (Child, not Index).
                    errors.append(invalid(SPEC.child("podSets", str(i)), OMIT, FIELD_IMMUTABLE))
    if reserved:
        if spec.get("queueName") != old_spec.get("queueName"):
            errors.append(invalid(SPEC.child("queueName"), spec.get("queueName"), FIELD_IMMUTABLE))
        ref, old_ref = spec.get("priorityClassRef"), old_spec.get("priorityClassRef")
        if (ref is None) != (old_ref is None):
            errors.append(invalid(SPEC.child("priorityClassRef"), ref, FIELD_IMMUTABLE))
        elif ref is not None and old_ref is not None:
            for key in ("group", "kind"):
                if _m(ref).get(key) != _m(old_ref).get(key):
                    errors.append(
                        invalid(SPEC.child("priorityClassRef", key), _m(ref).get(key), FIELD_IMMUTABLE)
                    )
            if _m(ref).get("kind") != "WorkloadPriorityClass" and _m(ref).get("name") != _m(old_ref).get(
                "name"
            ):
                errors.append(
                    invalid(SPEC.child("priorityClassRef", "name"), _m(ref).get("name"), FIELD_IMMUTABLE)
                )
        old_reclaimable = {
            str(_m(r).get("name")): _m(r).get("count", 0) for r in _l(old_status.get("reclaimablePods"))
        }
        new_reclaimable = {
            str(_m(r).get("name")): _m(r).get("count", 0) for r in _l(status.get("reclaimablePods"))
        }
        for name, count in old_reclaimable.items():
            if name not in new_reclaimable:
                errors.append(required(spath.child("reclaimablePods").key(name), "cannot be removed"))
            elif (
                isinstance(count, int)
                and isinstance(new_reclaimable[name], int)
                and new_reclaimable[name] < count
            ):
                errors.append(
                    invalid(
                        spath.child("reclaimablePods").key(name).child("count"),
                        new_reclaimable[name],
                        f"cannot be less then {count}",  # sic: Kueue's wording
                    )
                )
    both_admitted = is_true(old, "Admitted") and is_true(new, "Admitted")
    if both_admitted and spec.get("maximumExecutionTimeSeconds") != old_spec.get(
        "maximumExecutionTimeSeconds"
    ):
        errors.append(
            invalid(
                SPEC.child("maximumExecutionTimeSeconds"),
                spec.get("maximumExecutionTimeSeconds"),
                FIELD_IMMUTABLE,
            )
        )
    old_admission, admission = old_status.get("admission"), status.get("admission")
    if (
        old_admission is not None
        and admission is not None
        and _without_tas(admission) != _without_tas(old_admission)
    ):
        errors.append(invalid(spath.child("admission"), OMIT, FIELD_IMMUTABLE))
    old_checks = {str(_m(c).get("name")): _m(c) for c in _l(old_status.get("admissionChecks"))}
    for i, raw in enumerate(_l(status.get("admissionChecks"))):
        check = _m(raw)
        before = old_checks.get(str(check.get("name")))
        if (
            before is not None
            and before.get("state") == "Ready"
            and check.get("state") == "Ready"
            and (before.get("podSetUpdates") or []) != (check.get("podSetUpdates") or [])
        ):
            errors.append(
                invalid(
                    spath.child("admissionChecks").index(i).child("podSetUpdates"),
                    OMIT,
                    FIELD_IMMUTABLE,
                )
            )
    old_cluster = old_status.get("clusterName")
    cluster = status.get("clusterName")
    if _m(_m(new.get("metadata")).get("annotations")).get(engine_parse.SLICE_REPLACEMENT_FOR):
        return errors  # Kueue: a new elastic slice takes the worker of the slice it replaces
    if old_cluster and cluster != old_cluster:
        errors.append(invalid(spath.child("clusterName"), cluster, FIELD_IMMUTABLE))
    nominated = _l(old_status.get("nominatedClusterNames"))
    if incremental_dispatch and cluster and not old_cluster and cluster not in nominated:
        errors.append(
            invalid(
                spath.child("clusterName"),
                cluster,
                "when setting clusterName it must be one of the nominatedClusterNames",
            )
        )
    return errors


_TAS_FIELDS = ("topologyAssignment", "delayedTopologyRequest")


def _without_tas(admission: Any) -> Any:
    """The admission to compare, without its topology fields (shallow: it is only compared)."""
    stripped = dict(_m(admission))
    if isinstance(stripped.get("podSetAssignments"), list):
        stripped["podSetAssignments"] = [
            {k: v for k, v in a.items() if k not in _TAS_FIELDS} if isinstance(a, dict) else a
            for a in stripped["podSetAssignments"]
        ]
    return stripped


# -- defaulting ------------------------------------------------------------------------------------


# A defaulter returns the object it wants and never changes the request's: it copies only the
# dicts and lists on the way to what it changes, so the patch walk skips the rest by identity
# (a deep copy of each Workload cost more than everything else its webhook does).


def _with_finalizer(obj: Obj) -> Obj:
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        raise Denied("metadata: Invalid value: must be an object", code=422, reason="Invalid")
    finalizers = [f for f in _l(metadata.get("finalizers")) if isinstance(f, str)]
    if FINALIZER not in finalizers:
        finalizers.append(FINALIZER)
    return {**obj, "metadata": {**metadata, "finalizers": finalizers}}


def default_cluster_queue(cq: Obj, partial_admission: bool) -> Obj:
    return _with_finalizer(cq)


def default_resource_flavor(flavor: Obj, partial_admission: bool) -> Obj:
    return _with_finalizer(flavor)


def default_workload(workload: Obj, partial_admission: bool) -> Obj:
    """Pod-set names and counts as the schema defaults them; ``minCount`` dropped without PartialAdmission."""
    spec = workload.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("podSets"), list):
        return workload
    pod_sets = []
    for pod_set in spec["podSets"]:
        if isinstance(pod_set, dict):
            pod_set = dict(pod_set)
            pod_set.setdefault("name", "main")
            pod_set.setdefault("count", 1)
            if not partial_admission:
                pod_set.pop("minCount", None)
        pod_sets.append(pod_set)
    return {**workload, "spec": {**spec, "podSets": pod_sets}}


Defaulter = Callable[[Obj, bool], Obj]

ENGINE_PARSERS: dict[str, Callable[[Obj], object]] = {
    "ClusterQueue": engine_parse.cluster_queue,
    "Cohort": engine_parse.cohort,
    "ResourceFlavor": engine_parse.resource_flavor,
    "LocalQueue": engine_parse.local_queue,
    "AdmissionCheck": engine_parse.admission_check,
    "WorkloadPriorityClass": engine_parse.workload_priority_class,
    "Workload": engine_parse.workload,
}

KINDS: dict[str, tuple[str, Rules, Defaulter | None]] = {
    "ClusterQueue": ("clusterqueue", validate_cluster_queue, default_cluster_queue),
    "LocalQueue": ("localqueue", validate_local_queue, None),
    "ResourceFlavor": ("resourceflavor", validate_resource_flavor, default_resource_flavor),
    "Cohort": ("cohort", validate_cohort, None),
    "Workload": ("workload", validate_workload, default_workload),
    "AdmissionCheck": ("admissioncheck", validate_admission_check, None),
    "WorkloadPriorityClass": ("workloadpriorityclass", validate_workload_priority_class, None),
}


KnownWorkload = Callable[[str, str], EngineWorkload | None]
"""The engine's reading of a Workload by namespace and name (:meth:`kadmit.engine.Engine.workload`),
or None when it holds none."""


def _engine_refusal(
    kind: str, obj: Obj, old: Obj | None = None, known: KnownWorkload | None = None
) -> InvalidObject | UnsupportedConfiguration | None:
    candidate = obj
    meta = _m(obj.get("metadata"))
    if not meta.get("name"):
        # generateName: the API server names the object after admission.
        candidate = {**obj, "metadata": {**meta, "name": "generated-name"}}
    try:
        if kind == "Workload":
            # Most Workload reviews are status updates (every reservation, condition and finish):
            # with the spec unchanged, the pod sets are taken from the engine's reading of it
            # (the reader checks that its uid and generation are this one's).
            previous = None
            if known is not None and old is not None and _m(old.get("spec")) == _m(obj.get("spec")):
                previous = known(str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            engine_parse.workload(candidate, previous=previous)
        else:
            ENGINE_PARSERS[kind](candidate)
    except (InvalidObject, UnsupportedConfiguration) as exc:
        return exc
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        # A shape the engine's reader did not expect: as unreadable for the scheduler as any other.
        return InvalidObject(
            kind, str(_m(obj.get("metadata")).get("name", "")), "", f"unreadable object ({exc})"
        )
    return None


def _engine_check(kind: str, obj: Obj, old: Obj | None, known: KnownWorkload | None = None) -> list[str]:
    """Deny what the engine cannot read; warn about what it reads but does not implement.

    An update that leaves an already-stored problem as it was is let through with a warning, as
    Kueue tolerates unchanged ``onFlavors`` entries: refusing it would block every other edit.
    """
    refusal = _engine_refusal(kind, obj, old, known)
    if refusal is None:
        return []
    if isinstance(refusal, UnsupportedConfiguration):
        return [f"kadmit does not implement this yet: {refusal}"]
    detail = f"{refusal.path}: {refusal.message}" if refusal.path else refusal.message
    if old is not None:
        before = _engine_refusal(kind, old)
        if isinstance(before, InvalidObject) and (before.path, before.message) == (
            refusal.path,
            refusal.message,
        ):
            return [f"kadmit cannot schedule with this {kind} until this is fixed: {detail}"]
    raise Denied(detail)


class KueueWebhooks:
    """The mutating and validating webhooks of every Kueue kind, at Kueue's paths."""

    def __init__(
        self,
        partial_admission: bool = True,
        incremental_dispatch: bool = False,
        concurrent_admission: bool = False,
        known_workload: KnownWorkload | None = None,
    ) -> None:
        self.partial_admission = partial_admission
        self.incremental_dispatch = incremental_dispatch
        self.concurrent_admission = concurrent_admission
        """The ConcurrentAdmission feature gate: ClusterQueues' policies are validated."""
        self.known_workload = known_workload
        """The engine's reading of each Workload, for status reviews (None: every review reads all)."""

    def webhooks(self) -> list[Webhook]:
        hooks: list[Webhook] = []
        for kind, (plural_path, rules, defaulter) in KINDS.items():
            kinds = frozenset({(GROUP, VERSION, kind)})
            hooks.append(
                Webhook(
                    f"/mutate-kueue-x-k8s-io-v1beta2-{plural_path}", kinds, mutate=self._mutator(defaulter)
                )
            )
            hooks.append(
                Webhook(
                    f"/validate-kueue-x-k8s-io-v1beta2-{plural_path}",
                    kinds,
                    validate=self._validator(kind, rules),
                )
            )
        return hooks

    def _mutator(self, defaulter: Defaulter | None) -> Callable[[AdmissionRequest], Any]:
        async def mutate(request: AdmissionRequest) -> Obj | None:
            # Kinds Kueue does not default keep their path (the configuration names it) and pass unchanged.
            if defaulter is None or request.object is None or request.operation != "CREATE":
                return None
            return defaulter(request.object, self.partial_admission)

        return mutate

    def _validator(self, kind: str, rules: Rules) -> Callable[[AdmissionRequest], Any]:
        async def validate(request: AdmissionRequest) -> list[str]:
            found = request.to_validate()
            if found is None:
                return []
            new, old = found
            if kind == "Workload":
                errors = validate_workload(new, old, self.incremental_dispatch)
            elif kind == "ClusterQueue":
                errors = validate_cluster_queue(new, old, self.concurrent_admission)
            else:
                errors = rules(new, old)
            if errors:
                raise Denied(aggregate(errors))
            return _engine_check(kind, new, old, self.known_workload)

        return validate


def _scaled_down(new_set: Any, old_set: Any) -> bool:
    """Kueue's ``validateImmutablePodSet`` lets a reserved pod set's count shrink
    (ElasticJobsViaWorkloadSlices, on by default): the rest stays immutable."""
    new_count, old_count = _m(new_set).get("count", 1), _m(old_set).get("count", 1)
    return isinstance(new_count, int) and isinstance(old_count, int) and new_count < old_count
