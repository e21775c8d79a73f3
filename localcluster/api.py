"""The API operations, independent of HTTP: what a real apiserver's generic registry does.

Each write runs the real pipeline: decode and default → mutating admission → validation
(built-in rules or the CRD schema) → validating admission → persist (unless ``dryRun``).
Objects are kept at their storage version; requests at another served version of a CRD are
converted on the way in and out.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from kadmit.localcluster import builtin, ssa, timestamps
from kadmit.localcluster.builtin_schemas import check_fields
from kadmit.localcluster.conditions import set_condition
from kadmit.localcluster.crdrules import rule_causes
from kadmit.localcluster.crdschema import SchemaValidator, apply_defaults, prune
from kadmit.localcluster.errors import (
    STALE,
    ApiError,
    already_exists,
    bad_request,
    cause,
    conflict,
    forbidden,
    invalid,
    invalid_value,
    not_found,
    required,
    status,
)
from kadmit.localcluster.interfaces import AdmissionError, AdmissionPlugin, AdmissionRequest, Operation
from kadmit.localcluster.objects import Obj, copy_json
from kadmit.localcluster.patches import apply_patch
from kadmit.localcluster.resources import Registry, ResourceType
from kadmit.localcluster.store import Store

FieldValidation = Literal["Strict", "Warn", "Ignore"]
Converter = Callable[[Obj, list[Obj], str], Awaitable[list[Obj]]]

_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
GC_FINALIZERS = ("orphan", "foregroundDeletion")
CRD_CLEANUP = "customresourcecleanup.apiextensions.k8s.io"
MAX_RETRIES = 10


@dataclass
class WriteOptions:
    """What a client sent beside the object: query parameters and the *Options body."""

    dry_run: bool = False
    field_validation: FieldValidation = "Warn"
    options: Obj | None = None
    user: Obj | None = None
    field_manager: str = ""  # ?fieldManager=, else the User-Agent's product (managedFields)
    force: bool = False  # ?force=true: server-side apply takes conflicting fields over


@dataclass
class Outcome:
    """The result of a write: the object as returned to the client, and warnings for headers."""

    object: Obj
    warnings: list[str] = field(default_factory=list)
    created: bool = False



def _unknown_fields(unknown: list[str], field_validation: FieldValidation) -> list[str]:
    """What ``fieldValidation`` makes of the unknown fields of a write: a 400 (``Strict``), one
    warning each (``Warn``), nothing (``Ignore``)."""
    if unknown and field_validation == "Strict":
        detail = ", ".join(f'unknown field "{u}"' for u in unknown)
        raise bad_request(f"strict decoding error: {detail}")
    if field_validation == "Warn":
        return [f'unknown field "{u}"' for u in unknown]
    return []


class Api:
    """Reads and writes with the semantics of a Kubernetes API server."""

    def __init__(
        self,
        store: Store,
        registry: Registry,
        admission: Sequence[AdmissionPlugin] = (),
        converter: Converter | None = None,
        validation_rules: bool = False,
    ) -> None:
        self.store = store
        self.validation_rules = validation_rules  # evaluate CRDs' x-kubernetes-validations (CEL)
        self.registry = registry
        self.admission: list[AdmissionPlugin] = list(admission)
        self.converter = converter
        self._validators: dict[tuple[str, str, str], SchemaValidator] = {}
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            ns: Obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
            builtin.default_object("", "namespaces", ns)
            store.create("", "namespaces", ns)
            self._create_default_service_account(name)  # as in every namespace of a cluster

    # -- reads ------------------------------------------------------------------------------

    def get_stored(self, rt: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.store.get(rt.group, rt.plural, namespace if rt.namespaced else None, name)
        if obj is None:
            raise not_found(rt.qualified(), name, rt.group, rt.plural)
        return obj

    async def to_version(self, rt: ResourceType, objects: list[Obj]) -> list[Obj]:
        """Stored objects as the request's version shows them."""
        if rt.crd is None or rt.version == rt.storage or not objects:
            return objects
        return await self._convert(rt, objects, rt.api_version)

    async def _convert(self, rt: ResourceType, objects: list[Obj], api_version: str) -> list[Obj]:
        assert rt.crd is not None
        strategy = (rt.crd["spec"].get("conversion") or {}).get("strategy", "None")
        if strategy == "Webhook":
            if self.converter is None:
                message = f"conversion webhook for {rt.kind} is not available on this server"
                raise ApiError(status(500, "InternalError", message))
            try:
                return await self.converter(rt.crd, objects, api_version)
            except ApiError:
                raise
            except Exception as exc:
                message = f"conversion webhook for {rt.group}/{rt.storage}, Kind={rt.kind} failed: {exc}"
                raise ApiError(status(500, "InternalError", message)) from None
        return [dict(o, apiVersion=api_version) for o in objects]

    async def to_storage(self, rt: ResourceType, obj: Obj) -> Obj:
        if rt.crd is None or rt.version == rt.storage:
            return obj
        storage_api = f"{rt.group}/{rt.storage}"
        return (await self._convert(rt, [obj], storage_api))[0]

    # -- create -----------------------------------------------------------------------------

    async def create(
        self,
        rt: ResourceType,
        namespace: str | None,
        body: Any,
        opts: WriteOptions,
        managed: list[Obj] | None = None,
    ) -> Outcome:
        """Create from a freshly decoded body, which this call takes over (it is modified and stored);
        ``managed`` is the ``managedFields`` a server-side apply computed."""
        obj = self._decode(rt, namespace, body)
        meta = obj["metadata"]
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise invalid(
                    rt.kind, "", [required("metadata.name", "name or generateName is required")], rt.group
                )
            meta["name"] = prefix + "".join(random.choices(_NAME_CHARS, k=5))
        name = meta["name"]
        if rt.namespaced:
            self._check_namespace(meta.get("namespace"), rt, name)
        for key in (
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
            "managedFields",
            "generation",
        ):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = timestamps.now()
        if managed:
            meta["managedFields"] = managed
        if _has_generation(rt):
            meta["generation"] = 1
        if rt.status:
            obj.pop("status", None)
            if rt.crd is None:
                obj["status"] = {}  # built-in kinds start with an empty status, CRs with none
        obj = await self.to_storage(rt, obj)
        srt = self._storage_type(rt)
        warnings = self._normalize(srt, obj, opts.field_validation)
        if srt.key == ("", "pods"):
            self._resolve_priority(obj)
        obj, more = await self._admit("CREATE", srt, obj, None, opts, "")
        warnings += more
        if srt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self._accept_crd(obj)
            finalizers = obj["metadata"].setdefault("finalizers", [])
            if CRD_CLEANUP not in finalizers:
                finalizers.append(CRD_CLEANUP)
        if (
            self.store.get(
                srt.group,
                srt.plural,
                meta.get("namespace") if srt.namespaced else None,
                obj["metadata"]["name"],
            )
            is not None
        ):
            raise already_exists(rt.qualified(), obj["metadata"]["name"], rt.group, rt.plural)
        if not opts.dry_run:
            obj = self.store.create(srt.group, srt.plural, obj)
            if srt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
                self.registry.set_crd(obj)
            elif srt.key == ("", "namespaces"):
                self._create_default_service_account(obj["metadata"]["name"])
        return Outcome((await self.to_version(rt, [obj]))[0], warnings, created=True)

    def _resolve_priority(self, pod: Obj) -> None:
        """The Priority admission plugin: ``priorityClassName`` becomes ``priority`` (and its policy)."""
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            return
        pod_name = pod["metadata"]["name"]
        name = spec.get("priorityClassName")
        if name:
            found = self.store.get("scheduling.k8s.io", "priorityclasses", None, name)
            if found is None:
                why = f"no PriorityClass with name {name} was found"
                raise forbidden(f'pods "{pod_name}" is forbidden: {why}', pod_name, "", "pods")
        else:
            classes = self.store.list("scheduling.k8s.io", "priorityclasses")
            found = next((pc for pc in classes if pc.get("globalDefault")), None)
            if found is not None:
                spec["priorityClassName"] = found["metadata"]["name"]
        value = int(found.get("value", 0)) if found is not None else 0
        if spec.get("priority") is not None and spec["priority"] != value:
            why = (
                f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; "
                f"priority admission controller computed {value} from the given PriorityClass name"
            )
            raise forbidden(f'pods "{pod_name}" is forbidden: {why}', pod_name, "", "pods")
        spec["priority"] = value
        spec.setdefault("preemptionPolicy", (found or {}).get("preemptionPolicy", "PreemptLowerPriority"))

    def _create_default_service_account(self, namespace: str) -> None:
        """What the service-account controller does for each new namespace."""
        if self.store.get("", "serviceaccounts", namespace, "default") is None:
            sa: Obj = {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "default", "namespace": namespace},
            }
            self.store.create("", "serviceaccounts", sa)

    def _decode(self, rt: ResourceType, namespace: str | None, body: Any) -> Obj:
        """Check a request body against the URL; the body becomes the request's own object."""
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        obj: Obj = body
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version and api_version != rt.api_version:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rt.api_version})"
            )
        if kind and kind != rt.kind:
            raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})")
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        for key in ("labels", "annotations"):
            if meta.get(key) is None:
                meta.pop(key, None)
        return obj

    def _check_namespace(self, namespace: str | None, rt: ResourceType, name: str) -> None:
        ns = self.store.get("", "namespaces", None, namespace or "")
        if ns is None:
            raise not_found("namespaces", namespace or "", "", "namespaces")
        if ns["metadata"].get("deletionTimestamp"):
            raise forbidden(
                f'{rt.qualified()} "{name}" is forbidden: unable to create new content in namespace '
                f"{namespace} because it is being terminated",
                name,
                rt.group,
                rt.plural,
            )

    def _storage_type(self, rt: ResourceType) -> ResourceType:
        if rt.version == rt.storage:
            return rt
        srt = self.registry.lookup(rt.group, rt.storage, rt.plural)
        return srt or rt

    def _normalize(
        self, rt: ResourceType, obj: Obj, field_validation: FieldValidation, status_only: bool = False,
        stored: Obj | None = None,
    ) -> list[str]:
        """Prune and default a CRD's object, default a built-in one; report unknown fields.

        ``status_only``: a write of the status subresource, whose metadata and spec are the stored
        object's (normalized when they were written): a custom resource's status alone is pruned
        and defaulted (only its fields that differ from the ``stored`` object's), a built-in one's
        status alone is checked for unknown and mistyped fields.
        """
        warnings: list[str] = []
        schema = rt.schema()
        if status_only and schema is not None and not rt.model:
            status = obj.get("status")
            before = (stored or {}).get("status")
            if isinstance(status, dict) and isinstance(before, dict):
                # A field equal to its stored value was pruned and defaulted when it was stored.
                kept = {key for key, value in status.items() if key in before and before[key] == value}
                if kept:
                    changed = {key: value for key, value in status.items() if key not in kept}
                    warnings += self._normalize_status(schema, changed, field_validation)
                    obj["status"] = {
                        **{key: value for key, value in status.items() if key in kept or key in changed},
                        **{key: value for key, value in changed.items() if key not in kept},
                    }
                    return warnings
            part = {"status": obj["status"]} if "status" in obj else {}
            if "status" in part:
                return warnings + self._normalize_status(schema, part["status"], field_validation)
            properties = schema.get("properties") or {}
            if "default" in (properties.get("status") or {}):
                apply_defaults(part, {"properties": {"status": properties["status"]}})
                obj["status"] = part["status"]
            return warnings
        if rt.model:
            # A status write's metadata and spec are the stored object's, checked when they were
            # written: only its status is new.
            if not status_only:
                unknown, wrong = check_fields(rt.model, obj)
            elif "status" in obj:
                unknown, wrong = check_fields(rt.model, {"status": obj["status"]})
            else:
                unknown, wrong = [], []
        else:  # a custom resource: its schema checks the rest, ObjectMeta is the server's own
            unknown, wrong = check_fields("V1ObjectMeta", obj.get("metadata"), "metadata")
            for path in unknown:
                if path.count(".") == 1 and "[" not in path:
                    obj["metadata"].pop(path.split(".", 1)[1], None)
        if wrong:
            # What the real server's decoding says before anything else looks at the object.
            undecodable = f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}'
            raise bad_request(f"{undecodable}: {wrong[0]}")
        if schema is not None:
            unknown += prune(obj, schema)
            warnings += _unknown_fields(unknown, field_validation)
            apply_defaults(obj, schema)
        elif rt.crd is None:
            warnings += _unknown_fields(unknown, field_validation)
            builtin.default_object(rt.group, rt.plural, obj)
        return warnings

    @staticmethod
    def _normalize_status(schema: Obj, status: Obj, field_validation: FieldValidation) -> list[str]:
        """Prune and default a status (in place, as ``{"status": status}`` would be)."""
        unknown = prune({"status": status}, schema)
        apply_defaults(status, (schema.get("properties") or {}).get("status") or {})
        return _unknown_fields(unknown, field_validation)

    def _validate(self, rt: ResourceType, obj: Obj, old: Obj | None, subresource: str = "") -> None:
        causes: list[Obj]
        schema = rt.schema()
        if schema is not None:
            causes = builtin.validate_metadata(rt.group, rt.plural, obj)
            key = (
                rt.crd["metadata"]["uid"] if rt.crd else "",
                rt.version,
                rt.crd["metadata"].get("resourceVersion", "") if rt.crd else "",
            )
            validator = self._validators.get(key)
            if validator is None:
                validator = self._validators[key] = SchemaValidator(schema)
            if subresource == "status" and old is not None and _same_but_status(obj, old):
                causes += validator.status_causes(obj, old)
            else:
                causes += validator.causes(obj)
            if self.validation_rules and not causes:
                causes = rule_causes(schema, obj, old)
        else:
            causes = builtin.validate_object(rt.group, rt.plural, obj, old)
            if rt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
                causes += _validate_crd(obj)
        meta = obj["metadata"]
        if old is not None and old["metadata"].get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(old["metadata"].get("finalizers") or [])
            if added:
                causes.append(
                    cause(
                        "FieldValueForbidden",
                        "metadata.finalizers",
                        "Forbidden: no new finalizers can be added if the object is being deleted, "
                        f"found new finalizers {sorted(added)}",
                    )
                )
        if causes:
            raise invalid(rt.kind, meta.get("name", ""), causes, rt.group)

    async def _admit(
        self,
        operation: Operation,
        rt: ResourceType,
        obj: Obj | None,
        old: Obj | None,
        opts: WriteOptions,
        subresource: str,
    ) -> tuple[Obj, list[str]]:
        """Mutating plugins → validation → validating plugins; returns the final object and warnings."""
        warnings: list[str] = []
        meta = (obj or old or {}).get("metadata", {})
        request = AdmissionRequest(
            operation=operation,
            group=rt.group,
            version=rt.version,
            kind=rt.kind,
            resource=rt.plural,
            subresource=subresource,
            namespace=meta.get("namespace") if rt.namespaced else None,
            name=meta.get("name", ""),
            object=obj,
            old_object=old,
            dry_run=opts.dry_run,
            options=opts.options,
            **({"user": opts.user} if opts.user else {}),
        )
        try:
            for plugin in self.admission:
                result = await plugin.mutate(request)
                warnings += result.warnings
                if (
                    operation != "DELETE"
                    and result.object is not None
                    and result.object is not request.object
                ):
                    request = replace(request, object=result.object)
            if operation != "DELETE":
                assert request.object is not None
                if operation == "CREATE" and rt.key == ("", "pods") and not subresource:
                    builtin.prepare_pod_for_create(request.object)
                if rt.crd is not None and request.object is not obj:
                    self._normalize(rt, request.object, "Ignore")  # prune and default what webhooks added
                obj = request.object
                self._validate(rt, obj, old, subresource)
            for plugin in self.admission:
                warnings += await plugin.validate(request)
        except AdmissionError as exc:
            raise ApiError(exc.status) from None
        final = request.object if operation != "DELETE" else old
        assert final is not None
        return final, warnings

    # -- update and patch -------------------------------------------------------------------

    async def update(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        subresource: str,
        opts: WriteOptions,
    ) -> Outcome:
        """Replace from a freshly decoded body, which this call takes over."""
        old = self.get_stored(rt, namespace, name)
        obj = self._decode(rt, namespace, body)
        meta = obj["metadata"]
        _check_name(meta.get("name") or name, name)
        meta["name"] = name
        rv = meta.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(rt.qualified(), name, STALE, rt.group, rt.plural)
        if not rv and rt.crd is not None:
            raise invalid(
                rt.kind,
                name,
                [invalid_value("metadata.resourceVersion", "0x0", "must be specified for an update")],
                rt.group,
            )
        if rv:
            return await self._write(rt, old, await self.to_storage(rt, obj), subresource, opts)

        # An unconditional update wins over concurrent writes, as the real server's update loop does.
        async def overwrite(current: Obj) -> Outcome:
            own = await self.to_storage(rt, copy_json(obj))
            return await self._write(rt, current, own, subresource, opts, retry=True)

        return await self._until_settled(rt, namespace, name, overwrite)

    async def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        content_type: str,
        body: bytes,
        subresource: str,
        opts: WriteOptions,
    ) -> Outcome:
        """Apply a patch; without a resourceVersion in it, reapplied if the object changes meanwhile."""

        async def apply(old: Obj) -> Outcome:
            return await self._patched(rt, old, content_type, body, subresource, opts)

        return await self._until_settled(rt, namespace, name, apply)

    async def apply(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: bytes,
        subresource: str,
        opts: WriteOptions,
    ) -> Outcome:
        """Server-side apply (:mod:`kadmit.localcluster.ssa`): create the object when it does not
        exist, else merge the configuration into it as ``opts.field_manager``."""
        import yaml

        try:
            config = yaml.safe_load(body or b"null")
        except yaml.YAMLError as exc:
            raise bad_request(f"error decoding YAML: {exc}") from None
        if not isinstance(config, dict):
            raise bad_request("an apply configuration must be an object")
        if config.get("apiVersion") != rt.api_version or config.get("kind") != rt.kind:
            raise bad_request(
                f"the API version and kind in the data ({config.get('apiVersion')}, "
                f"Kind={config.get('kind')}) do not match the request ({rt.api_version}, Kind={rt.kind})"
            )
        meta = config.get("metadata")
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        _check_name(str(meta.get("name") or name), name)
        builtin = rt.crd is None
        if self.store.get(*self._storage_type(rt).key, namespace if rt.namespaced else None, name) is None:
            if subresource:
                raise not_found(rt.qualified(), name, rt.group, rt.plural)
            created = ssa.apply(None, config, opts.field_manager, opts.force, rt.api_version, builtin)
            managed = created["metadata"].pop("managedFields", None)
            return await self.create(rt, namespace, created, opts, managed)

        async def write(old: Obj) -> Outcome:
            current = (await self.to_version(rt, [old]))[0]
            merged = ssa.apply(
                current, config, opts.field_manager, opts.force, rt.api_version, builtin, subresource
            )
            managed = merged["metadata"].get("managedFields")
            obj = self._decode(rt, namespace, merged)
            return await self._write(
                rt, old, await self.to_storage(rt, obj), subresource, opts, retry=True, managed=managed
            )

        return await self._until_settled(rt, namespace, name, write)

    async def _until_settled(
        self, rt: ResourceType, namespace: str | None, name: str, write: Callable[[Obj], Awaitable[Outcome]]
    ) -> Outcome:
        """``write`` over the stored object, and again over the new one each time the object
        changed while the write was being admitted (:class:`_Changed`), a bounded number of times."""
        for _ in range(MAX_RETRIES):
            try:
                return await write(self.get_stored(rt, namespace, name))
            except _Changed:
                continue
        raise conflict(rt.qualified(), name, STALE, rt.group, rt.plural)

    async def _patched(
        self, rt: ResourceType, old: Obj, content_type: str, body: bytes, subresource: str, opts: WriteOptions
    ) -> Outcome:
        """Write ``old`` with the patch ``body`` applied (in the version the request names)."""
        namespace, name = old["metadata"].get("namespace"), old["metadata"]["name"]
        current = (await self.to_version(rt, [old]))[0]
        patched = apply_patch(content_type, current, body, strategic=rt.crd is None)
        meta = patched.get("metadata")
        if not isinstance(meta, dict):
            raise bad_request("the patch removes metadata")
        rv = meta.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(rt.qualified(), name, STALE, rt.group, rt.plural)
        _check_name(meta.get("name", name), name)
        # The patched object shares parts with the stored one: copy what the write keeps.
        if subresource == "status" and rt.version == rt.storage:
            own = {k: v for k, v in patched.items() if k != "status"}
            own["metadata"] = copy_json(patched["metadata"])
            if "status" in patched:
                own["status"] = copy_json(patched["status"])
        else:
            own = copy_json(patched)
        obj = self._decode(rt, namespace, own)
        conditional = b'"resourceVersion"' in body  # a patch that names a version is a precondition
        return await self._write(
            rt, old, await self.to_storage(rt, obj), subresource, opts, retry=not conditional
        )

    async def _write(
        self,
        rt: ResourceType,
        old: Obj,
        obj: Obj,
        subresource: str,
        opts: WriteOptions,
        retry: bool = False,
        managed: list[Obj] | None = None,
    ) -> Outcome:
        """Persist ``obj`` over ``old``. With ``retry``, a concurrent change raises :class:`_Changed`.
        ``managed``: the ``managedFields`` a server-side apply computed; other writes of an object
        that has them move the fields they change to their field manager."""
        srt = self._storage_type(rt)
        if subresource == "status":
            new = dict(old)
            new["metadata"] = copy_json(old["metadata"])
            if "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
            obj = new
            if managed is not None:
                obj["metadata"]["managedFields"] = managed
            elif old["metadata"].get("managedFields"):
                ssa.track_update(
                    old, obj, opts.field_manager, str(obj.get("apiVersion", "")), srt.crd is None, "status"
                )
        elif subresource:
            raise not_found(f"{rt.qualified()}/{subresource}", old["metadata"]["name"], rt.group)
        else:
            if srt.status:
                if "status" in old:
                    obj["status"] = copy_json(old["status"])
                else:
                    obj.pop("status", None)
            meta = obj["metadata"]
            for key in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "namespace",
                "generateName",
            ):
                if key in old["metadata"]:
                    meta[key] = old["metadata"][key]
                else:
                    meta.pop(key, None)
            if managed is not None:
                meta["managedFields"] = managed
            elif old["metadata"].get("managedFields"):
                ssa.track_update(
                    old, obj, opts.field_manager, str(obj.get("apiVersion", "")), srt.crd is None
                )
            else:
                meta.pop("managedFields", None)
        warnings = self._normalize(srt, obj, opts.field_validation, status_only=subresource == "status",
                                   stored=old)
        obj, more = await self._admit("UPDATE", srt, obj, old, opts, subresource)
        warnings += more
        current = self.store.get(
            srt.group, srt.plural, old["metadata"].get("namespace"), old["metadata"]["name"]
        )
        if current is None:
            raise not_found(rt.qualified(), old["metadata"]["name"], rt.group, rt.plural)
        if current is not old:
            if retry:
                raise _Changed
            raise conflict(rt.qualified(), old["metadata"]["name"], STALE, rt.group, rt.plural)
        if _has_generation(srt):
            obj["metadata"]["generation"] = old["metadata"].get("generation", 1) + (
                1 if _spec_of(obj, srt.status) != _spec_of(old, srt.status) else 0
            )
        else:
            obj["metadata"].pop("generation", None)
        obj["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if srt.key == ("apiextensions.k8s.io", "customresourcedefinitions") and not subresource:
            self._accept_crd(obj)
        if obj == old:
            return Outcome((await self.to_version(rt, [old]))[0], warnings)
        if opts.dry_run:
            return Outcome((await self.to_version(rt, [obj]))[0], warnings)
        meta = obj["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not _namespace_pending(srt, obj):
            self.store.replace(srt.group, srt.plural, obj)
            final = self.store.remove(srt.group, srt.plural, meta.get("namespace"), meta["name"])
            return Outcome((await self.to_version(rt, [final]))[0], warnings)
        stored = self.store.replace(srt.group, srt.plural, obj)
        if srt.key == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self.registry.set_crd(stored)
        return Outcome((await self.to_version(rt, [stored]))[0], warnings)

    def _accept_crd(self, crd: Obj) -> None:
        """What the apiextensions controllers report once a CRD's names are served."""
        problem = self.registry.conflicts(crd)
        if problem:
            raise invalid(
                "CustomResourceDefinition",
                crd["metadata"]["name"],
                [invalid_value("spec.names.plural", crd["spec"]["names"]["plural"], problem)],
                "apiextensions.k8s.io",
            )
        spec = crd["spec"]
        names = dict(spec["names"])
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
        storage = [v["name"] for v in spec["versions"] if v.get("storage")]
        stored = list((crd.get("status") or {}).get("storedVersions") or [])
        for version in storage:
            if version not in stored:
                stored.append(version)
        accepted: Obj = {"acceptedNames": names, "storedVersions": stored}
        accepted["conditions"] = (crd.get("status") or {}).get("conditions") or []
        now = timestamps.now()
        set_condition(accepted, "NamesAccepted", "True", "NoConflicts", "no conflicts found", now)
        initial = "the initial names have been accepted"
        set_condition(accepted, "Established", "True", "InitialNamesAccepted", initial, now)
        crd["status"] = accepted

    # -- delete -----------------------------------------------------------------------------

    async def delete(self, rt: ResourceType, namespace: str | None, name: str, opts: WriteOptions) -> Outcome:
        old = self.get_stored(rt, namespace, name)
        srt = self._storage_type(rt)
        options = opts.options or {}
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != old["metadata"].get("uid"):
            raise conflict(
                rt.qualified(),
                name,
                f"Precondition failed: UID in precondition: {pre['uid']}, "
                f"UID in object meta: {old['metadata'].get('uid')}",
                rt.group,
                rt.plural,
            )
        if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
            raise conflict(
                rt.qualified(),
                name,
                "Precondition failed: ResourceVersion in precondition: "
                f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                f"{old['metadata']['resourceVersion']}",
                rt.group,
                rt.plural,
            )
        policy = self._propagation(srt, options)
        _, warnings = await self._admit("DELETE", srt, None, old, opts, "")
        if opts.dry_run:
            return Outcome((await self.to_version(rt, [old]))[0], warnings)
        meta = old["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        if policy == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
        elif policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        pending_namespace = srt.key == ("", "namespaces")
        if not finalizers and not pending_namespace:
            final = self.store.remove(srt.group, srt.plural, meta.get("namespace"), meta["name"])
            return Outcome((await self.to_version(rt, [final]))[0], warnings)
        if meta.get("deletionTimestamp") and finalizers == list(meta.get("finalizers") or []):
            return Outcome((await self.to_version(rt, [old]))[0], warnings)
        new = dict(old)
        new["metadata"] = dict(meta, finalizers=finalizers, deletionGracePeriodSeconds=0)
        new["metadata"].setdefault("deletionTimestamp", timestamps.now())
        if not finalizers:
            new["metadata"].pop("finalizers")
        if pending_namespace:
            new["status"] = dict(old.get("status") or {}, phase="Terminating")
        stored = self.store.replace(srt.group, srt.plural, new)
        return Outcome((await self.to_version(rt, [stored]))[0], warnings)

    async def bind(self, namespace: str | None, name: str, body: Any, opts: WriteOptions) -> None:
        """``pods/binding``: what the scheduler posts to place a pod on a node."""
        rt = self.registry.lookup("", "v1", "pods")
        assert rt is not None
        if (
            not isinstance(body, dict)
            or not isinstance(body.get("target"), dict)
            or not body["target"].get("name")
        ):
            raise invalid("Binding", name, [required("target.name")])
        pod = self.get_stored(rt, namespace, name)
        uid = (body.get("metadata") or {}).get("uid")
        if uid and uid != pod["metadata"].get("uid"):
            raise conflict(rt.qualified(), name, "the UID in the binding does not match the pod", "", "pods")
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            raise conflict(
                rt.qualified(), name, f'pod {name} is already assigned to node "{node}"', "", "pods"
            )
        if pod["metadata"].get("deletionTimestamp"):
            raise conflict(
                rt.qualified(), name, f"pod {name} is being deleted, cannot be assigned to a host", "", "pods"
            )
        if opts.dry_run:
            return
        new = copy_json(pod)
        new["spec"]["nodeName"] = body["target"]["name"]
        set_condition(new.setdefault("status", {}), "PodScheduled", "True", "", "", timestamps.now())
        self.store.replace("", "pods", new)

    async def evict(self, namespace: str | None, name: str, body: Any, opts: WriteOptions) -> None:
        """``pods/eviction``: a delete that PodDisruptionBudgets could refuse (none are enforced here)."""
        rt = self.registry.lookup("", "v1", "pods")
        assert rt is not None
        options = (body or {}).get("deleteOptions") if isinstance(body, dict) else None
        if options is not None and not isinstance(options, dict):
            raise bad_request("deleteOptions must be an object")
        merged = dict(opts.options or {}, **(options or {}))
        await self.delete(
            rt, namespace, name, WriteOptions(opts.dry_run, opts.field_validation, merged or None, opts.user)
        )

    def _propagation(self, rt: ResourceType, options: Obj) -> str:
        policy = options.get("propagationPolicy")
        if policy is None and options.get("orphanDependents") is not None:
            policy = "Orphan" if options["orphanDependents"] else "Background"
        if policy is None:
            # batch/v1 Jobs orphan their pods unless told otherwise, for backwards compatibility.
            policy = "Orphan" if rt.key == ("batch", "jobs") else "Background"
        if policy not in ("Orphan", "Foreground", "Background"):
            raise invalid(
                "DeleteOptions",
                "",
                [
                    invalid_value(
                        "propagationPolicy", policy, 'must be one of "Orphan", "Foreground", "Background"'
                    )
                ],
            )
        return str(policy)

    async def finalize_removal(self, group: str, plural: str, namespace: str | None, name: str) -> None:
        """Remove a deleting object whose finalizers are all gone (used by the garbage collector)."""
        obj = self.store.get(group, plural, namespace, name)
        if (
            obj is not None
            and obj["metadata"].get("deletionTimestamp")
            and not obj["metadata"].get("finalizers")
        ):
            self.store.remove(group, plural, namespace, name)

    def remove_finalizer(
        self, group: str, plural: str, namespace: str | None, name: str, finalizer: str
    ) -> None:
        """Drop one finalizer, removing the object when it was the last (system controllers' path)."""
        obj = self.store.get(group, plural, namespace, name)
        if obj is None or finalizer not in (obj["metadata"].get("finalizers") or []):
            return
        new = dict(obj)
        finalizers = [f for f in obj["metadata"]["finalizers"] if f != finalizer]
        new["metadata"] = dict(obj["metadata"], finalizers=finalizers)
        if not finalizers:
            new["metadata"].pop("finalizers")
        self.store.replace(group, plural, new)
        if (
            new["metadata"].get("deletionTimestamp")
            and not finalizers
            and (group, plural) != ("", "namespaces")
        ):
            self.store.remove(group, plural, namespace, name)


def _check_name(in_body: str, on_url: str) -> None:
    if in_body != on_url:
        raise bad_request(f"the name of the object ({in_body}) does not match the name on the URL ({on_url})")


class _Changed(Exception):
    """The object changed while a write was being admitted; an unconditional write starts over."""


# Built-in kinds whose registry strategy keeps metadata.generation (custom resources all do).
GENERATION_KINDS = frozenset(
    {
        ("batch", "jobs"),
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("policy", "poddisruptionbudgets"),
        ("apiextensions.k8s.io", "customresourcedefinitions"),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    }
)


def _has_generation(rt: ResourceType) -> bool:
    return rt.crd is not None or rt.key in GENERATION_KINDS


def _spec_of(obj: Obj, has_status: bool) -> Obj:
    return {
        k: v
        for k, v in obj.items()
        if k not in ("metadata", "apiVersion", "kind") and not (has_status and k == "status")
    }


def _namespace_pending(rt: ResourceType, obj: Obj) -> bool:
    return rt.key == ("", "namespaces") and bool((obj.get("spec") or {}).get("finalizers"))


def _same_but_status(obj: Obj, old: Obj) -> bool:
    """Whether ``obj`` differs from ``old`` in its status (and metadata) only."""
    keys = obj.keys() - {"status", "metadata"}
    return keys == old.keys() - {"status", "metadata"} and all(obj[k] == old[k] for k in keys)


def _validate_crd(crd: Obj) -> list[Obj]:
    causes: list[Obj] = []
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    group, names = spec.get("group"), spec.get("names") or {}
    if not group:
        causes.append(required("spec.group"))
    for key in ("plural", "kind"):
        if not names.get(key):
            causes.append(required(f"spec.names.{key}"))
    if spec.get("scope") not in ("Namespaced", "Cluster"):
        causes.append(invalid_value("spec.scope", spec.get("scope"), 'must be "Namespaced" or "Cluster"'))
    versions = spec.get("versions") or []
    if not versions:
        causes.append(required("spec.versions"))
    elif sum(1 for v in versions if isinstance(v, dict) and v.get("storage")) != 1:
        causes.append(
            invalid_value(
                "spec.versions",
                [v.get("name") for v in versions if isinstance(v, dict)],
                "must have exactly one version marked as storage version",
            )
        )
    if group and names.get("plural") and crd["metadata"].get("name") != f"{names['plural']}.{group}":
        causes.append(
            invalid_value(
                "metadata.name", crd["metadata"].get("name"), 'must be spec.names.plural+"."+spec.group'
            )
        )
    return causes
