"""``/openapi/v3``: the root index and one document per group/version.

kubectl 1.32 validates with ``--validate=strict`` by checking here that the server accepts the
``fieldValidation`` parameter on the kind's PATCH operation, then lets the server validate; it
also reads the schemas for ``explain`` and for strategic-merge ``apply``. Built-in schemas come
from :mod:`kadmit.localcluster.builtin_schemas`, CRD schemas are served verbatim.
"""

from __future__ import annotations

import hashlib
import json

from kadmit.localcluster.builtin_schemas import REF_PREFIX, closure
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.resources import Registry, ResourceType

_OBJECT_META = "V1ObjectMeta"


def _doc_hash(registry: Registry, group: str, version: str) -> str:
    parts = sorted(
        f"{rt.plural}:{rt.crd['metadata'].get('resourceVersion', '') if rt.crd else ''}"
        for rt in registry.in_group_version(group, version)
    )
    return hashlib.sha256(json.dumps([group, version, parts]).encode()).hexdigest()[:32].upper()


def root(registry: Registry) -> Obj:
    paths: Obj = {}
    for group, versions in registry.groups():
        for version in versions:
            key = f"apis/{group}/{version}" if group else f"api/{version}"
            paths[key] = {
                "serverRelativeURL": f"/openapi/v3/{key}?hash={_doc_hash(registry, group, version)}"
            }
    return {"paths": paths}


def _param(name: str, where: str = "query", required: bool = False) -> Obj:
    return {
        "name": name,
        "in": where,
        "required": required,
        "schema": {"type": "string", "uniqueItems": True},
    }


_WRITE_PARAMS = [_param("dryRun"), _param("fieldManager"), _param("fieldValidation")]


def _gvk(rt: ResourceType) -> Obj:
    return {"group": rt.group, "version": rt.version, "kind": rt.kind}


def _schema_name(rt: ResourceType) -> str:
    if rt.crd is None:
        return rt.model
    reversed_group = ".".join(reversed(rt.group.split(".")))
    return f"{reversed_group}.{rt.version}.{rt.kind}"


def _operation(rt: ResourceType, action: str, schema_ref: str | None, params: list[Obj]) -> Obj:
    op: Obj = {
        "operationId": f"{action}{rt.kind}",
        "tags": [rt.group or "core"],
        "parameters": params,
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": _gvk(rt),
        "responses": {"200": {"description": "OK"}},
    }
    if schema_ref is not None:
        content = {"application/json": {"schema": {"$ref": schema_ref}}}
        op["responses"]["200"]["content"] = content
        if action in ("post", "put"):
            op["requestBody"] = {"content": {"*/*": {"schema": {"$ref": schema_ref}}}, "required": True}
    if action == "patch":
        op["requestBody"] = {
            "content": {
                media: {"schema": {"type": "object"}}
                for media in (
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    # Custom resources take no strategic merge patch; kubectl apply reads this list
                    # to choose between a strategic and a JSON merge patch, as against a real server.
                    *(() if rt.crd is not None else ("application/strategic-merge-patch+json",)),
                    "application/apply-patch+yaml",
                )
            },
            "required": True,
        }
    return op


def _paths_for(rt: ResourceType, schema_ref: str) -> Obj:
    base = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
    prefix = f"{base}/namespaces/{{namespace}}" if rt.namespaced else base
    scope_params = [_param("namespace", "path", True)] if rt.namespaced else []
    collection = f"{prefix}/{rt.plural}"
    item = f"{collection}/{{name}}"
    paths: Obj = {
        collection: {
            "parameters": [*scope_params, _param("pretty")],
            "get": _operation(
                rt,
                "list",
                None,
                [
                    _param("labelSelector"),
                    _param("fieldSelector"),
                    _param("watch"),
                    _param("resourceVersion"),
                    _param("limit"),
                ],
            ),
            "post": _operation(rt, "post", schema_ref, list(_WRITE_PARAMS)),
        },
        item: {
            "parameters": [_param("name", "path", True), *scope_params, _param("pretty"), *_WRITE_PARAMS],
            "get": _operation(rt, "get", schema_ref, []),
            "put": _operation(rt, "put", schema_ref, list(_WRITE_PARAMS)),
            "patch": _operation(rt, "patch", schema_ref, [*_WRITE_PARAMS, _param("force")]),
            "delete": _operation(
                rt,
                "delete",
                None,
                [_param("dryRun"), _param("propagationPolicy"), _param("gracePeriodSeconds")],
            ),
        },
    }
    if rt.status:
        paths[f"{item}/status"] = {
            "parameters": [_param("name", "path", True), *scope_params, _param("pretty"), *_WRITE_PARAMS],
            "get": _operation(rt, "get", schema_ref, []),
            "put": _operation(rt, "put", schema_ref, list(_WRITE_PARAMS)),
            "patch": _operation(rt, "patch", schema_ref, [*_WRITE_PARAMS, _param("force")]),
        }
    return paths


def _crd_schema(rt: ResourceType) -> Obj:
    schema = dict(rt.schema() or {"type": "object", "x-kubernetes-preserve-unknown-fields": True})
    properties = dict(schema.get("properties") or {})
    properties["apiVersion"] = {"type": "string"}
    properties["kind"] = {"type": "string"}
    properties["metadata"] = {"$ref": REF_PREFIX + _OBJECT_META}
    schema["properties"] = properties
    schema["x-kubernetes-group-version-kind"] = [_gvk(rt)]
    return schema


def document(registry: Registry, group: str, version: str) -> Obj | None:
    types = registry.in_group_version(group, version)
    if not types:
        return None
    schemas: Obj = {}
    paths: Obj = {}
    for rt in sorted(types, key=lambda t: t.plural):
        name = _schema_name(rt)
        if rt.crd is None:
            for model, schema in closure(rt.model).items():
                schemas.setdefault(model, schema)
            schemas[name] = dict(schemas[name], **{"x-kubernetes-group-version-kind": [_gvk(rt)]})
        else:
            schemas[name] = _crd_schema(rt)
            for model, schema in closure(_OBJECT_META).items():
                schemas.setdefault(model, schema)
        paths.update(_paths_for(rt, REF_PREFIX + name))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }
