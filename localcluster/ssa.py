"""Server-side apply: field managers, ``managedFields``, conflicts and ``force``.

What ``kubectl apply --server-side`` (``PATCH`` with ``application/apply-patch+yaml`` and
``?fieldManager=...&force=...``) gets from kube-apiserver, after ``structured-merge-diff``:

* the applied configuration's fields become its manager's (one ``Apply`` entry per manager in
  ``metadata.managedFields``, with ``fieldsV1`` in upstream's ``f:``/``k:`` notation);
* a field another manager owns whose value the apply would change is a conflict: 409 with
  kube-apiserver's message (``Apply failed with 1 conflict: conflict with "kubectl-edit" using
  v1 at ...: .data.a``) unless ``force=true``, which takes the field over;
* a field the manager applied before and no longer applies is removed, unless another manager
  owns it too;
* maps merge; lists of maps merge by their key where the built-in type says so (``containers``
  by ``name``, ...); every other list (and every list of a custom resource) is atomic;
* other writes (create, update, patch) of an object that has ``managedFields`` move the fields
  they change to their own manager (operation ``Update``), so a later apply conflicts with them.

Objects never applied keep no ``managedFields``: tracking every write of every object would tax
the write path the scheduler benchmarks lean on, and nothing else reads them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kadmit.localcluster.errors import ApiError, bad_request, status
from kadmit.localcluster.objects import Obj, copy_json
from kadmit.localcluster.patches import MERGE_KEYS, _merge_key
from kadmit.localcluster.timestamps import now

Path = tuple[str, ...]  # "f:<field>" and "k:<json key>" elements, as fieldsV1 spells them
SKIPPED_META = frozenset(
    {"name", "namespace", "resourceVersion", "uid", "creationTimestamp", "generation", "managedFields",
     "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds"}
)  # fmt: skip


def _keyed(field_name: str, items: list[Any], builtin: bool) -> str | None:
    """The merge key of a list of maps, or None for an atomic list."""
    if not builtin or field_name not in MERGE_KEYS or not items:
        return None
    key = _merge_key(field_name, items)
    if key is None or not all(isinstance(i, dict) and key in i for i in items):
        return None
    return key


def _item_element(key: str, item: Obj) -> str:
    return "k:" + json.dumps({key: item[key]}, separators=(",", ":"))


def leaves(value: Any, builtin: bool, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every owned leaf of a configuration: scalars, atomic lists, empty maps, keyed list items."""
    if isinstance(value, dict):
        if not value and path:
            yield path, {}
        for key, sub in value.items():
            yield from leaves(sub, builtin, (*path, f"f:{key}"))
    elif isinstance(value, list):
        name = path[-1][2:] if path and path[-1].startswith("f:") else ""
        key = _keyed(name, value, builtin)
        if key is None:
            yield path, value
            return
        for item in value:
            element = (*path, _item_element(key, item))
            yield element, None  # the item itself: owning it keeps it in the list
            yield from leaves(item, builtin, element)
    else:
        yield path, value


def value_at(obj: Any, path: Path) -> tuple[bool, Any]:
    """(present, value) of a path in an object."""
    current = obj
    for element in path:
        if element.startswith("f:"):
            if not isinstance(current, dict) or element[2:] not in current:
                return False, None
            current = current[element[2:]]
        else:
            wanted = json.loads(element[2:])
            if not isinstance(current, list):
                return False, None
            current = next(
                (i for i in current if isinstance(i, dict) and all(i.get(k) == v for k, v in wanted.items())),
                None,
            )
            if current is None:
                return False, None
    return True, current


def _remove(obj: Any, path: Path) -> None:
    if not path:
        return
    parent_present, parent = value_at(obj, path[:-1])
    if not parent_present:
        return
    last = path[-1]
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith("k:") and isinstance(parent, list):
        wanted = json.loads(last[2:])
        parent[:] = [
            i for i in parent if not (isinstance(i, dict) and all(i.get(k) == v for k, v in wanted.items()))
        ]


def merge(live: Any, config: Any, builtin: bool, name: str = "") -> Any:
    """The live object with the configuration applied over it."""
    if isinstance(config, dict) and isinstance(live, dict):
        out = dict(live)
        for key, value in config.items():
            out[key] = merge(live.get(key), value, builtin, key)
        return out
    if isinstance(config, list) and isinstance(live, list):
        key = _keyed(name, config + live, builtin)
        if key is not None:
            out_list = list(live)
            for item in config:
                index = next((i for i, c in enumerate(out_list) if c.get(key) == item[key]), None)
                if index is None:
                    out_list.append(copy_json(item))
                else:
                    out_list[index] = merge(out_list[index], item, builtin)
            return out_list
    return copy_json(config)


def path_string(path: Path) -> str:
    """``.spec.containers[name="x"].image``, as structured-merge-diff prints a path."""
    out = ""
    for element in path:
        if element.startswith("f:"):
            out += "." + element[2:]
        else:
            pairs = json.loads(element[2:])
            out += "[" + ",".join(f"{k}={json.dumps(v)}" for k, v in pairs.items()) + "]"
    return out


# -- managedFields -------------------------------------------------------------------------------


@dataclass
class Entry:
    manager: str
    operation: str
    api_version: str
    time: str
    subresource: str = ""
    paths: set[Path] = field(default_factory=set)

    def identity(self) -> tuple[str, str, str]:
        return self.manager, self.operation, self.subresource

    def describe(self) -> str:
        """``printManager``: how a conflict names the manager."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f' with subresource "{self.subresource}"'
        if self.operation == "Update":
            text += f" using {self.api_version}" + (f" at {self.time}" if self.time else "")
        return text

    def render(self) -> Obj:
        tree: Obj = {}
        for path in sorted(self.paths):
            node = tree
            for element in path:
                node = node.setdefault(element, {})
                if element.startswith("k:"):
                    node.setdefault(".", {})
        out: Obj = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": tree,
        }
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def _paths_of(tree: Any, path: Path = ()) -> Iterator[Path]:
    if not isinstance(tree, dict):
        return
    children = {k: v for k, v in tree.items() if k != "."}
    if (not children or "." in tree) and path:
        yield path
    for key, sub in children.items():
        yield from _paths_of(sub, (*path, key))


def parse_entries(managed: Any) -> list[Entry]:
    entries: list[Entry] = []
    for raw in managed or []:
        if not isinstance(raw, dict) or not raw.get("manager"):
            continue
        entries.append(
            Entry(
                str(raw["manager"]),
                str(raw.get("operation") or "Update"),
                str(raw.get("apiVersion") or ""),
                str(raw.get("time") or ""),
                str(raw.get("subresource") or ""),
                set(_paths_of(raw.get("fieldsV1") or {})),
            )
        )
    return entries


def _owned_config(config: Obj, subresource: str) -> Obj:
    """The part of an applied configuration that is owned: no identity fields, and only the
    status for a status apply (the rest of the object for any other)."""
    if subresource == "status":
        return {"status": copy_json(config.get("status") or {})}
    out = {k: copy_json(v) for k, v in config.items() if k not in ("apiVersion", "kind", "status")}
    meta = {k: v for k, v in (out.get("metadata") or {}).items() if k not in SKIPPED_META}
    if meta:
        out["metadata"] = meta
    else:
        out.pop("metadata", None)
    return out


def _conflict_error(conflicts: list[tuple[Entry, Path]]) -> ApiError:
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {e.describe()}",
            "field": path_string(p),
        }
        for e, p in conflicts
    ]
    if len(conflicts) == 1:
        entry, path = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {entry.describe()}: {path_string(path)}"
    else:
        by_manager: dict[str, list[Path]] = {}
        labels: dict[str, str] = {}
        for entry, path in conflicts:
            by_manager.setdefault(entry.manager, []).append(path)
            labels[entry.manager] = entry.describe()
        lines = []
        for manager in sorted(by_manager):
            lines.append(f"conflicts with {labels[manager]}:")
            lines += [f"- {path_string(p)}" for p in by_manager[manager]]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)
    return ApiError(status(409, "Conflict", message, {"causes": causes}))


def apply(
    live: Obj | None,
    config: Any,
    manager: str,
    force: bool,
    api_version: str,
    builtin: bool,
    subresource: str = "",
) -> Obj:
    """The object after applying ``config`` as ``manager`` (``live`` None: it is created), with its
    new ``managedFields``; a conflict raises the 409."""
    if not isinstance(config, dict):
        raise bad_request("an apply configuration must be an object")
    if not manager:
        raise bad_request("PATCH, application/apply-patch+yaml requests require a fieldManager")
    owned = _owned_config(config, subresource)
    wanted = dict(leaves(owned, builtin))
    base: Obj = (
        copy_json(live) if live is not None else {k: copy_json(v) for k, v in config.items() if k != "status"}
    )
    entries = parse_entries((base.get("metadata") or {}).get("managedFields"))
    mine = next(
        (e for e in entries if e.identity() == (manager, "Apply", subresource)),
        None,
    )
    conflicts: list[tuple[Entry, Path]] = []
    for entry in entries:
        if entry is mine or entry.subresource != subresource:
            continue
        for path in sorted(entry.paths & wanted.keys()):
            present, current = value_at(base, path)
            if wanted[path] is None or (present and current == wanted[path]):
                continue  # the same value: shared ownership
            conflicts.append((entry, path))
    if conflicts and not force:
        raise _conflict_error(conflicts)
    for entry, path in conflicts:
        entry.paths.discard(path)
    if mine is not None:
        others = set().union(*(e.paths for e in entries if e is not mine))
        for path in sorted(mine.paths - wanted.keys() - others, key=len, reverse=True):
            _remove(base, path)
    merged: Obj = merge(base, owned, builtin)
    stamp = now()
    if mine is None:
        mine = Entry(manager, "Apply", api_version, stamp, subresource)
        entries.append(mine)
    mine.paths = set(wanted)
    mine.api_version, mine.time = api_version, stamp
    merged.setdefault("metadata", {})["managedFields"] = [e.render() for e in entries if e.paths]
    return merged


def track_update(
    old: Obj, new: Obj, manager: str, api_version: str, builtin: bool, subresource: str = ""
) -> None:
    """Give ``manager`` (operation Update) the fields a non-apply write changed, in ``new``'s
    ``managedFields``, when the object has managed fields at all."""
    entries = parse_entries((old.get("metadata") or {}).get("managedFields"))
    if not entries:
        (new.get("metadata") or {}).pop("managedFields", None)
        return
    before = dict(leaves(_owned_config(old, subresource), builtin))
    after = dict(leaves(_owned_config(new, subresource), builtin))
    changed = {p for p, v in after.items() if p not in before or before[p] != v}
    gone = before.keys() - after.keys()
    mine = next((e for e in entries if e.identity() == (manager, "Update", subresource)), None)
    for entry in entries:
        if entry is not mine and entry.subresource == subresource:
            entry.paths -= changed | gone
    if changed:
        if mine is None:
            mine = Entry(manager, "Update", api_version, now(), subresource)
            entries.append(mine)
        mine.paths |= changed
        mine.time, mine.api_version = now(), api_version
    if mine is not None:
        mine.paths -= gone
    new.setdefault("metadata", {})["managedFields"] = [e.render() for e in entries if e.paths]
