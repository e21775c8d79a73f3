"""The ProvisioningRequest check (``kueue.x-k8s.io/provisioning-request``), as Kueue's (kueue-contract.md §6).

For a workload holding quota, it books capacity with the cluster-autoscaler by creating an
``autoscaling.x-k8s.io/v1`` ProvisioningRequest whose pod sets point at PodTemplates made from
the workload's pod sets (created first, owned by the Workload, then handed to the request, as
Kueue does since #3957). The request's conditions become the check's state: ``Provisioned`` →
Ready with the ``consume-provisioning-request`` annotations as podSetUpdates; ``Failed`` (and
``BookingExpired`` before admission) → Retry with exponential backoff until
``retryStrategy.backoffLimitCount``, then Rejected; ``CapacityRevoked`` → Rejected, even after
admission. Requests of an older attempt or of a changed ProvisioningRequestConfig are deleted,
and all of a workload's requests go when it finishes or is evicted.
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from kadmit.checks.plugin import AdmissionCheckPlugin, CheckContext, ClusterView, ParametersError
from kadmit.checks.verdict import Pending, PodSetUpdate, Ready, Rejected, Retry, Verdict
from kadmit.kube import NORMAL, ApiError, Obj, Resource
from kadmit.kube.resources import (
    POD_TEMPLATES,
    PROVISIONING_REQUEST_CONFIGS,
    PROVISIONING_REQUESTS,
    RESOURCE_FLAVORS,
    WORKLOADS,
)
from kadmit.workload import READY, find_condition, is_true

CONTROLLER_NAME = "kueue.x-k8s.io/provisioning-request"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
PARAMETER_ANNOTATION_PREFIX = "provreq.kueue.x-k8s.io/"
NOT_NEEDED = "the provisioning request is not needed"
MAX_NAME = 253
IDENTICAL_POD_TEMPLATES = "IdenticalPodTemplates"
IDENTICAL_REQUIREMENTS = "IdenticalWorkloadSchedulingRequirements"


@dataclass(frozen=True)
class ProvisioningConfig:
    """A ProvisioningRequestConfig, with Kueue's defaults applied."""

    name: str
    provisioning_class_name: str
    parameters: dict[str, str] = field(default_factory=dict)
    managed_resources: frozenset[str] = frozenset()
    backoff_limit_count: int = 3
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 1800
    node_selector_from_details: tuple[tuple[str, str], ...] = ()
    pod_set_merge_policy: str | None = None


def parse_config(obj: Obj) -> ProvisioningConfig:
    spec = obj.get("spec") or {}
    class_name = spec.get("provisioningClassName")
    if not isinstance(class_name, str) or not class_name:
        raise ParametersError("spec.provisioningClassName is required")
    retry = spec.get("retryStrategy") or {}
    numbers = {}
    for key, default in (("backoffLimitCount", 3), ("backoffBaseSeconds", 60), ("backoffMaxSeconds", 1800)):
        value = retry.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ParametersError(f"spec.retryStrategy.{key} must be a non-negative integer, got {value!r}")
        numbers[key] = value
    policy = spec.get("podSetMergePolicy")
    if policy not in (None, IDENTICAL_POD_TEMPLATES, IDENTICAL_REQUIREMENTS):
        raise ParametersError(
            f"spec.podSetMergePolicy {policy!r} is not one of "
            f"{IDENTICAL_POD_TEMPLATES}, {IDENTICAL_REQUIREMENTS}"
        )
    selectors = tuple(
        (str(e["key"]), str(e["valueFromProvisioningClassDetail"]))
        for e in ((spec.get("podSetUpdates") or {}).get("nodeSelector") or [])
        if e.get("key") and e.get("valueFromProvisioningClassDetail")
    )
    return ProvisioningConfig(
        name=obj["metadata"]["name"],
        provisioning_class_name=class_name,
        parameters={str(k): str(v) for k, v in (spec.get("parameters") or {}).items()},
        managed_resources=frozenset(str(r) for r in spec.get("managedResources") or ()),
        backoff_limit_count=numbers["backoffLimitCount"],
        backoff_base_seconds=numbers["backoffBaseSeconds"],
        backoff_max_seconds=numbers["backoffMaxSeconds"],
        node_selector_from_details=selectors,
        pod_set_merge_policy=policy,
    )


def limit_name(name: str) -> str:
    """Kueue's shortening: past 253 characters, the first 247, ``-`` and 5 hex digits of sha1(name)."""
    if len(name) <= MAX_NAME:
        return name
    return f"{name[:247]}-{hashlib.sha1(name.encode()).hexdigest()[:5]}"


def request_name(workload: str, check: str, attempt: int) -> str:
    return limit_name(f"{workload}-{check}-{attempt}")


def template_name(request: str, pod_set: str) -> str:
    return limit_name(f"ppt-{request}-{pod_set}")


def attempt_of(request: Obj, workload: str, check: str) -> int | None:
    """The attempt number of a request this workload and check made; None if the name is not theirs."""
    name = request["metadata"]["name"]
    match = re.fullmatch(rf"{re.escape(workload)}-{re.escape(check)}-([0-9]+)", name)
    if match:
        return int(match[1])
    for attempt in range(1, 64):  # shortened names cannot be parsed: recompute them
        if len(f"{workload}-{check}-{attempt}") > MAX_NAME and request_name(workload, check, attempt) == name:
            return attempt
    return None


def owned_by(obj: Obj, uid: str) -> bool:
    return any(
        r.get("uid") == uid and r.get("controller") for r in obj["metadata"].get("ownerReferences") or []
    )


def controller_ref(obj: Obj, kind: Resource) -> Obj:
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _assigned_counts(workload: Obj) -> dict[str, Any]:
    admission = (workload.get("status") or {}).get("admission") or {}
    return {str(a.get("name")): a for a in admission.get("podSetAssignments") or []}


def qualifying_pod_sets(workload: Obj, config: ProvisioningConfig) -> list[tuple[Obj, int]]:
    """Pod sets that need capacity: assigned count > 0 and, with managedResources, one of them used."""
    assigned = _assigned_counts(workload)
    out: list[tuple[Obj, int]] = []
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        name = str(pod_set.get("name", "main"))
        count = (assigned.get(name) or {}).get("count")
        if count is None:
            count = pod_set.get("count", 1)
        if int(count) <= 0:
            continue
        spec = (pod_set.get("template") or {}).get("spec") or {}
        if config.managed_resources:
            used: set[str] = set()
            for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
                resources = container.get("resources") or {}
                used.update(resources.get("requests") or {})
                used.update(resources.get("limits") or {})
            if not used & config.managed_resources:
                continue
        out.append((pod_set, int(count)))
    return out


def pod_template_for(pod_set: Obj, assignment: Obj | None, cluster: ClusterView) -> Obj:
    """The pod set's template with its flavors' nodeLabels and tolerations, limits copied into requests."""
    template = copy.deepcopy(pod_set.get("template") or {})
    spec = template.setdefault("spec", {})
    flavors = sorted(set(((assignment or {}).get("flavors") or {}).values()))
    for flavor_name in flavors:
        flavor = cluster.get(RESOURCE_FLAVORS, None, str(flavor_name)) or {}
        flavor_spec = flavor.get("spec") or {}
        for key, value in (flavor_spec.get("nodeLabels") or {}).items():
            spec.setdefault("nodeSelector", {})[key] = value
        for toleration in flavor_spec.get("tolerations") or []:
            tolerations = spec.setdefault("tolerations", [])
            if toleration not in tolerations:
                tolerations.append(copy.deepcopy(toleration))
    for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        resources = container.setdefault("resources", {})
        for name, value in (resources.get("limits") or {}).items():
            resources.setdefault("requests", {}).setdefault(name, value)
    return template


def _requirements(template: Obj) -> Obj:
    spec = template.get("spec") or {}
    return {
        "containers": [
            ((c.get("resources") or {}).get("requests") or {}) for c in spec.get("containers") or []
        ],
        "initContainers": [
            ((c.get("resources") or {}).get("requests") or {}) for c in spec.get("initContainers") or []
        ],
        "resources": spec.get("resources"),
        "nodeSelector": spec.get("nodeSelector") or {},
        "tolerations": spec.get("tolerations") or [],
        "affinity": spec.get("affinity"),
        "resourceClaims": spec.get("resourceClaims") or [],
    }


def merge_groups(items: list[tuple[str, Obj, int]], policy: str | None) -> list[tuple[str, Obj, int]]:
    """``(pod set, template, count)`` merged as ``podSetMergePolicy`` says: counts add, first name wins."""
    if policy is None:
        return items
    groups: list[tuple[str, Obj, int]] = []
    for name, template, count in items:
        for i, (group_name, group_template, group_count) in enumerate(groups):
            same = (
                template == group_template
                if policy == IDENTICAL_POD_TEMPLATES
                else _requirements(template) == _requirements(group_template)
            )
            if same:
                groups[i] = (group_name, group_template, group_count + count)
                break
        else:
            groups.append((name, template, count))
    return groups


def expected_parameters(workload: Obj, config: ProvisioningConfig) -> dict[str, str]:
    params = dict(config.parameters)
    for key, value in ((workload.get("metadata") or {}).get("annotations") or {}).items():
        if key.startswith(PARAMETER_ANNOTATION_PREFIX) and len(key) > len(PARAMETER_ANNOTATION_PREFIX):
            params[key[len(PARAMETER_ANNOTATION_PREFIX) :]] = str(value)
    return params


def backoff_seconds(config: ProvisioningConfig, retry_count: int) -> int:
    """Kueue's requeue delay: ``min(base * 2**retryCount, max)``, whole seconds."""
    return int(min(config.backoff_base_seconds * 2**retry_count, config.backoff_max_seconds))


class ProvisioningCheck(AdmissionCheckPlugin[ProvisioningConfig]):
    """Books capacity through ProvisioningRequests, as Kueue's built-in controller of the same name."""

    controller_name = CONTROLLER_NAME
    parameters_kind = PROVISIONING_REQUEST_CONFIGS
    watches = (PROVISIONING_REQUESTS, RESOURCE_FLAVORS)
    reevaluate_ready = True  # CapacityRevoked turns even an admitted workload's check to Rejected

    def parse_parameters(self, obj: Obj) -> ProvisioningConfig:
        return parse_config(obj)

    def affected(self, kind: Resource, obj: Obj, cluster: ClusterView) -> list[tuple[str, str]] | None:
        if kind != PROVISIONING_REQUESTS:
            return None
        namespace = obj["metadata"].get("namespace", "")
        return [
            (namespace, str(ref.get("name")))
            for ref in obj["metadata"].get("ownerReferences") or []
            if ref.get("kind") == "Workload" and ref.get("controller")
        ]

    def requests_of(self, workload: Obj, cluster: ClusterView) -> list[Obj]:
        uid = workload["metadata"]["uid"]
        return [
            r
            for r in cluster.list(PROVISIONING_REQUESTS, workload["metadata"]["namespace"])
            if owned_by(r, uid)
        ]

    async def evaluate(self, workload: Obj, context: CheckContext[ProvisioningConfig]) -> Verdict:
        config = context.parameters
        assert config is not None  # the runner only calls with resolved parameters
        cluster, check = context.cluster, context.check_name
        name = workload["metadata"]["name"]
        if not qualifying_pod_sets(workload, config):
            return Ready(NOT_NEEDED)
        params = expected_parameters(workload, config)
        counted: tuple[int, Obj] | None = None
        stale: list[Obj] = []
        for request in self.requests_of(workload, cluster):
            attempt = attempt_of(request, name, check)
            if attempt is None:
                continue  # another check's request
            spec = request.get("spec") or {}
            matches = spec.get("provisioningClassName") == config.provisioning_class_name and all(
                (spec.get("parameters") or {}).get(k) == v for k, v in params.items()
            )
            if not matches:
                stale.append(request)
            elif counted is None or attempt > counted[0]:
                if counted is not None:
                    stale.append(counted[1])
                counted = (attempt, request)
            else:
                stale.append(request)
        for request in stale:
            await self._delete_request(request, cluster)

        state, retry_count = context.current_state, context.retry_count
        admitted = is_true(workload, "Admitted")
        if counted is None:
            if state == READY:
                return Ready(str((context.state or {}).get("message", "")))
            created = await self._create(workload, check, retry_count + 1, config, params, cluster)
            return Pending(f'Created ProvisioningRequest "{created}"')
        attempt, request = counted
        failed = find_condition(request, "Failed")
        revoked = find_condition(request, "CapacityRevoked")
        expired = find_condition(request, "BookingExpired")
        provisioned = find_condition(request, "Provisioned")
        failure: tuple[str, str] | None = None
        if failed is not None and failed.get("status") == "True":
            failure = ("Retrying after failure: ", str(failed.get("message", "")))
        elif revoked is not None and revoked.get("status") == "True":
            return Rejected(str(revoked.get("message", "")) or "the provisioned capacity was revoked")
        elif expired is not None and expired.get("status") == "True" and not admitted:
            failure = ("Retrying after booking expired: ", str(expired.get("message", "")))
        if failure is not None:
            prefix, message = failure
            if attempt > config.backoff_limit_count:
                return Rejected(message or "the provisioning request failed")
            if attempt > retry_count:
                return Retry(prefix + message, after=backoff_seconds(config, retry_count))
            if state != READY:
                # Kueue already retried this attempt (retryCount caught up) but the request is
                # still here: make the next one.
                await self._delete_request(request, cluster)
                created = await self._create(workload, check, attempt + 1, config, params, cluster)
                return Pending(f'Created ProvisioningRequest "{created}"')
        if provisioned is not None and provisioned.get("status") == "True":
            return Ready(str(provisioned.get("message", "")), self._updates(workload, request, config))
        if state == READY:
            return Ready(str((context.state or {}).get("message", "")))
        accepted = find_condition(request, "Accepted")
        if accepted is not None and accepted.get("status") == "True" and provisioned is not None:
            return Pending(str(provisioned.get("message", "")))
        return Pending("")

    def _updates(self, workload: Obj, request: Obj, config: ProvisioningConfig) -> tuple[PodSetUpdate, ...]:
        """One update per pod set of the request: consume the booking, and the nodeSelector details."""
        details = (request.get("status") or {}).get("provisioningClassDetails") or {}
        selector = {
            key: str(details[detail])
            for key, detail in config.node_selector_from_details
            if detail in details
        }
        name = request["metadata"]["name"]
        pod_set_of = {
            template_name(name, str(ps.get("name", "main"))): str(ps.get("name", "main"))
            for ps in (workload.get("spec") or {}).get("podSets") or []
        }
        updates = []
        for pod_set in (request.get("spec") or {}).get("podSets") or []:
            template = str((pod_set.get("podTemplateRef") or {}).get("name", ""))
            if template in pod_set_of:
                updates.append(
                    PodSetUpdate(
                        name=pod_set_of[template],
                        annotations={
                            CONSUME_ANNOTATION: name,
                            CLASS_ANNOTATION: config.provisioning_class_name,
                        },
                        node_selector=selector,
                    )
                )
        return tuple(updates)

    async def _create(
        self,
        workload: Obj,
        check: str,
        attempt: int,
        config: ProvisioningConfig,
        params: dict[str, str],
        cluster: ClusterView,
    ) -> str:
        namespace = workload["metadata"]["namespace"]
        name = request_name(workload["metadata"]["name"], check, attempt)
        assigned = _assigned_counts(workload)
        items = [
            (
                str(ps.get("name", "main")),
                pod_template_for(ps, assigned.get(str(ps.get("name", "main"))), cluster),
                count,
            )
            for ps, count in qualifying_pod_sets(workload, config)
        ]
        groups = merge_groups(items, config.pod_set_merge_policy)
        owner = controller_ref(workload, WORKLOADS)
        templates: list[str] = []
        for pod_set, template, _ in groups:
            ppt = template_name(name, pod_set)
            templates.append(ppt)
            await self._create_ignoring_existing(
                POD_TEMPLATES,
                {
                    "apiVersion": "v1",
                    "kind": "PodTemplate",
                    "metadata": {
                        "name": ppt,
                        "namespace": namespace,
                        "labels": {MANAGED_LABEL: "true"},
                        "ownerReferences": [owner],
                    },
                    "template": template,
                },
                cluster,
            )
        request_body: Obj = {
            "apiVersion": PROVISIONING_REQUESTS.api_version,
            "kind": PROVISIONING_REQUESTS.kind,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {MANAGED_LABEL: "true"},
                "ownerReferences": [owner],
            },
            "spec": {
                "provisioningClassName": config.provisioning_class_name,
                "parameters": params,
                "podSets": [
                    {"podTemplateRef": {"name": ppt}, "count": count}
                    for ppt, (_, _, count) in zip(templates, groups, strict=True)
                ],
            },
        }
        created = await self._create_ignoring_existing(PROVISIONING_REQUESTS, request_body, cluster)
        cluster.events.emit(workload, NORMAL, "ProvisioningRequestCreated",
                            f'Created ProvisioningRequest: "{name}"')
        request_ref = controller_ref(created, PROVISIONING_REQUESTS)
        for ppt in templates:
            # Hand the templates to the request, so they go when it goes.
            await cluster.api.patch(
                POD_TEMPLATES, namespace, ppt, {"metadata": {"ownerReferences": [request_ref]}}
            )
        return name

    @staticmethod
    async def _create_ignoring_existing(kind: Resource, body: Obj, cluster: ClusterView) -> Obj:
        try:
            return await cluster.api.create(kind, body)
        except ApiError as exc:
            if exc.status != 409:
                raise
            return await cluster.api.get(kind, body["metadata"]["namespace"], body["metadata"]["name"])

    async def _delete_request(self, request: Obj, cluster: ClusterView) -> None:
        namespace = request["metadata"]["namespace"]
        await cluster.api.delete(
            PROVISIONING_REQUESTS, namespace, request["metadata"]["name"], uid=request["metadata"].get("uid")
        )
        for pod_set in (request.get("spec") or {}).get("podSets") or []:
            ppt = (pod_set.get("podTemplateRef") or {}).get("name")
            if ppt:
                await cluster.api.delete(POD_TEMPLATES, namespace, str(ppt))

    async def release(self, workload: Obj, cluster: ClusterView) -> None:
        """Finished, evicted or no longer reserved: delete every request it made (Kueue does the same)."""
        for request in self.requests_of(workload, cluster):
            await self._delete_request(request, cluster)


__all__ = ["CONTROLLER_NAME", "ProvisioningCheck", "ProvisioningConfig", "parse_config"]
