"""Create-or-update of YAML documents, as ``kubectl apply`` does for a fresh object.

``kadmit local`` installs the CRDs, the webhook configurations and the samples with it. The
plural of each kind comes from the server's discovery, as kubectl finds it, so any kind the
server serves (a CRD installed a moment before included) can be applied.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

from kadmit.kube import ApiError, Client, Obj, Resource


class ApplyError(ValueError):
    """A document that cannot be applied; the message names it."""


# libyaml's parser when PyYAML was built with it: CRDs are large, and the pure-Python one is slow.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_documents(path: str | Path | Traversable) -> list[Obj]:
    """The YAML documents of a file, or of package data (:mod:`importlib.resources`)."""
    try:
        text = Path(path).read_text() if isinstance(path, str) else path.read_text()
        docs = [d for d in yaml.load_all(text, Loader=_Loader) if d]
    except (OSError, yaml.YAMLError) as exc:
        raise ApplyError(f"{path}: {exc}") from exc
    for doc in docs:
        if not isinstance(doc, dict) or not doc.get("apiVersion") or not doc.get("kind"):
            raise ApplyError(f"{path}: every document needs apiVersion and kind")
    return docs


class Applier:
    def __init__(self, kube: Client) -> None:
        self.kube = kube
        self._discovered: dict[str, dict[str, tuple[str, bool]]] = {}

    async def resource_for(self, api_version: str, kind: str, *, wait: float = 10.0) -> tuple[Resource, bool]:
        """(resource, namespaced) for a kind; waits a little for a just-created CRD to be served."""
        group, _, version = api_version.rpartition("/")
        deadline = asyncio.get_running_loop().time() + wait
        while True:
            kinds = self._discovered.get(api_version)
            if kinds is None or kind not in kinds:
                path = f"/apis/{api_version}" if group else f"/api/{version}"
                try:
                    listing = await self.kube.request("GET", path)
                except ApiError as exc:
                    if not exc.not_found:
                        raise
                    listing = {}
                kinds = {r["kind"]: (r["name"], bool(r.get("namespaced")))
                         for r in listing.get("resources") or [] if "/" not in r["name"]}
                self._discovered[api_version] = kinds
            if kind in kinds:
                plural, namespaced = kinds[kind]
                return Resource(group, version, plural), namespaced
            if asyncio.get_running_loop().time() > deadline:
                raise ApplyError(f"the server does not serve {kind} in {api_version}")
            await asyncio.sleep(0.1)

    async def apply(self, doc: Obj, *, default_namespace: str = "default") -> Obj:
        resource, namespaced = await self.resource_for(doc["apiVersion"], doc["kind"])
        obj = dict(doc)
        meta = dict(obj.get("metadata") or {})
        obj["metadata"] = meta
        if namespaced:
            meta.setdefault("namespace", default_namespace)
        else:
            meta.pop("namespace", None)
        try:
            return await self.kube.create(resource, obj)
        except ApiError as exc:
            if exc.status != 409 or "generateName" in meta:
                raise ApplyError(f"{doc['kind']} {meta.get('name', '')}: {exc.message or exc}") from exc
        current = await self.kube.get(resource, meta.get("namespace") if namespaced else None, meta["name"])
        obj["metadata"] = {**current["metadata"], **meta}
        if "status" in current and "status" not in obj:
            obj["status"] = current["status"]
        try:
            return await self.kube.replace(resource, obj)
        except ApiError as exc:
            raise ApplyError(f"{doc['kind']} {meta.get('name', '')}: {exc.message or exc}") from exc

    async def apply_all(self, docs: Iterable[Obj], *, default_namespace: str = "default") -> list[Obj]:
        return [await self.apply(doc, default_namespace=default_namespace) for doc in docs]
