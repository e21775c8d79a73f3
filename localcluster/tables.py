"""``meta.k8s.io/v1`` Table responses, which ``kubectl get`` asks for to print its columns.

Columns are Name, then a CRD's ``additionalPrinterColumns`` (exactly those, when it declares
any), or a few well-known ones for built-in kinds followed by Age, as the real server prints them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kadmit.localcluster.conditions import find
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.resources import ResourceType
from kadmit.localcluster.timestamps import parse_time


def wants_table(accept: str) -> bool:
    return "as=Table" in accept.replace(" ", "")


def _column(name: str, type_: str = "string", fmt: str = "", priority: int = 0) -> Obj:
    return {"name": name, "type": type_, "format": fmt, "description": name, "priority": priority}


def _path_steps(path: str) -> list[str]:
    """Split a printer column's JSONPath on the dots outside brackets (filters contain dots)."""
    steps: list[str] = []
    current: list[str] = []
    depth = 0
    quote = ""
    for char in path.strip().lstrip("."):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "." and depth == 0:
            steps.append("".join(current))
            current = []
            continue
        current.append(char)
    steps.append("".join(current))
    return [step for step in steps if step]


def _select(value: Any, selector: str) -> Any:
    """Apply one ``[index]`` or ``[?(@.a.b=='x')]`` selector, as kubectl's JSONPath does for columns."""
    if not isinstance(value, list):
        return None
    if selector.lstrip("-").isdigit():
        index = int(selector)
        return value[index] if -len(value) <= index < len(value) else None
    if selector.startswith("?(") and selector.endswith(")"):
        left, op, right = selector[2:-1].partition("==")
        if not op:
            left, op, right = selector[2:-1].partition("!=")
        keys = _path_steps(left.strip().removeprefix("@"))
        want = right.strip().strip("\"'")
        for item in value:
            found: Any = item
            for key in keys:
                found = found.get(key) if isinstance(found, dict) else None
            if found is not None and (str(found) == want) == (op == "=="):
                return item
    return None


def _json_path(obj: Obj, path: str) -> Any:
    value: Any = obj
    for step in _path_steps(path):
        key, bracket, rest = step.partition("[")
        if key:
            value = value.get(key) if isinstance(value, dict) else None
        while bracket and value is not None:
            selector, _, rest = rest.partition("]")
            value = _select(value, selector.strip())
            _, bracket, rest = rest.partition("[")
    return value


def age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        then = parse_time(timestamp)
    except ValueError:
        return "<unknown>"
    seconds = int((datetime.now(UTC) - then).total_seconds())
    if seconds < 120:
        return f"{max(seconds, 0)}s"
    if seconds < 3600 * 2:
        return f"{seconds // 60}m"
    if seconds < 86400 * 2:
        return f"{seconds // 3600}h"
    return f"{seconds // 86400}d"


def _builtin_columns(rt: ResourceType) -> list[tuple[Obj, Any]]:
    def job_status(o: Obj) -> str:
        for c in (o.get("status") or {}).get("conditions") or []:
            if c.get("status") == "True" and c.get("type") in ("Complete", "Failed", "Suspended"):
                return str(c["type"])
        return (
            "Running"
            if (o.get("status") or {}).get("active")
            else ("Suspended" if (o.get("spec") or {}).get("suspend") else "Running")
        )

    if rt.key == ("batch", "jobs"):
        return [
            (_column("Status"), job_status),
            (
                _column("Completions"),
                lambda o: (
                    f"{(o.get('status') or {}).get('succeeded', 0)}/"
                    f"{(o.get('spec') or {}).get('completions', 1)}"
                ),
            ),
        ]
    if rt.key == ("", "pods"):
        return [
            (_column("Ready"), _pod_ready),
            (_column("Status"), _pod_status),
            (_column("Restarts", "integer"), _pod_restarts),
            (_column("IP", priority=1), lambda o: (o.get("status") or {}).get("podIP", "<none>")),
            (_column("Node", priority=1), lambda o: (o.get("spec") or {}).get("nodeName", "<none>")),
        ]
    if rt.key == ("", "nodes"):
        return [
            (_column("Status"), _node_status),
            (_column("Roles"), _node_roles),
            (_column("Age", "date"), lambda o: age(o["metadata"].get("creationTimestamp"))),
            (
                _column("Version"),
                lambda o: ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", ""),
            ),
        ]
    if rt.key == ("", "namespaces"):
        return [(_column("Status"), lambda o: (o.get("status") or {}).get("phase", ""))]
    if rt.key == ("apiregistration.k8s.io", "apiservices"):
        return [(_column("Service"), _apiservice_service), (_column("Available"), _apiservice_available)]
    return []


def _apiservice_service(apiservice: Obj) -> str:
    service = (apiservice.get("spec") or {}).get("service")
    return f"{service.get('namespace')}/{service.get('name')}" if isinstance(service, dict) else "Local"


def _apiservice_available(apiservice: Obj) -> str:
    """As kubectl prints it: the condition's status, and its reason when not True."""
    for condition in (apiservice.get("status") or {}).get("conditions") or []:
        if isinstance(condition, dict) and condition.get("type") == "Available":
            if condition.get("status") == "True":
                return "True"
            return f"{condition.get('status')} ({condition.get('reason')})"
    return "Unknown"


def _node_status(node: Obj) -> str:
    ready = find(node.get("status") or {}, "Ready")
    status = "Ready" if ready and ready.get("status") == "True" else "NotReady" if ready else "Unknown"
    if (node.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    return status


def _node_roles(node: Obj) -> str:
    prefix = "node-role.kubernetes.io/"
    labels = node["metadata"].get("labels") or {}
    roles = sorted(key.removeprefix(prefix) for key in labels if key.startswith(prefix))
    return ",".join(roles) or "<none>"


def _container_statuses(pod: Obj) -> list[Obj]:
    return [c for c in (pod.get("status") or {}).get("containerStatuses") or [] if isinstance(c, dict)]


def _pod_ready(pod: Obj) -> str:
    total = len((pod.get("spec") or {}).get("containers") or [])
    ready = sum(1 for c in _container_statuses(pod) if c.get("ready"))
    return f"{ready}/{total}"


def _pod_status(pod: Obj) -> str:
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    status = pod.get("status") or {}
    for c in _container_statuses(pod):
        waiting = (c.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            return str(waiting["reason"])
    return str(status.get("reason") or status.get("phase") or "Unknown")


def _pod_restarts(pod: Obj) -> int:
    return sum(int(c.get("restartCount") or 0) for c in _container_statuses(pod))


def table(rt: ResourceType, objects: list[Obj], resource_version: str, continue_: str | None = None) -> Obj:
    columns: list[tuple[Obj, Any]] = [(_column("Name", fmt="name"), lambda o: o["metadata"]["name"])]
    printer_columns: list[Obj] = []
    if rt.crd is not None:
        for version in rt.crd["spec"].get("versions", []):
            if version.get("name") == rt.version:
                printer_columns = list(version.get("additionalPrinterColumns") or [])
    else:
        columns += _builtin_columns(rt)
    if not printer_columns and not any(c["name"] == "Age" for c, _ in columns):
        # A CRD that declares columns gets exactly those; everything else gets Age, as upstream.
        printer_columns = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    for col in printer_columns:
        type_ = col.get("type", "string")
        columns.append(
            (
                _column(col["name"], type_, col.get("format", ""), col.get("priority", 0)),
                lambda o, p=col["jsonPath"], t=type_: _cell(_json_path(o, p), t),
            )
        )
    rows = [
        {
            "cells": [getter(obj) for _, getter in columns],
            "object": {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            },
        }
        for obj in objects
    ]
    meta: Obj = {"resourceVersion": resource_version}
    if continue_:
        meta["continue"] = continue_
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": [c for c, _ in columns],
        "rows": rows,
    }


def _cell(value: Any, type_: str = "string") -> Any:
    if value is None:
        return None
    if type_ == "date" and isinstance(value, str):
        return age(value)  # the server renders dates as ages, as apiextensions' table convertor does
    if isinstance(value, str | int | float | bool):
        return value
    import json

    return json.dumps(value, separators=(",", ":"))
