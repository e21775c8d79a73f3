"""``meta.k8s.io/v1`` Table responses, which ``kubectl get`` asks for to print its columns.

Columns are Name, then a CRD's ``additionalPrinterColumns`` (or a few well-known ones for
built-in kinds), then Age, as the real server prints them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from localcluster.resources import ResourceType

Obj = dict[str, Any]


def wants_table(accept: str) -> bool:
    return "as=Table" in accept.replace(" ", "")


def _column(name: str, type_: str = "string", fmt: str = "", priority: int = 0) -> Obj:
    return {"name": name, "type": type_, "format": fmt, "description": name, "priority": priority}


def _json_path(obj: Obj, path: str) -> Any:
    value: Any = obj
    for part in path.strip().lstrip(".").split("."):
        if not part:
            continue
        if "[" in part:
            key, _, rest = part.partition("[")
            value = value.get(key) if isinstance(value, dict) else None
            index = rest.rstrip("]")
            if (
                isinstance(value, list)
                and index.lstrip("-").isdigit()
                and -len(value) <= int(index) < len(value)
            ):
                value = value[int(index)]
            elif isinstance(value, list) and index.startswith("?("):
                cond = index[2:].rstrip(")").lstrip("@.")
                key2, _, want = cond.partition("==")
                want = want.strip("\"'")
                value = next((v for v in value if isinstance(v, dict) and str(v.get(key2)) == want), None)
            else:
                value = None
        else:
            value = value.get(part) if isinstance(value, dict) else None
    return value


def age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
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
    if rt.key == ("", "namespaces"):
        return [(_column("Status"), lambda o: (o.get("status") or {}).get("phase", ""))]
    return []


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
    if rt.crd is not None:
        for version in rt.crd["spec"].get("versions", []):
            if version.get("name") != rt.version:
                continue
            for col in version.get("additionalPrinterColumns") or []:
                columns.append(
                    (
                        _column(
                            col["name"],
                            col.get("type", "string"),
                            col.get("format", ""),
                            col.get("priority", 0),
                        ),
                        lambda o, p=col["jsonPath"]: _cell(_json_path(o, p)),
                    )
                )
    else:
        columns += _builtin_columns(rt)
    columns.append((_column("Age"), lambda o: age(o["metadata"].get("creationTimestamp"))))
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


def _cell(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str | int | float | bool):
        return value
    import json

    return json.dumps(value, separators=(",", ":"))
