"""The kinds the server knows: built-in ones from a table, custom ones from stored CRDs.

A :class:`ResourceType` is one served group/version/resource. Objects are stored once per
group/resource at the storage version, so the registry also answers which version stores a
resource and which CRD (if any) defines it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

from kadmit.localcluster.objects import Obj

READ_VERBS = ("get", "list", "watch")
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    """One resource as served at one group/version."""

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    status: bool = False  # has the status subresource
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    storage_version: str = ""  # "" means: this version
    model: str = ""  # the kubernetes-asyncio model name (built-in kinds), for OpenAPI schemas
    crd: Obj | None = field(default=None, compare=False, hash=False)

    # Computed once per instance (the fields are frozen): the server asks on every request.
    @cached_property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage(self) -> str:
        return self.storage_version or self.version

    @cached_property
    def key(self) -> tuple[str, str]:
        """The store's key: objects of all versions of a resource live together."""
        return (self.group, self.plural)

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    def qualified(self) -> str:
        """``jobs.batch``, as error messages name a resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def schema(self) -> Obj | None:
        """The CRD's openAPIV3Schema for this version (None for built-in kinds)."""
        if self.crd is None:
            return None
        for version in self.crd["spec"].get("versions", []):
            if version.get("name") == self.version:
                schema = (version.get("schema") or {}).get("openAPIV3Schema")
                return schema if isinstance(schema, dict) else None
        return None


def _builtin(
    group: str,
    version: str,
    kind: str,
    plural: str,
    namespaced: bool,
    status: bool = False,
    short: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    verbs: tuple[str, ...] = ALL_VERBS,
    model: str = "",
) -> ResourceType:
    prefix = "V1" if version == "v1" else version.capitalize()
    return ResourceType(
        group=group,
        version=version,
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        status=status,
        short_names=short,
        categories=categories,
        verbs=verbs,
        model=model or prefix + kind,
    )


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _builtin("", "v1", "Namespace", "namespaces", False, True, ("ns",)),
    _builtin("", "v1", "Pod", "pods", True, True, ("po",), ("all",)),
    _builtin("", "v1", "Node", "nodes", False, True, ("no",)),
    _builtin("", "v1", "Secret", "secrets", True),
    _builtin("", "v1", "ConfigMap", "configmaps", True, False, ("cm",)),
    _builtin("", "v1", "ServiceAccount", "serviceaccounts", True, False, ("sa",)),
    _builtin("", "v1", "Service", "services", True, True, ("svc",), ("all",)),
    _builtin("", "v1", "Event", "events", True, False, ("ev",), model="CoreV1Event"),
    _builtin("", "v1", "ResourceQuota", "resourcequotas", True, True, ("quota",)),
    _builtin("", "v1", "PodTemplate", "podtemplates", True),
    _builtin("", "v1", "Endpoints", "endpoints", True, False, ("ep",)),
    _builtin("", "v1", "LimitRange", "limitranges", True, False, ("limits",)),
    _builtin("apps", "v1", "Deployment", "deployments", True, True, ("deploy",), ("all",)),
    _builtin("apps", "v1", "ReplicaSet", "replicasets", True, True, ("rs",), ("all",)),
    _builtin("apps", "v1", "StatefulSet", "statefulsets", True, True, ("sts",), ("all",)),
    _builtin("apps", "v1", "DaemonSet", "daemonsets", True, True, ("ds",), ("all",)),
    _builtin("batch", "v1", "Job", "jobs", True, True, (), ("all",)),
    _builtin("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, True, ("pdb",)),
    _builtin("events.k8s.io", "v1", "Event", "events", True, False, ("ev",), model="EventsV1Event"),
    _builtin("coordination.k8s.io", "v1", "Lease", "leases", True),
    _builtin("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, False, ("pc",)),
    _builtin("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", False),
    _builtin("rbac.authorization.k8s.io", "v1", "Role", "roles", True),
    _builtin("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True),
    _builtin("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False),
    _builtin("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False),
    _builtin(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        False,
    ),
    _builtin(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        False,
    ),
    _builtin(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        False,
        True,
        ("crd", "crds"),
    ),
    _builtin("apiregistration.k8s.io", "v1", "APIService", "apiservices", False, True),
    _builtin(
        "authentication.k8s.io",
        "v1",
        "SelfSubjectReview",
        "selfsubjectreviews",
        False,
        verbs=("create",),
    ),
    _builtin(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        False,
        verbs=("create",),
    ),
    _builtin("authentication.k8s.io", "v1", "TokenReview", "tokenreviews", False, verbs=("create",)),
    _builtin(
        "authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews", False, verbs=("create",)
    ),
    _builtin(
        "authorization.k8s.io",
        "v1",
        "LocalSubjectAccessReview",
        "localsubjectaccessreviews",
        True,
        verbs=("create",),
    ),
    _builtin(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        False,
        verbs=("create",),
    ),
)

# Group order in discovery: core first, then as a real server lists them.
_GROUP_ORDER = [
    "",
    "apps",
    "batch",
    "policy",
    "events.k8s.io",
    "coordination.k8s.io",
    "scheduling.k8s.io",
    "node.k8s.io",
    "rbac.authorization.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
]


def types_from_crd(crd: Obj) -> list[ResourceType]:
    """The served versions of an (established) CustomResourceDefinition."""
    spec = crd["spec"]
    names = spec["names"]
    versions = [v for v in spec.get("versions", []) if v.get("served", True)]
    storage = next((v["name"] for v in spec.get("versions", []) if v.get("storage")), versions[0]["name"])
    out = []
    for version in versions:
        out.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                kind=names["kind"],
                plural=names["plural"],
                singular=names.get("singular") or names["kind"].lower(),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                status="status" in (version.get("subresources") or {}),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                storage_version=storage,
                crd=crd,
            )
        )
    return out


class Registry:
    """Every served resource, indexed for path lookup and for discovery."""

    def __init__(self) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._crd_types: dict[str, list[ResourceType]] = {}  # CRD name -> its types
        for rt in BUILTIN_TYPES:
            self._by_path[(rt.group, rt.version, rt.plural)] = rt

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def storage_type(self, group: str, plural: str) -> ResourceType | None:
        for rt in self._by_path.values():
            if rt.group == group and rt.plural == plural and rt.version == rt.storage:
                return rt
        return None

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        for rt in self._by_path.values():
            if rt.group == group and rt.version == version and rt.kind == kind:
                return rt
        return None

    def set_crd(self, crd: Obj) -> None:
        """Serve (or re-serve, after an update) the resources a CRD defines."""
        self.remove_crd(crd["metadata"]["name"])
        types = types_from_crd(crd)
        for rt in types:
            self._by_path[(rt.group, rt.version, rt.plural)] = rt
        self._crd_types[crd["metadata"]["name"]] = types

    def remove_crd(self, name: str) -> None:
        for rt in self._crd_types.pop(name, []):
            self._by_path.pop((rt.group, rt.version, rt.plural), None)

    def conflicts(self, crd: Obj) -> str | None:
        """Why a CRD cannot be served: it names a resource that another definition serves."""
        spec = crd["spec"]
        for rt in self._by_path.values():
            same = rt.group == spec["group"] and rt.plural == spec["names"]["plural"]
            if same and (rt.crd is None or rt.crd["metadata"]["name"] != crd["metadata"]["name"]):
                return f"{spec['names']['plural']}.{spec['group']} is already served"
        return None

    def all(self) -> Iterator[ResourceType]:
        return iter(self._by_path.values())

    def groups(self) -> list[tuple[str, list[str]]]:
        """(group, versions in preference order) for every served group, core group first."""
        found: dict[str, list[str]] = {}
        for rt in self._by_path.values():
            versions = found.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        order = {g: i for i, g in enumerate(_GROUP_ORDER)}
        result = []
        for group in sorted(found, key=lambda g: (order.get(g, len(order)), g)):
            result.append((group, sorted(found[group], key=version_priority, reverse=True)))
        return result

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self._by_path.values() if rt.group == group and rt.version == version]


def version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' version ordering: GA > beta > alpha, then by number (``v1 > v1beta2 > v1alpha1``)."""
    import re

    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not match:
        return (-1, 0, 0)
    major = int(match.group(1))
    stage = {"alpha": 0, "beta": 1, None: 2}[match.group(2)]
    minor = int(match.group(3) or 0)
    return (stage, major, minor)
