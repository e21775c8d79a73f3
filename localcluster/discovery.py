"""Discovery documents: the legacy ones (``APIVersions``, ``APIGroupList``, ``APIResourceList``)
and the aggregated ``apidiscovery.k8s.io/v2`` list that kubectl 1.32 asks for first."""

from __future__ import annotations

from kadmit.localcluster.objects import Obj
from kadmit.localcluster.resources import Registry, ResourceType

AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
SUBRESOURCE_VERBS = ["get", "patch", "update"]
# serviceaccounts/token answers with another group's kind (:mod:`kadmit.localcluster.tokenrequest`).
TOKEN_REQUEST = {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"}


def wants_aggregated(accept: str) -> str | None:
    """The aggregated media type the client accepts first, if any (v2 preferred)."""
    for part in accept.split(","):
        params = dict(p.split("=", 1) for p in part.replace(" ", "").split(";")[1:] if "=" in p)
        if params.get("g") == "apidiscovery.k8s.io" and params.get("as") == "APIGroupDiscoveryList":
            if params.get("v") == "v2":
                return AGGREGATED_V2
            if params.get("v") == "v2beta1":
                return AGGREGATED_V2BETA1
    return None


def api_versions() -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    }


def _group_doc(group: str, versions: list[str]) -> Obj:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def api_group_list(registry: Registry) -> Obj:
    groups = [_group_doc(g, vs) for g, vs in registry.groups() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(registry: Registry, group: str) -> Obj | None:
    for g, versions in registry.groups():
        if g == group and g:
            return dict(_group_doc(g, versions), kind="APIGroup", apiVersion="v1")
    return None


def _verbs_and_names(rt: ResourceType) -> Obj:
    """What both discovery formats say of a resource beyond its names: verbs, short names, categories."""
    entry: Obj = {"verbs": list(rt.verbs)}
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.categories:
        entry["categories"] = list(rt.categories)
    return entry


def api_resource_list(registry: Registry, group: str, version: str) -> Obj | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    resources: list[Obj] = []
    for rt in sorted(types, key=lambda t: t.plural):
        resources.append(
            {
                "name": rt.plural,
                "singularName": rt.singular,
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                **_verbs_and_names(rt),
            }
        )
        if rt.key == ("", "pods"):
            for action in ("binding", "eviction"):
                resources.append(
                    {
                        "name": f"pods/{action}",
                        "singularName": "",
                        "namespaced": True,
                        "kind": "Binding" if action == "binding" else "Eviction",
                        "verbs": ["create"],
                    }
                )
        if rt.key == ("", "serviceaccounts"):
            resources.append(
                {
                    "name": "serviceaccounts/token",
                    "singularName": "",
                    "namespaced": True,
                    "group": TOKEN_REQUEST["group"],
                    "version": TOKEN_REQUEST["version"],
                    "kind": TOKEN_REQUEST["kind"],
                    "verbs": ["create"],
                }
            )
        if rt.status:
            resources.append(
                {
                    "name": f"{rt.plural}/status",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": rt.kind,
                    "verbs": SUBRESOURCE_VERBS,
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def _aggregated_resource(rt: ResourceType) -> Obj:
    entry: Obj = {
        "resource": rt.plural,
        "responseKind": {"group": "", "version": "", "kind": rt.kind},
        "scope": "Namespaced" if rt.namespaced else "Cluster",
        "singularResource": rt.singular,
        **_verbs_and_names(rt),
    }
    subresources: list[Obj] = []
    if rt.key == ("", "serviceaccounts"):
        token: Obj = {"subresource": "token", "responseKind": dict(TOKEN_REQUEST), "verbs": ["create"]}
        subresources.append(token)
    if rt.status:
        subresources.append(
            {
                "subresource": "status",
                "responseKind": {"group": "", "version": "", "kind": rt.kind},
                "verbs": SUBRESOURCE_VERBS,
            }
        )
    if subresources:
        entry["subresources"] = subresources
    return entry


def aggregated(registry: Registry, core: bool, media: str) -> Obj:
    """The ``APIGroupDiscoveryList`` for ``/api`` (core) or ``/apis`` (all named groups)."""
    items = []
    for group, versions in registry.groups():
        if bool(group) == core:
            continue
        items.append(
            {
                "metadata": {"name": group, "creationTimestamp": None},
                "versions": [
                    {
                        "version": v,
                        "resources": [
                            _aggregated_resource(rt)
                            for rt in sorted(registry.in_group_version(group, v), key=lambda t: t.plural)
                        ],
                        "freshness": "Current",
                    }
                    for v in versions
                ],
            }
        )
    api_version = "apidiscovery.k8s.io/v2" if media == AGGREGATED_V2 else "apidiscovery.k8s.io/v2beta1"
    return {"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items}
