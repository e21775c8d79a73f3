"""Builders for structural OpenAPI v3 schemas, the dialect of CustomResourceDefinitions.

Each builder returns a plain dict, ready for YAML. They exist so that a CRD reads like the Go
types it mirrors (``obj({"name": string(max_length=63)}, required=["name"])``) and so that the
rules of structural schemas (a type on every node, no ``additionalProperties`` beside
``properties``, map keys that are required) are kept in one place instead of in every field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Schema = dict[str, Any]

#: ``resource.Quantity`` as Kubernetes validates it (apimachinery's quantity regular expression).
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)"
    r"|(\.[0-9]+))))?$"
)
#: A DNS-1123 subdomain: object names, ClusterQueue/ResourceFlavor/Cohort references.
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
#: A DNS-1123 label: pod set names.
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
#: A qualified name, as label keys are: an optional DNS-subdomain prefix and a name.
QUALIFIED_NAME = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)


def _with(schema: Schema, description: str | None, extra: Mapping[str, Any]) -> Schema:
    if description:
        schema = {"description": description, **schema}
    schema.update({key: value for key, value in extra.items() if value is not None})
    return schema


def string(
    description: str | None = None,
    *,
    enum: Sequence[str] | None = None,
    default: str | None = None,
    min_length: int | None = None,
    max_length: int | None = None,
    pattern: str | None = None,
    fmt: str | None = None,
    rules: Sequence[tuple[str, str]] = (),
) -> Schema:
    schema: Schema = {"type": "string"}
    return _with(
        schema,
        description,
        {
            "enum": list(enum) if enum is not None else None,
            "default": default,
            "minLength": min_length,
            "maxLength": max_length,
            "pattern": pattern,
            "format": fmt,
            "x-kubernetes-validations": validations(rules),
        },
    )


def integer(
    description: str | None = None,
    *,
    fmt: str = "int32",
    default: int | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
) -> Schema:
    return _with(
        {"type": "integer", "format": fmt},
        description,
        {"default": default, "minimum": minimum, "maximum": maximum},
    )


def boolean(description: str | None = None, *, default: bool | None = None) -> Schema:
    return _with({"type": "boolean"}, description, {"default": default})


def date_time(description: str | None = None) -> Schema:
    return string(description, fmt="date-time")


def quantity(description: str | None = None, *, default: int | str | None = None) -> Schema:
    """A ``resource.Quantity``: an integer or a string such as ``36Gi`` or ``500m``."""
    schema: Schema = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }
    return _with(schema, description, {"default": default})


def name_ref(description: str | None = None, *, max_length: int = 253, label: bool = False) -> Schema:
    """A reference by name to another object (a DNS subdomain), or a pod set (a DNS label)."""
    return string(
        description,
        max_length=63 if label else max_length,
        pattern=DNS1123_LABEL if label else DNS1123_SUBDOMAIN,
    )


def validations(rules: Iterable[tuple[str, str]]) -> list[dict[str, str]] | None:
    """CEL rules as ``x-kubernetes-validations``; ``None`` (omitted) when there are none."""
    listed = [{"message": message, "rule": rule} for rule, message in rules]
    return listed or None


def obj(
    properties: Mapping[str, Schema] | None = None,
    description: str | None = None,
    *,
    required: Sequence[str] = (),
    default: Mapping[str, Any] | None = None,
    rules: Sequence[tuple[str, str]] = (),
    map_type: str | None = None,
    min_properties: int | None = None,
    max_properties: int | None = None,
    preserve_unknown: bool = False,
) -> Schema:
    schema: Schema = {"type": "object"}
    if properties is not None:
        schema["properties"] = dict(sorted(properties.items()))
    if required:
        missing = set(required) - set(properties or {})
        if missing:
            raise ValueError(f"required fields without a schema: {sorted(missing)}")
        schema["required"] = sorted(required)
    return _with(
        schema,
        description,
        {
            "default": dict(default) if default is not None else None,
            "minProperties": min_properties,
            "maxProperties": max_properties,
            "x-kubernetes-map-type": map_type,
            "x-kubernetes-preserve-unknown-fields": True if preserve_unknown else None,
            "x-kubernetes-validations": validations(rules),
        },
    )


def string_map(
    description: str | None = None,
    *,
    max_properties: int | None = None,
    max_value_length: int | None = None,
    map_type: str | None = None,
) -> Schema:
    """``map[string]string``: labels, annotations, node selectors, parameters."""
    schema: Schema = {"type": "object", "additionalProperties": string(max_length=max_value_length)}
    return _with(schema, description, {"maxProperties": max_properties, "x-kubernetes-map-type": map_type})


def dict_of(values: Schema, description: str | None = None) -> Schema:
    return _with({"type": "object", "additionalProperties": values}, description, {})


def resource_list(description: str | None = None) -> Schema:
    """``corev1.ResourceList``: resource name to quantity."""
    return dict_of(quantity(), description)


def by_name(
    items: Schema,
    description: str | None = None,
    *,
    min_items: int | None = None,
    max_items: int | None = None,
) -> Schema:
    """A list of objects keyed by their ``name`` (``listType: map``): flavors, resources, podSets."""
    return arr(
        items, description, list_type="map", map_keys=["name"], min_items=min_items, max_items=max_items
    )


def arr(
    items: Schema,
    description: str | None = None,
    *,
    list_type: str = "atomic",
    map_keys: Sequence[str] = (),
    min_items: int | None = None,
    max_items: int | None = None,
    rules: Sequence[tuple[str, str]] = (),
    default: list[Any] | None = None,
) -> Schema:
    if list_type == "map":
        if not map_keys or items.get("type") != "object":
            raise ValueError("a map list needs object items and at least one key")
        unkeyed = [
            k
            for k in map_keys
            if k not in items.get("required", []) and "default" not in items.get("properties", {}).get(k, {})
        ]
        if unkeyed:
            raise ValueError(f"list map keys must be required or defaulted: {unkeyed}")
    elif map_keys:
        raise ValueError("map keys are only allowed with list_type='map'")
    schema: Schema = {"type": "array", "items": items}
    return _with(
        schema,
        description,
        {
            "default": default,
            "minItems": min_items,
            "maxItems": max_items,
            "x-kubernetes-list-type": list_type,
            "x-kubernetes-list-map-keys": list(map_keys) if map_keys else None,
            "x-kubernetes-validations": validations(rules),
        },
    )


def preserved(description: str | None = None) -> Schema:
    """An object whose content the API server stores as sent (e.g. a PodSpec)."""
    return obj(None, description, preserve_unknown=True)


# --- Shapes shared with core Kubernetes -------------------------------------------------------


def condition() -> Schema:
    """``metav1.Condition``, as the API server's own types validate it."""
    return obj(
        {
            "lastTransitionTime": date_time("When the condition last changed status."),
            "message": string("Human-readable details about the transition.", max_length=32768),
            "observedGeneration": integer(fmt="int64", minimum=0),
            "reason": string(
                "Programmatic identifier of the last transition (CamelCase).",
                min_length=1,
                max_length=1024,
                pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
            ),
            "status": string(enum=["True", "False", "Unknown"]),
            "type": string(
                "Type of condition in CamelCase or in foo.example.com/CamelCase.",
                max_length=316,
                pattern=QUALIFIED_NAME,
            ),
        },
        "A metav1.Condition.",
        required=["lastTransitionTime", "message", "reason", "status", "type"],
    )


def conditions(description: str = "Latest observations of the object's state.") -> Schema:
    return arr(condition(), description, list_type="map", map_keys=["type"], max_items=16)


def label_selector(description: str | None = None) -> Schema:
    return obj(
        {
            "matchExpressions": arr(
                obj(
                    {
                        "key": string(),
                        "operator": string("In, NotIn, Exists or DoesNotExist."),
                        "values": arr(string()),
                    },
                    required=["key", "operator"],
                )
            ),
            "matchLabels": string_map(),
        },
        description,
        map_type="atomic",
    )


def toleration() -> Schema:
    return obj(
        {
            "effect": string("NoSchedule, PreferNoSchedule or NoExecute; empty matches all effects."),
            "key": string("Taint key; empty with operator Exists matches every taint."),
            "operator": string("Exists or Equal (the default)."),
            "tolerationSeconds": integer(fmt="int64"),
            "value": string(),
        }
    )


#: The CEL rules Kueue puts on every list of tolerations it owns.
TOLERATION_RULES: list[tuple[str, str]] = [
    (
        "self.all(x, !has(x.key) ? x.operator == 'Exists' : true)",
        "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
    ),
    (
        "self.all(x, has(x.tolerationSeconds) ? x.effect == 'NoExecute' : true)",
        "effect must be 'NoExecute' when 'tolerationSeconds' is set",
    ),
    (
        "self.all(x, !has(x.operator) || x.operator in ['Equal', 'Exists'])",
        "supported toleration values: 'Equal'(default), 'Exists'",
    ),
    (
        "self.all(x, has(x.operator) && x.operator == 'Exists' ? !has(x.value) : true)",
        "a value must be empty when 'operator' is 'Exists'",
    ),
    (
        "self.all(x, !has(x.effect) || x.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])",
        "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'",
    ),
]


def tolerations(description: str, *, max_items: int = 8) -> Schema:
    return arr(toleration(), description, max_items=max_items, rules=TOLERATION_RULES)


def taint() -> Schema:
    return obj(
        {
            "effect": string("NoSchedule, PreferNoSchedule or NoExecute."),
            "key": string(),
            "timeAdded": date_time(),
            "value": string(),
        },
        required=["effect", "key"],
    )


def object_meta_of_template() -> Schema:
    """The part of ObjectMeta a pod or job template may carry."""
    return obj(
        {
            "annotations": string_map(),
            "finalizers": arr(string()),
            "labels": string_map(),
            "name": string(),
            "namespace": string(),
        }
    )


def pod_template(description: str) -> Schema:
    """A PodTemplateSpec: metadata described, the PodSpec kept as sent (not pruned)."""
    return obj(
        {"metadata": object_meta_of_template(), "spec": preserved("The PodSpec, stored unchanged.")},
        description,
    )
