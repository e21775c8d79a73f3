"""The ``OwnerReferencesPermissionEnforcement`` admission plugin (``plugin/pkg/admission/gc``).

With RBAC, a real API server lets a user set an owner reference only on an object it may delete,
and ``blockOwnerDeletion: true`` only towards an owner whose ``<resource>/finalizers`` it may
update — why controllers' roles carry ``jobs/finalizers`` and the like. Refusals read as upstream's
(the trailing ``, <nil>`` included).
"""

from __future__ import annotations

from typing import Any

from kadmit.localcluster.admission import forbidden
from kadmit.localcluster.auth import User
from kadmit.localcluster.interfaces import AdmissionRequest, AdmissionResult
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.rbac import MASTERS, Attributes, AuditLog, Authorizer
from kadmit.localcluster.resources import Registry


def _refs(obj: Obj | None) -> list[Obj]:
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return [r for r in refs if isinstance(r, dict)]


def _blocking(obj: Obj | None) -> list[Obj]:
    return [r for r in _refs(obj) if r.get("blockOwnerDeletion") is True]


class OwnerReferencesPermissionEnforcement:
    def __init__(self, authorizer: Authorizer, registry: Registry, audit: AuditLog | None = None) -> None:
        self.authorizer = authorizer
        self.registry = registry
        self.audit = audit  # its checks are recorded beside the requests' own

    def _allowed(self, user: User, attrs: Attributes) -> tuple[bool, str]:
        allowed, reason = self.authorizer.authorize(user, attrs)
        if self.audit is not None:
            self.audit.record(user, attrs, allowed)
        return allowed, reason

    async def mutate(self, request: AdmissionRequest) -> AdmissionResult:
        return AdmissionResult(request.object)

    async def validate(self, request: AdmissionRequest) -> list[str]:
        if request.operation not in ("CREATE", "UPDATE") or request.object is None:
            return []
        info: Any = request.user or {}
        user = User(str(info.get("username", "")), str(info.get("uid", "")), tuple(info.get("groups") or []))
        if MASTERS in user.groups:
            return []
        namespace = request.namespace or ""
        if _refs(request.object) != _refs(request.old_object) and _refs(request.object):
            delete = Attributes(
                "delete",
                True,
                "",
                request.group,
                request.version,
                request.resource,
                "",
                namespace,
                request.name,
            )
            allowed, reason = self._allowed(user, delete)
            if not allowed:
                raise forbidden(
                    request, f"cannot set an ownerRef on a resource you can't delete: {reason}, <nil>"
                )
        before = {(r.get("uid"), r.get("name")) for r in _blocking(request.old_object)}
        for ref in _blocking(request.object):
            if (ref.get("uid"), ref.get("name")) in before:
                continue
            owner = self.registry.by_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
            if owner is None:
                raise forbidden(
                    request,
                    "cannot set blockOwnerDeletion in this case because cannot find RESTMapping for "
                    f"APIVersion {ref.get('apiVersion')} Kind {ref.get('kind')}: no matches, <nil>",
                )
            finalizers = Attributes(
                "update",
                True,
                "",
                owner.group,
                owner.version,
                owner.plural,
                "finalizers",
                namespace if owner.namespaced else "",
                str(ref.get("name", "")),
            )
            allowed, reason = self._allowed(user, finalizers)
            if not allowed:
                raise forbidden(
                    request,
                    "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set "
                    f"finalizers on: {reason}, <nil>",
                )
        return []
