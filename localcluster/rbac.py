"""RBAC authorization, as kube-apiserver's ``--authorization-mode=RBAC`` does it.

Every request (but the unauthenticated probes) is turned into *attributes* the way
``apiserver/pkg/endpoints/request/requestinfo.go`` does (verb, API group, resource, subresource,
namespace, name; or a non-resource path), then allowed when the user is in ``system:masters``
or some rule of a Role or ClusterRole bound to the user, one of the user's groups or the user's
ServiceAccount allows it (``plugin/pkg/auth/authorizer/rbac``). Refusals are 403s with
kube-apiserver's message (``responsewriters.forbiddenMessage``).

The server's bootstrap policy is installed on start: ``cluster-admin``, the aggregated
``admin``/``edit``/``view`` with the ``system:aggregate-to-*`` roles that fill them, and the
discovery, basic-user and auth-delegator roles with their bindings. The ClusterRole aggregation
controller keeps every ClusterRole with an ``aggregationRule`` filled with the rules of the
ClusterRoles its selectors pick, as kube-controller-manager's ``clusterrole-aggregation`` does.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kadmit.localcluster.auth import AUTHENTICATED, SA_PREFIX, User
from kadmit.localcluster.errors import ApiError, bad_request, invalid, status
from kadmit.localcluster.lifecycle import cancel_and_wait
from kadmit.localcluster.objects import Obj, copy_json
from kadmit.localcluster.selectors import SelectorError, label_selector_matches
from kadmit.localcluster.store import Event, Store
from kadmit.localcluster.workqueue import WorkQueue

log = logging.getLogger(__name__)

GROUP = "rbac.authorization.k8s.io"
ROLES = (GROUP, "roles")
ROLE_BINDINGS = (GROUP, "rolebindings")
CLUSTER_ROLES = (GROUP, "clusterroles")
CLUSTER_ROLE_BINDINGS = (GROUP, "clusterrolebindings")
RBAC_KEYS = frozenset({ROLES, ROLE_BINDINGS, CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS})
MASTERS = "system:masters"
UNAUTHENTICATED = "system:unauthenticated"
# Subresources of a namespace that stay the namespace's own (requestinfo.go's namespaceSubresources).
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request asks to do, as ``authorizer.Attributes`` carries it."""

    verb: str
    resource_request: bool
    path: str = ""
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def combined(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """The attributes of one HTTP request (``RequestInfoFactory.NewRequestInfo``)."""
    parts = [p for p in path.split("/") if p]
    verb = method.lower()
    if not parts or parts[0] not in ("api", "apis"):
        return Attributes(verb, False, path)
    if parts[0] == "api":
        if len(parts) < 3:
            return Attributes(verb, False, path)
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) < 4:
            return Attributes(verb, False, path)
        group, version, rest = parts[1], parts[2], parts[3:]
    watch_path = False
    if rest[0] == "watch":  # the deprecated /watch/ URLs
        watch_path, rest = True, rest[1:]
        if not rest:
            return Attributes(verb, False, path)
    verb = {
        "get": "get",
        "head": "get",
        "post": "create",
        "put": "update",
        "patch": "patch",
        "delete": "delete",
    }.get(verb, verb)
    if watch_path:
        verb = "watch"
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not name:
        if verb == "get":
            verb = "watch" if query.get("watch", "").lower() in ("1", "true") else "list"
        elif verb == "delete":
            verb = "deletecollection"
        if verb in ("list", "watch"):
            name = _name_from_field_selector(query.get("fieldSelector", ""))
    return Attributes(verb, True, path, group, version, resource, subresource, namespace, name)


def _name_from_field_selector(text: str) -> str:
    for requirement in text.split(","):
        key, op, value = requirement.partition("==") if "==" in requirement else requirement.partition("=")
        if op and key.strip() == "metadata.name" and not key.strip().endswith("!"):
            return value.strip()
    return ""


# -- rules --------------------------------------------------------------------------------------


def rule_allows(rule: Obj, attrs: Attributes) -> bool:
    """``rbac.RuleAllows``: one PolicyRule against one request."""
    verbs = rule.get("verbs") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if not attrs.resource_request:
        return any(_url_matches(url, attrs.path) for url in rule.get("nonResourceURLs") or [])
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.group not in groups:
        return False
    if not _resource_matches(rule.get("resources") or [], attrs):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _resource_matches(resources: Iterable[str], attrs: Attributes) -> bool:
    combined = attrs.combined
    for resource in resources:
        if resource in ("*", combined):
            return True
        if attrs.subresource and resource == f"*/{attrs.subresource}":
            return True
    return False


def _url_matches(rule_url: str, path: str) -> bool:
    if rule_url in ("*", path):
        return True
    return rule_url.endswith("*") and path.startswith(rule_url[:-1])


def _subject_applies(subject: Obj, user: User, binding_namespace: str) -> bool:
    """``appliesToUser``: a binding's subject against the authenticated user."""
    kind = subject.get("kind")
    if kind == "User":
        return bool(subject.get("name")) and subject.get("name") == user.username
    if kind == "Group":
        return subject.get("name") in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return bool(namespace) and user.username == f"{SA_PREFIX}{namespace}:{subject.get('name', '')}"
    return False


def _describe_subject(subject: Obj, binding_namespace: str) -> str:
    if subject.get("kind") == "ServiceAccount":
        return f'ServiceAccount "{subject.get("name")}/{subject.get("namespace") or binding_namespace}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


@dataclass(frozen=True, slots=True)
class GrantedRule:
    """A rule that applies to a user, with where it came from (the allow reason names it)."""

    rule: Obj
    source: str  # 'ClusterRoleBinding "x" of ClusterRole "y" to User "z"'
    role_kind: str
    role_name: str
    role_namespace: str


MAX_ALLOWED_ENTRIES = 10_000
"""Remembered allow decisions, per identity, namespace, verb and resource, before starting over."""


class Authorizer:
    """The RBAC authorizer over the store's Roles, ClusterRoles and bindings, cached per identity."""

    def __init__(self, store: Store, *, always_allow: bool = False) -> None:
        """``always_allow`` answers every question yes (``--authorization-mode=AlwaysAllow``)."""
        self.store = store
        self.always_allow = always_allow
        self._cache: dict[tuple[str, tuple[str, ...], str], tuple[list[GrantedRule], list[str]]] = {}
        self._allowed: dict[tuple[str, tuple[str, ...], str, str, str, str, str], str] = {}
        """Resource requests allowed by a rule without ``resourceNames``, none with them before it:
        whatever the object's name, that rule is the first to allow (its reason, by identity,
        namespace, verb and resource)."""
        store.add_listener(self._on_event)

    def _on_event(self, event: Event) -> None:
        if event.key in RBAC_KEYS:
            self._cache.clear()
            self._allowed.clear()

    def authorize(self, user: User, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason); the reason names the binding that allowed, or why rules were missing."""
        if self.always_allow or MASTERS in user.groups:
            return True, ""
        key = None
        if attrs.resource_request:
            key = (user.username, user.groups, attrs.namespace, attrs.verb, attrs.group, attrs.resource,
                   attrs.subresource)
            reason = self._allowed.get(key)
            if reason is not None:
                return True, reason
        rules, errors = self.rules_for(user, attrs.namespace if attrs.resource_request else "")
        by_name = False  # a rule with resourceNames came first: another name may match it instead
        for granted in rules:
            if rule_allows(granted.rule, attrs):
                reason = f"RBAC: allowed by {granted.source}"
                if key is not None and not by_name and not granted.rule.get("resourceNames"):
                    if len(self._allowed) >= MAX_ALLOWED_ENTRIES:
                        self._allowed.clear()
                    self._allowed[key] = reason
                return True, reason
            by_name = by_name or bool(granted.rule.get("resourceNames"))
        return False, ("RBAC: " + _aggregate(errors)) if errors else ""

    def rules_for(self, user: User, namespace: str) -> tuple[list[GrantedRule], list[str]]:
        """Every rule bound to ``user`` cluster-wide, plus those bound in ``namespace``."""
        key = (user.username, user.groups, namespace)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        rules: list[GrantedRule] = []
        errors: list[str] = []
        for binding in self.store.list(*CLUSTER_ROLE_BINDINGS):
            self._collect(binding, "", user, rules, errors)
        if namespace:
            for binding in self.store.list(*ROLE_BINDINGS, namespace):
                self._collect(binding, namespace, user, rules, errors)
        self._cache[key] = (rules, errors)
        return rules, errors

    def _collect(
        self, binding: Obj, namespace: str, user: User, rules: list[GrantedRule], errors: list[str]
    ) -> None:
        subject = next(
            (s for s in binding.get("subjects") or [] if _subject_applies(s, user, namespace)), None
        )
        if subject is None:
            return
        ref = binding.get("roleRef") or {}
        role_kind, role_name = str(ref.get("kind", "")), str(ref.get("name", ""))
        if role_kind == "ClusterRole":
            role = self.store.get(*CLUSTER_ROLES, None, role_name)
            role_namespace = ""
        else:
            role = self.store.get(*ROLES, namespace, role_name)
            role_namespace = namespace
        if role is None:
            plural = "clusterrole" if role_kind == "ClusterRole" else "role"
            errors.append(f'{plural}.{GROUP} "{role_name}" not found')
            return
        binding_kind = "RoleBinding" if namespace else "ClusterRoleBinding"
        binding_name = (
            f"{binding['metadata']['name']}/{namespace}" if namespace else binding["metadata"]["name"]
        )
        role_label = f"{role_name}/{role_namespace}" if role_namespace else role_name
        source = (
            f'{binding_kind} "{binding_name}" of {role_kind} "{role_label}" to '
            f"{_describe_subject(subject, namespace)}"
        )
        for rule in role.get("rules") or []:
            rules.append(GrantedRule(rule, source, role_kind, role_name, role_namespace))


def _aggregate(errors: list[str]) -> str:
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


def forbidden(user: User, attrs: Attributes, reason: str = "") -> ApiError:
    """kube-apiserver's 403 for a request the authorizer refused."""
    if not attrs.resource_request:
        message = f'User "{user.username}" cannot {attrs.verb} path "{attrs.path}"'
    elif attrs.namespace:
        message = (
            f'User "{user.username}" cannot {attrs.verb} resource "{attrs.combined}" in API group '
            f'"{attrs.group}" in the namespace "{attrs.namespace}"'
        )
    else:
        message = (
            f'User "{user.username}" cannot {attrs.verb} resource "{attrs.combined}" in API group '
            f'"{attrs.group}" at the cluster scope'
        )
    if reason:
        message = f"{message}: {reason}"
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    if not attrs.resource_request or not attrs.resource:
        text = f"forbidden: {message}"
    elif attrs.name:
        text = f'{qualified} "{attrs.name}" is forbidden: {message}'
    else:
        text = f"{qualified} is forbidden: {message}"
    given = (("name", attrs.name), ("group", attrs.group), ("kind", attrs.resource))
    details: Obj = {key: value for key, value in given if value}
    return ApiError(status(403, "Forbidden", text, details))


# -- the record of what each user did -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One kind of request one user made (counted, not listed: a long run repeats them)."""

    username: str
    verb: str
    resource_request: bool
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    path: str
    allowed: bool

    def attributes(self) -> Attributes:
        return Attributes(
            self.verb,
            self.resource_request,
            self.path,
            self.group,
            "",
            self.resource,
            self.subresource,
            self.namespace,
            self.name,
        )


MAX_NAMED_ENTRIES = 20_000
"""Distinct entries the audit record keeps with their object's name. Past that, a new entry is
counted without the name (one per user, verb, resource, namespace and decision): every Event,
Pod and Workload has a name of its own, so a long-running local cluster would otherwise keep one
entry per object it ever served. A test scenario's requests stay whole, names included."""


class AuditLog:
    """Every authorized request, by user, verb and resource (``--audit-policy`` at level Metadata),
    in bounded memory: at most ``max_named`` entries by object name, then without it."""

    def __init__(self, max_named: int = MAX_NAMED_ENTRIES) -> None:
        self.counts: Counter[AuditEntry] = Counter()
        self.max_named = max_named

    def record(self, user: User, attrs: Attributes, allowed: bool) -> None:
        path = "" if attrs.resource_request else attrs.path
        entry = AuditEntry(
            user.username,
            attrs.verb,
            attrs.resource_request,
            attrs.group,
            attrs.resource,
            attrs.subresource,
            attrs.namespace,
            attrs.name,
            path,
            allowed,
        )
        counts = self.counts
        seen = counts.get(entry)
        if seen is None and entry.name and len(counts) >= self.max_named:
            entry = replace(entry, name="")
            seen = counts.get(entry)
        counts[entry] = (seen or 0) + 1

    def of(self, username: str) -> list[AuditEntry]:
        return [entry for entry in self.counts if entry.username == username]

    def denied(self, username: str | None = None) -> list[AuditEntry]:
        return [e for e in self.counts if not e.allowed and (username is None or e.username == username)]

    def clear(self) -> None:
        self.counts.clear()


# -- the reviews --------------------------------------------------------------------------------


def access_review_attributes(spec: Any, kind: str) -> Attributes:
    """The attributes a (Self|Local)SubjectAccessReview asks about; a 400-style error when malformed."""
    if not isinstance(spec, dict):
        raise bad_request(f"a {kind} needs a spec")
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if bool(resource) == bool(non_resource):
        raise _invalid_review(
            kind,
            "spec.resourceAttributes",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )
    if non_resource:
        if not isinstance(non_resource, dict):
            raise bad_request("spec.nonResourceAttributes must be an object")
        return Attributes(str(non_resource.get("verb", "")), False, str(non_resource.get("path", "")))
    if not isinstance(resource, dict):
        raise bad_request("spec.resourceAttributes must be an object")
    return Attributes(
        str(resource.get("verb", "")),
        True,
        "",
        str(resource.get("group", "")),
        str(resource.get("version", "")),
        str(resource.get("resource", "")),
        str(resource.get("subresource", "")),
        str(resource.get("namespace", "")),
        str(resource.get("name", "")),
    )


def _invalid_review(kind: str, field: str, why: str) -> ApiError:
    return invalid(
        kind,
        "",
        [{"reason": "FieldValueInvalid", "field": field, "message": why, "type": "FieldValueInvalid"}],
        "authorization.k8s.io",
    )


def review_user(spec: Obj, kind: str) -> User:
    """The user a SubjectAccessReview asks about (``spec.user``, ``spec.groups``, ``spec.uid``)."""
    username = str(spec.get("user") or "")
    groups = tuple(str(g) for g in spec.get("groups") or [])
    if not username and not groups:
        raise _invalid_review(kind, "spec.user", "at least one of user or group must be specified")
    return User(username, str(spec.get("uid") or ""), groups)


def access_review(review: Any, kind: str, authorizer: Authorizer, user: User | None) -> Obj:
    """The answered review: ``user`` is the caller for self reviews, None to read it from the spec."""
    if not isinstance(review, dict):
        raise bad_request(f"a {kind} must be a JSON object")
    spec = review.get("spec")
    attrs = access_review_attributes(spec, kind)
    subject = user if user is not None else review_user(spec or {}, kind)
    allowed, reason = authorizer.authorize(subject, attrs)
    out: Obj = copy_json(review)
    out["apiVersion"] = "authorization.k8s.io/v1"
    out["kind"] = kind
    out["metadata"] = {**(review.get("metadata") or {}), "creationTimestamp": None}
    answer: Obj = {"allowed": allowed}
    if reason:
        answer["reason"] = reason
    out["status"] = answer
    return out


def rules_review(review: Any, authorizer: Authorizer, user: User) -> Obj:
    """SelfSubjectRulesReview (``kubectl auth can-i --list``): the caller's rules in a namespace."""
    if not isinstance(review, dict) or not isinstance(review.get("spec") or {}, dict):
        raise bad_request("a SelfSubjectRulesReview needs a spec")
    namespace = str((review.get("spec") or {}).get("namespace") or "")
    if authorizer.always_allow or MASTERS in user.groups:
        granted: list[Obj] = [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]},
        ]
        errors: list[str] = []
    else:
        found, errors = authorizer.rules_for(user, namespace)
        granted = [g.rule for g in found]
    resource_rules, non_resource_rules = [], []
    for rule in granted:
        if rule.get("nonResourceURLs"):
            non_resource_rules.append(
                {"verbs": list(rule.get("verbs") or []), "nonResourceURLs": list(rule["nonResourceURLs"])}
            )
        else:
            entry: Obj = {
                "verbs": list(rule.get("verbs") or []),
                "apiGroups": list(rule.get("apiGroups") or []),
                "resources": list(rule.get("resources") or []),
            }
            if rule.get("resourceNames"):
                entry["resourceNames"] = list(rule["resourceNames"])
            resource_rules.append(entry)
    status_: Obj = {
        "resourceRules": resource_rules,
        "nonResourceRules": non_resource_rules,
        "incomplete": False,
    }
    if errors:
        status_["evaluationError"] = _aggregate(errors)
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "metadata": {**(review.get("metadata") or {}), "creationTimestamp": None},
        "spec": {"namespace": namespace} if namespace else {},
        "status": status_,
    }


# -- the bootstrap policy ----------------------------------------------------------------------

BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> Obj:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def _cluster_role(
    name: str, rules: list[Obj], labels: Mapping[str, str] | None = None, aggregate_from: str = ""
) -> Obj:
    role: Obj = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": name,
            "labels": {**BOOTSTRAP_LABELS, **dict(labels or {})},
            "annotations": dict(AUTOUPDATE),
        },
        "rules": rules,
    }
    if aggregate_from:
        role["aggregationRule"] = {
            "clusterRoleSelectors": [{"matchLabels": {AGGREGATE + aggregate_from: "true"}}]
        }
    return role


def _cluster_binding(name: str, role: str, groups: list[str]) -> Obj:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name, "labels": dict(BOOTSTRAP_LABELS), "annotations": dict(AUTOUPDATE)},
        "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": g} for g in groups],
    }


def bootstrap_namespace_roles() -> list[Obj]:
    """kube-apiserver's namespaced bootstrap Roles (``NamespaceRoles``) that aggregated API
    servers bind to: reading the front proxy's CA in ``kube-system``."""
    return [
        {
            "apiVersion": f"{GROUP}/v1",
            "kind": "Role",
            "metadata": {
                "name": "extension-apiserver-authentication-reader",
                "namespace": "kube-system",
                "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
            },
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "resourceNames": ["extension-apiserver-authentication"],
                    "verbs": ["get", "list", "watch"],
                }
            ],
        }
    ]


def bootstrap_policy() -> list[Obj]:
    """kube-apiserver's default roles and bindings (``bootstrappolicy/policy.go``), for the kinds
    a cluster serves; ``admin``/``edit``/``view`` start empty and are filled by aggregation."""
    core_read = [
        "pods",
        "pods/status",
        "pods/log",
        "replicationcontrollers",
        "replicationcontrollers/scale",
        "replicationcontrollers/status",
        "serviceaccounts",
        "services",
        "services/status",
        "endpoints",
        "persistentvolumeclaims",
        "persistentvolumeclaims/status",
        "configmaps",
        "limitranges",
        "resourcequotas",
        "resourcequotas/status",
        "bindings",
        "events",
        "namespaces",
        "namespaces/status",
        "podtemplates",
    ]
    apps = [
        "controllerrevisions",
        "statefulsets",
        "statefulsets/scale",
        "statefulsets/status",
        "deployments",
        "deployments/scale",
        "deployments/status",
        "replicasets",
        "replicasets/scale",
        "replicasets/status",
        "daemonsets",
        "daemonsets/status",
    ]
    view = [
        _rule([""], core_read, READ),
        _rule(["discovery.k8s.io"], ["endpointslices"], READ),
        _rule(["apps"], apps, READ),
        _rule(["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"], READ),
        _rule(["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"], READ),
        _rule(["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"], READ),
        _rule(["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"], READ),
    ]
    edit = [
        _rule(
            [""],
            ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"],
            READ,
        ),
        _rule([""], ["serviceaccounts"], ["impersonate"]),
        _rule([""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"], WRITE),
        _rule([""], ["pods/eviction"], ["create"]),
        _rule(
            [""],
            [
                "configmaps",
                "events",
                "endpoints",
                "persistentvolumeclaims",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "secrets",
                "serviceaccounts",
                "services",
                "services/proxy",
                "podtemplates",
            ],
            WRITE,
        ),
        _rule([""], ["serviceaccounts/token"], ["create"]),
        _rule(["apps"], [r for r in apps if not r.endswith("/status") and r != "controllerrevisions"], WRITE),
        _rule(["autoscaling"], ["horizontalpodautoscalers"], WRITE),
        _rule(["batch"], ["cronjobs", "jobs"], WRITE),
        _rule(["policy"], ["poddisruptionbudgets"], WRITE),
        _rule(["networking.k8s.io"], ["ingresses", "networkpolicies"], WRITE),
        _rule(["coordination.k8s.io"], ["leases"], [*READ, *WRITE]),
    ]
    admin = [
        _rule(["authorization.k8s.io"], ["localsubjectaccessreviews"], ["create"]),
        _rule([GROUP], ["rolebindings", "roles"], [*READ, *WRITE]),
    ]
    discovery_urls = [
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/healthz",
        "/livez",
        "/openapi",
        "/openapi/*",
        "/readyz",
        "/version",
        "/version/",
    ]
    return [
        _cluster_role(
            "cluster-admin", [_rule(["*"], ["*"], ["*"]), {"nonResourceURLs": ["*"], "verbs": ["*"]}]
        ),
        _cluster_role("admin", [], {}, aggregate_from="admin"),
        _cluster_role("edit", [], {AGGREGATE + "admin": "true"}, aggregate_from="edit"),
        _cluster_role(
            "view", [], {AGGREGATE + "admin": "true", AGGREGATE + "edit": "true"}, aggregate_from="view"
        ),
        _cluster_role("system:aggregate-to-admin", admin, {AGGREGATE + "admin": "true"}),
        _cluster_role("system:aggregate-to-edit", edit, {AGGREGATE + "edit": "true"}),
        _cluster_role("system:aggregate-to-view", view, {AGGREGATE + "view": "true"}),
        _cluster_role("system:discovery", [{"nonResourceURLs": discovery_urls, "verbs": ["get"]}]),
        _cluster_role(
            "system:public-info-viewer",
            [
                {
                    "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                    "verbs": ["get"],
                }
            ],
        ),
        _cluster_role(
            "system:basic-user",
            [
                _rule(
                    ["authorization.k8s.io"],
                    ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    ["create"],
                ),
                _rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"]),
            ],
        ),
        _cluster_role(
            "system:auth-delegator",
            [
                _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
                _rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]),
            ],
        ),
        _cluster_binding("cluster-admin", "cluster-admin", [MASTERS]),
        _cluster_binding("system:discovery", "system:discovery", [AUTHENTICATED]),
        _cluster_binding("system:basic-user", "system:basic-user", [AUTHENTICATED]),
        _cluster_binding(
            "system:public-info-viewer", "system:public-info-viewer", [AUTHENTICATED, UNAUTHENTICATED]
        ),
    ]


def install_bootstrap_policy(store: Store) -> None:
    """Create the bootstrap roles and bindings that do not exist yet (a server start reconciles
    them), with the aggregated roles already filled, so the first request finds them complete."""
    for obj in bootstrap_policy():
        plural = "clusterroles" if obj["kind"] == "ClusterRole" else "clusterrolebindings"
        if store.get(GROUP, plural, None, obj["metadata"]["name"]) is None:
            store.create(GROUP, plural, obj)
    for role in bootstrap_namespace_roles():
        meta = role["metadata"]
        if store.get(GROUP, "roles", meta["namespace"], meta["name"]) is None:
            store.create(GROUP, "roles", role)
    while any(_aggregate_into(store, role["metadata"]["name"]) for role in store.list(*CLUSTER_ROLES)):
        pass  # admin aggregates edit, which aggregates view: until nothing changes


def _aggregate_into(store: Store, name: str) -> bool:
    """Bring one aggregated ClusterRole's rules up to date; whether that changed it."""
    role = store.get(*CLUSTER_ROLES, None, name)
    if role is None or not role.get("aggregationRule"):
        return False
    rules = aggregated_rules(role, store.list(*CLUSTER_ROLES))
    if rules == (role.get("rules") or []):
        return False
    updated = dict(role)
    updated["metadata"] = dict(role["metadata"])
    updated["rules"] = rules
    store.replace(*CLUSTER_ROLES, updated)
    log.debug("aggregated %d rules into ClusterRole %s", len(rules), name)
    return True


# -- the aggregation controller ----------------------------------------------------------------


def aggregated_rules(role: Obj, roles: Iterable[Obj]) -> list[Obj]:
    """The rules an aggregated ClusterRole should have: those of every other ClusterRole one of its
    selectors matches, in name order, without duplicates (``clusterroleaggregation_controller.go``)."""
    selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
    name = role["metadata"]["name"]
    out: list[Obj] = []
    for other in sorted(roles, key=lambda r: str(r["metadata"]["name"])):
        if other["metadata"]["name"] == name:
            continue
        labels = other["metadata"].get("labels") or {}
        try:
            picked = any(label_selector_matches(s, labels) for s in selectors)
        except SelectorError:
            picked = False
        if not picked:
            continue
        for rule in other.get("rules") or []:
            if rule not in out:
                out.append(copy_json(rule))
    return out


class AggregationController:
    """Keeps aggregated ClusterRoles' rules current as ClusterRoles come, change and go."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._queue: WorkQueue[str] = WorkQueue()
        self._task: asyncio.Task[None] | None = None
        store.add_listener(self._on_event)

    def start(self) -> None:
        for role in self.store.list(*CLUSTER_ROLES):
            if role.get("aggregationRule"):
                self._queue.add(role["metadata"]["name"])
        self._task = asyncio.get_running_loop().create_task(
            self._queue.run_worker(self._sync), name="localcluster-clusterrole-aggregation"
        )

    async def stop(self) -> None:
        self._queue.close()
        await cancel_and_wait(self._task)

    async def settled(self) -> None:
        await self._queue.drained()

    def _on_event(self, event: Event) -> None:
        if event.key != CLUSTER_ROLES:
            return
        for role in self.store.list(*CLUSTER_ROLES):
            if role.get("aggregationRule"):
                self._queue.add(role["metadata"]["name"])

    async def _sync(self, name: str) -> None:
        _aggregate_into(self.store, name)
