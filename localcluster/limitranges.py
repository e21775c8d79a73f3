"""LimitRanges as kube-apiserver treats them: API defaulting, validation, and the LimitRanger plugin.

- :func:`default_limit_range` is ``SetDefaults_LimitRangeItem`` (``pkg/apis/core/v1/defaults.go``):
  a ``Container`` item's missing ``default`` comes from ``max``, its missing ``defaultRequest``
  from ``default``, then from ``min``.
- :func:`validate_limit_range` is ``ValidateLimitRange`` (``pkg/apis/core/validation``), with its
  field paths and messages. Its bad values are ``resource.Quantity`` structs, which Go prints with
  ``%#v``; :class:`GoQuantity` reproduces what ``ParseQuantity`` and the milli round-up of
  ``SetDefaults_ResourceList`` leave in them, so the message is the real server's.
- :class:`LimitRanger` is the admission plugin (``plugin/pkg/admission/limitranger``): on Pod
  CREATE it fills each container's missing limits from ``default`` and requests from
  ``defaultRequest`` (mutation, before webhooks and before ResourceQuota charges the pod), then
  refuses a pod outside a ``Container`` or ``Pod`` item's min / max / maxLimitRequestRatio with
  403, as ``admission.NewForbidden`` of ``utilerrors.NewAggregate`` words it. PersistentVolumeClaims
  are checked against ``PersistentVolumeClaim`` items on CREATE and UPDATE.

Kubernetes walks Go maps (random order) and lists LimitRanges from an informer (no order); here
resources are taken in name order and LimitRanges by name, so messages are stable.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from kadmit.localcluster.admission import forbidden
from kadmit.localcluster.errors import cause, forbidden_field, required
from kadmit.localcluster.interfaces import AdmissionRequest, AdmissionResult, StoreView
from kadmit.localcluster.objects import Obj, copy_json
from kadmit.localcluster.quantity import BINARY_SI, DECIMAL_EXPONENT, DECIMAL_SI, Quantity, format_quantity
from kadmit.localcluster.quota import COMPUTE_QUOTA_RESOURCES

ANNOTATION = "kubernetes.io/limit-ranger"
CONTAINER, POD, PVC = "Container", "Pod", "PersistentVolumeClaim"
_STANDARD_TYPES = (POD, CONTAINER, PVC)

# resource.MaxMilliValue: the largest value whose milli-value fits an int64.
_MAX_MILLI_VALUE = (2**63 - 1) // 1000
_MILLI = Fraction(1, 1000)

# -- Go's resource.Quantity, as far as messages show it -------------------------------------------

_DECIMAL_EXPONENTS = {"": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18, "n": -9, "u": -6, "m": -3}
_BINARY_EXPONENTS = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SPLIT = re.compile(r"([+-]?)0*([0-9]*)(?:\.([0-9]*))?(.*)")


def _away_from_zero(value: Fraction) -> int:
    """Round to an integer away from zero, as Quantity's ``Value``/``MilliValue`` and ``RoundUp`` do."""
    return math.ceil(value) if value >= 0 else -math.ceil(-value)


@dataclass(frozen=True)
class GoQuantity:
    """What ``resource.ParseQuantity`` then ``RoundUp(Milli)`` leave in a ``resource.Quantity``.

    ``scaled`` is the ``int64Amount`` (value, scale) of the fast path, or None when the quantity
    fell back to an ``inf.Dec``; ``cached`` is the string Go keeps when the text was canonical.
    """

    value: Fraction
    format: str
    scaled: tuple[int, int] | None
    cached: str

    @classmethod
    def parse(cls, raw: object) -> GoQuantity:
        """Parse as :meth:`Quantity.parse` (which refuses what Go refuses), then model Go's state."""
        exact = Quantity.parse(raw)
        text = raw.strip() if isinstance(raw, str) else json.dumps(raw)
        parsed = cls._fast_path(text, exact)
        return parsed.round_up_milli()

    @classmethod
    def _fast_path(cls, text: str, exact: Quantity) -> GoQuantity:
        if text == "0":
            return cls(Fraction(0), DECIMAL_SI, (0, 0), "0")
        match = _SPLIT.fullmatch(text)
        if match is None:  # Quantity.parse accepted it, so this cannot happen
            return cls(exact.value, exact.format, None, "")
        sign, num, denom, suffix = match.group(1), match.group(2) or "0", match.group(3) or "", match.group(4)
        if suffix in _BINARY_EXPONENTS:
            fmt, exponent = BINARY_SI, _BINARY_EXPONENTS[suffix]
        elif suffix in _DECIMAL_EXPONENTS:
            fmt, exponent = DECIMAL_SI, _DECIMAL_EXPONENTS[suffix]
        else:
            fmt, exponent = DECIMAL_EXPONENT, int(suffix[1:])
        mantissa, scale = 1, 0
        if fmt == BINARY_SI:
            if denom:
                return cls(exact.value, exact.format, None, "")
            mantissa = 1 << exponent
            precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        else:
            scale = exponent
            precision = 18 - (len(num) + len(denom))
        if precision < 0:
            return cls(exact.value, exact.format, None, "")
        scale -= len(denom)
        if scale < -9:
            return cls(exact.value, exact.format, None, "")
        shifted = num + denom
        digits = int(shifted)
        result = digits * mantissa
        if result > 2**63 - 1:
            return cls(exact.value, exact.format, None, "")
        if sign == "-":
            result = -result
        if fmt == BINARY_SI:
            canonical = exponent % 10 == 0 and digits & 0x07 != 0
        else:
            canonical = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
        return cls(exact.value, fmt, (result, scale), text if canonical else "")

    def round_up_milli(self) -> GoQuantity:
        """``SetDefaults_ResourceList``: round up to milli-units, forgetting the text if it changed."""
        if self.scaled is not None:
            value, scale = self.scaled
            if scale >= -3:
                return self
            factor = 10 ** (-3 - scale)
            rounded = _away_from_zero(Fraction(value, factor))
            return replace(self, value=Fraction(rounded, 1000), scaled=(rounded, -3), cached="")
        milli = Fraction(_away_from_zero(self.value * 1000), 1000)
        return replace(self, value=milli, cached="")

    @property
    def quantity(self) -> Quantity:
        return Quantity(self.value, self.format)

    def __str__(self) -> str:
        """``Quantity.String()``: the kept text, else the canonical form."""
        return self.cached or format_quantity(self.value, self.format)

    def go_syntax(self) -> str:
        """``fmt.Sprintf("%#v", q)``, as ``field.Invalid`` prints a Quantity (its String has a
        pointer receiver). An ``inf.Dec`` prints as a pointer whose address Go alone knows."""
        value, scale = self.scaled if self.scaled is not None else (0, 0)
        dec = "nil" if self.scaled is not None else "0xc000000000"
        return (
            f"resource.Quantity{{i:resource.int64Amount{{value:{value}, scale:{scale}}}, "
            f"d:resource.infDecAmount{{Dec:(*inf.Dec)({dec})}}, s:{json.dumps(self.cached)}, "
            f"Format:{json.dumps(self.format)}}}"
        )


def _value(amount: Fraction) -> int:
    return _away_from_zero(amount)


def _milli_value(amount: Fraction) -> int:
    return _away_from_zero(amount * 1000)


# -- API defaulting -------------------------------------------------------------------------------


def default_limit_range(obj: Obj) -> None:
    """``SetDefaults_LimitRangeItem`` for each item of ``spec.limits``."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    for item in spec.get("limits") or []:
        if not isinstance(item, dict) or item.get("type") != CONTAINER:
            continue
        defaults = dict(item.get("default") or {})
        requests = dict(item.get("defaultRequest") or {})
        for name, value in (item.get("max") or {}).items():
            defaults.setdefault(name, value)
        for name, value in defaults.items():
            requests.setdefault(name, value)
        for name, value in (item.get("min") or {}).items():
            requests.setdefault(name, value)
        # Empty maps are omitted on the wire (omitempty), so only a filled one appears.
        if defaults:
            item["default"] = defaults
        if requests:
            item["defaultRequest"] = requests


# -- validation -----------------------------------------------------------------------------------

_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_REGEX_ERROR = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
    "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
_SUBDOMAIN_REGEX_ERROR = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_STANDARD_RESOURCES = frozenset(
    {
        *COMPUTE_QUOTA_RESOURCES,
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "storage",
        "requests.storage",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})


def _invalid(path: str, shown: str, detail: str) -> Obj:
    """``field.Invalid`` with the bad value already printed as Go prints it."""
    return cause("FieldValueInvalid", path, f"Invalid value: {shown}: {detail}")


def _qualified_name_errors(value: str) -> list[str]:
    """``validation.IsQualifiedName``."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name "
            + _QUALIFIED_REGEX_ERROR
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errors.append("prefix part must be no more than 253 characters")
            if not _DNS1123_SUBDOMAIN.fullmatch(prefix):
                errors.append("prefix part " + _SUBDOMAIN_REGEX_ERROR)
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME.fullmatch(name):
        errors.append("name part " + _QUALIFIED_REGEX_ERROR)
    return errors


def _is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended(name: str) -> bool:
    if _is_native(name) or name.startswith("requests."):
        return False
    return not _qualified_name_errors(f"requests.{name}")


def _is_overcommit_allowed(name: str) -> bool:
    return _is_native(name) and not name.startswith("hugepages-")


def _resource_name_causes(limit_type: str, name: str, path: str) -> list[Obj]:
    """``validateLimitRangeResourceName``: ``validateResourceName``, and for Pod and Container
    items ``validateContainerResourceName``'s further checks (which run whatever the first found)."""
    shown = json.dumps(name)
    causes = [_invalid(path, shown, message) for message in _qualified_name_errors(name)]
    if (
        not causes
        and "/" not in name
        and not (name in _STANDARD_RESOURCES or name.startswith(("hugepages-", "requests.hugepages-")))
    ):
        causes.append(_invalid(path, shown, "must be a standard resource type or fully qualified"))
    if limit_type not in (POD, CONTAINER):
        return causes
    if "/" not in name:
        if not (name in _CONTAINER_RESOURCES or name.startswith("hugepages-")):
            causes.append(_invalid(path, shown, "must be a standard resource for containers"))
    elif not _is_native(name) and not _is_extended(name):
        causes.append(_invalid(path, shown, "doesn't follow extended resource name standard"))
    return causes


def _type_causes(limit_type: Any, path: str) -> list[Obj]:
    text = limit_type if isinstance(limit_type, str) else ""
    shown = json.dumps(text)
    causes = [_invalid(path, shown, message) for message in _qualified_name_errors(text)]
    if not causes and "/" not in text and text not in _STANDARD_TYPES:
        causes.append(_invalid(path, shown, "must be a standard limit type or fully qualified"))
    return causes


def validate_limit_range(obj: Obj) -> list[Obj]:
    """``ValidateLimitRange`` (metadata aside): the field causes of an invalid LimitRange."""
    causes: list[Obj] = []
    seen_types: set[str] = set()
    for i, item in enumerate((obj.get("spec") or {}).get("limits") or []):
        where = f"spec.limits[{i}]"
        if not isinstance(item, dict):
            continue
        limit_type = item.get("type") or ""
        causes += _type_causes(limit_type, f"{where}.type")
        if limit_type in seen_types:
            causes.append(
                cause("FieldValueDuplicate", f"{where}.type", f"Duplicate value: {json.dumps(limit_type)}")
            )
        seen_types.add(str(limit_type))

        keys: set[str] = set()
        maps: dict[str, dict[str, GoQuantity]] = {}
        fields = ["max", "min"] if limit_type == POD else ["max", "min", "default", "defaultRequest"]
        for field in fields:
            maps[field] = _collect(item, field, str(limit_type), where, keys, causes)
        if limit_type == POD:
            for field in ("default", "defaultRequest"):
                maps[field] = {}
                if item.get(field):
                    causes.append(
                        forbidden_field(f"{where}.{field}", "may not be specified when `type` is 'Pod'")
                    )
        if (
            limit_type == PVC
            and "storage" not in (item.get("min") or {})
            and "storage" not in (item.get("max") or {})
        ):
            causes.append(
                required(
                    f"{where}.limits",
                    "either minimum or maximum storage value is required, but neither was provided",
                )
            )
        maps["maxLimitRequestRatio"] = _collect(
            item, "maxLimitRequestRatio", str(limit_type), where, keys, causes
        )
        for name in sorted(keys):
            causes += _range_causes(where, name, maps)
    return causes


def _collect(
    item: Obj, field: str, limit_type: str, where: str, keys: set[str], causes: list[Obj]
) -> dict[str, GoQuantity]:
    """One map of an item, read as Go reads it; its resource names are checked on the way."""
    found: dict[str, GoQuantity] = {}
    values = item.get(field)
    for name, raw in sorted(values.items() if isinstance(values, dict) else []):
        causes.extend(_resource_name_causes(limit_type, name, f"{where}.{field}[{name}]"))
        keys.add(name)
        found[name] = GoQuantity.parse(raw)
    return found


def _range_causes(where: str, name: str, maps: Mapping[str, Mapping[str, GoQuantity]]) -> list[Obj]:
    """``min <= defaultRequest <= default <= max`` and a sane ``maxLimitRequestRatio`` for one resource."""
    low, high = maps["min"].get(name), maps["max"].get(name)
    limit, request = maps["default"].get(name), maps["defaultRequest"].get(name)
    ratio = maps["maxLimitRequestRatio"].get(name)
    causes: list[Obj] = []

    def path(field: str) -> str:
        return f"{where}.{field}[{name}]"

    if low and high and low.value > high.value:
        causes.append(
            _invalid(path("min"), low.go_syntax(), f"min value {low} is greater than max value {high}")
        )
    if request and low and low.value > request.value:
        causes.append(
            _invalid(
                path("defaultRequest"),
                request.go_syntax(),
                f"min value {low} is greater than default request value {request}",
            )
        )
    if request and high and request.value > high.value:
        causes.append(
            _invalid(
                path("defaultRequest"),
                request.go_syntax(),
                f"default request value {request} is greater than max value {high}",
            )
        )
    if request and limit and request.value > limit.value:
        causes.append(
            _invalid(
                path("defaultRequest"),
                request.go_syntax(),
                f"default request value {request} is greater than default limit value {limit}",
            )
        )
    if limit and low and low.value > limit.value:
        causes.append(
            _invalid(
                path("default"), low.go_syntax(), f"min value {low} is greater than default value {limit}"
            )
        )
    if limit and high and limit.value > high.value:
        causes.append(
            _invalid(
                path("default"), high.go_syntax(), f"default value {limit} is greater than max value {high}"
            )
        )
    if ratio and ratio.value < 1:
        causes.append(
            _invalid(path("maxLimitRequestRatio"), ratio.go_syntax(), f"ratio {ratio} is less than 1")
        )
    if ratio and low and high:
        ratio_value = float(_value(ratio.value))
        low_value, high_value = _value(low.value), _value(high.value)
        if max(_value(ratio.value), low_value, high_value) < _MAX_MILLI_VALUE:
            ratio_value = float(_milli_value(ratio.value)) / 1000
            low_value, high_value = _milli_value(low.value), _milli_value(high.value)
        bound = _go_divide(float(high_value), float(low_value))
        if ratio_value > bound:
            causes.append(
                _invalid(
                    path("maxLimitRequestRatio"),
                    ratio.go_syntax(),
                    f"ratio {ratio} is greater than max/min = {_go_float(bound)}",
                )
            )
    if (
        not _is_overcommit_allowed(name)
        and limit is not None
        and request is not None
        and limit.value != request.value
    ):
        causes.append(
            _invalid(
                path("defaultRequest"),
                request.go_syntax(),
                f"default value {limit} must equal to defaultRequest value {request} in {name}",
            )
        )
    return causes


def _go_divide(a: float, b: float) -> float:
    """Go's float64 division, which gives ±Inf or NaN where Python raises."""
    if b == 0:
        return math.nan if a == 0 else math.copysign(math.inf, a)
    return a / b


def _go_float(value: float) -> str:
    """``fmt.Sprintf("%f", value)``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.6f}"


# -- the LimitRanger admission plugin ------------------------------------------------------------

ResourceList = dict[str, Quantity]


@dataclass
class _Resources:
    """A container's requests and limits: the raw values (kept as sent) and Go's reading of them."""

    requests: dict[str, GoQuantity]
    limits: dict[str, GoQuantity]


def _go_list(values: Any) -> dict[str, GoQuantity]:
    return (
        {name: GoQuantity.parse(raw) for name, raw in (values or {}).items()}
        if isinstance(values, dict)
        else {}
    )


def _container_resources(container: Obj) -> _Resources:
    resources = container.get("resources") or {}
    return _Resources(_go_list(resources.get("requests")), _go_list(resources.get("limits")))


def _items(limit_range: Obj, limit_type: str) -> list[Obj]:
    return [
        item
        for item in (limit_range.get("spec") or {}).get("limits") or []
        if isinstance(item, dict) and item.get("type") == limit_type
    ]


def _defaults(limit_range: Obj) -> tuple[dict[str, Any], dict[str, Any]]:
    """``defaultContainerResourceRequirements``: (limits, requests) from the Container items."""
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    for item in _items(limit_range, CONTAINER):
        requests.update(item.get("defaultRequest") or {})
        limits.update(item.get("default") or {})
    return limits, requests


def _merge_defaults(pod: Obj, limit_range: Obj) -> None:
    """``mergePodResourceRequirements``: fill what containers leave out, and say so in the annotation."""
    default_limits, default_requests = _defaults(limit_range)
    notes: list[str] = []
    spec = pod.get("spec") or {}
    for key, label in (("containers", "container"), ("initContainers", "init container")):
        for container in spec.get(key) or []:
            if not isinstance(container, dict):
                continue
            resources = container.get("resources")
            if not isinstance(resources, dict):
                resources = container["resources"] = {}
            set_requests = _fill(resources, "requests", default_requests)
            set_limits = _fill(resources, "limits", default_limits)
            name = container.get("name", "")
            if set_requests:
                notes.append(f"{', '.join(sorted(set_requests))} request for {label} {name}")
            if set_limits:
                notes.append(f"{', '.join(sorted(set_limits))} limit for {label} {name}")
    if notes:
        meta = pod.setdefault("metadata", {})
        annotations = meta.get("annotations")
        if not isinstance(annotations, dict):
            annotations = meta["annotations"] = {}
        annotations[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)


def _fill(resources: Obj, section: str, defaults: Mapping[str, Any]) -> list[str]:
    present = resources.get(section)
    current: Obj = present if isinstance(present, dict) else {}
    added = [name for name in defaults if name not in current]
    if added:
        current.update({name: copy_json(defaults[name]) for name in added})
        resources[section] = current
    return added


_MIN_ORDER = ("request", "limit")
_MAX_ORDER = ("limit", "request")


def _bound_constraint(
    bound: str,
    limit_type: str,
    name: str,
    enforced: Quantity,
    request: Any,
    limit: Any,
    order: tuple[str, ...],
) -> str | None:
    """Kubernetes' ``minConstraint`` (``bound`` "minimum": the request, then the limit, may not
    be below) and ``maxConstraint`` ("maximum": the limit, then the request, may not be above;
    a claim's max reads its request only). ``order`` names the sides in the order the plugin
    checks them; the first must be given."""
    request_value, limit_value, enforced_value = _comparable(request, limit, enforced)
    sides = {"request": (request, request_value), "limit": (limit, limit_value)}
    said = f"{bound} {name} usage per {limit_type} is {enforced}"
    for position, what in enumerate(order):
        given, value = sides[what]
        if given is None:
            if position == 0:
                return f"{said}.  No {what} is specified"
            continue
        if value < enforced_value if bound == "minimum" else value > enforced_value:
            return f"{said}, but {what} is {given}"
    return None


def _ratio_constraint(
    limit_type: str, name: str, enforced: Quantity, requests: Mapping[str, Any], limits: Mapping[str, Any]
) -> str | None:
    request, limit = requests.get(name), limits.get(name)
    request_value, limit_value, _ = _comparable(request, limit, enforced)
    if request is None or request_value == 0:
        return (
            f"{name} max limit to request ratio per {limit_type} is {enforced}, "
            "but no request is specified or request is 0"
        )
    if limit is None or limit_value == 0:
        return (
            f"{name} max limit to request ratio per {limit_type} is {enforced}, "
            "but no limit is specified or limit is 0"
        )
    observed = float(limit_value) / float(request_value)
    shown = observed
    ceiling = float(_value(enforced.value))
    if _value(enforced.value) <= _MAX_MILLI_VALUE:
        observed *= 1000
        ceiling = float(_milli_value(enforced.value))
    if observed > ceiling:
        return (
            f"{name} max limit to request ratio per {limit_type} is {enforced}, "
            f"but provided ratio is {_go_float(shown)}"
        )
    return None


def _amount(quantity: Any) -> Fraction:
    return quantity.value if isinstance(quantity, GoQuantity | Quantity) else Fraction(0)


def _comparable(request: Any, limit: Any, enforced: Quantity) -> tuple[int, int, int]:
    """``requestLimitEnforcedValues``: milli-values when all three fit, whole values otherwise."""
    amounts = (_amount(request), _amount(limit), enforced.value)
    if all(_value(amount) <= _MAX_MILLI_VALUE for amount in amounts):
        request_value, limit_value, enforced_value = (_milli_value(amount) for amount in amounts)
    else:
        request_value, limit_value, enforced_value = (_value(amount) for amount in amounts)
    return request_value, limit_value, enforced_value


def _enforced(values: Any) -> list[tuple[str, Quantity]]:
    """A LimitRange item's map as the plugin reads it from its informer: milli-rounded, canonical."""
    if not isinstance(values, dict):
        return []
    return [(name, GoQuantity.parse(raw).quantity) for name, raw in sorted(values.items())]


def _check(
    item: Obj, limit_type: str, requests: Mapping[str, Any], limits: Mapping[str, Any], errors: list[str]
) -> None:
    """Min, max and maxLimitRequestRatio of one item against one set of requests and limits."""
    def bound(kind: str, name: str, q: Quantity, order: tuple[str, ...]) -> str | None:
        return _bound_constraint(kind, limit_type, name, q, requests.get(name), limits.get(name), order)

    found = [
        *(bound("minimum", name, q, _MIN_ORDER) for name, q in _enforced(item.get("min"))),
        *(bound("maximum", name, q, _MAX_ORDER) for name, q in _enforced(item.get("max"))),
        *(
            _ratio_constraint(limit_type, name, q, requests, limits)
            for name, q in _enforced(item.get("maxLimitRequestRatio"))
        ),
    ]
    errors.extend(error for error in found if error)


def _add(total: ResourceList, more: Mapping[str, GoQuantity | Quantity]) -> None:
    for name, amount in more.items():
        q = amount.quantity if isinstance(amount, GoQuantity) else amount
        total[name] = total[name] + q if name in total else q


def _max(total: ResourceList, other: Mapping[str, Quantity]) -> None:
    for name, amount in other.items():
        if name not in total or amount.value > total[name].value:
            total[name] = amount


def _pod_totals(spec: Obj, pick: str) -> ResourceList:
    """The plugin's ``podRequests``/``podLimits``: containers and sidecars summed, then the
    maximum with each init container (plus the sidecars started before it)."""
    total: ResourceList = {}
    for container in spec.get("containers") or []:
        if isinstance(container, dict):
            _add(total, getattr(_container_resources(container), pick))
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for container in spec.get("initContainers") or []:
        if not isinstance(container, dict):
            continue
        amounts = getattr(_container_resources(container), pick)
        if container.get("restartPolicy") == "Always":
            _add(total, amounts)
            _add(sidecars, amounts)
            during = dict(sidecars)
        else:
            during = {}
            _add(during, amounts)
            _add(during, sidecars)
        _max(init_peak, during)
    _max(total, init_peak)
    return total


def pod_limit_errors(limit_range: Obj, pod: Obj) -> list[str]:
    """``PodValidateLimitFunc``: what one LimitRange has against a (defaulted) pod."""
    errors: list[str] = []
    spec = pod.get("spec") or {}
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == CONTAINER:
            for key in ("containers", "initContainers"):
                for container in spec.get(key) or []:
                    if isinstance(container, dict):
                        resources = _container_resources(container)
                        _check(item, CONTAINER, resources.requests, resources.limits, errors)
        elif item.get("type") == POD:
            _check(item, POD, _pod_totals(spec, "requests"), _pod_totals(spec, "limits"), errors)
    return errors


def claim_limit_errors(limit_range: Obj, claim: Obj) -> list[str]:
    """``PersistentVolumeClaimValidateLimitFunc``: min and max of the claim's storage request."""
    errors: list[str] = []
    requests = _go_list(((claim.get("spec") or {}).get("resources") or {}).get("requests"))
    for item in _items(limit_range, PVC):
        found = [
            *(
                _bound_constraint("minimum", PVC, name, q, requests.get(name), None, _MIN_ORDER)
                for name, q in _enforced(item.get("min"))
            ),
            *(
                _bound_constraint("maximum", PVC, name, q, requests.get(name), None, ("request",))
                for name, q in _enforced(item.get("max"))
            ),
        ]
        errors.extend(error for error in found if error)
    return errors


def aggregate(errors: Iterable[str]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: one message as is, several deduplicated in brackets."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


class LimitRanger:
    """The LimitRanger admission plugin (an ``AdmissionPlugin``), over the namespace's stored LimitRanges.

    It reads the store when a request comes, where Kubernetes reads an informer's cache; a
    LimitRange applies from the moment it is stored.
    """

    def __init__(self, store: StoreView) -> None:
        self._store = store

    def _limit_ranges(self, request: AdmissionRequest) -> list[Obj]:
        ranges = self._store.list("", "limitranges", request.namespace)
        return sorted(ranges, key=lambda limit_range: str(limit_range["metadata"]["name"]))

    @staticmethod
    def _applies(request: AdmissionRequest) -> bool:
        """``SupportsAttributes``: Pods on CREATE (their containers cannot change afterwards),
        claims on CREATE and UPDATE; never a subresource, nor an object being deleted."""
        if request.subresource or request.object is None or not request.namespace or request.group:
            return False
        if request.old_object is not None and (request.old_object.get("metadata") or {}).get(
            "deletionTimestamp"
        ):
            return False
        if request.resource == "pods":
            return request.operation == "CREATE"
        return request.resource == "persistentvolumeclaims" and request.operation in ("CREATE", "UPDATE")

    async def mutate(self, request: AdmissionRequest) -> AdmissionResult:
        if not self._applies(request) or request.resource != "pods":
            return AdmissionResult(request.object)
        assert request.object is not None
        ranges = self._limit_ranges(request)
        if not ranges:
            return AdmissionResult(request.object)
        pod = copy_json(request.object)
        for limit_range in ranges:
            _merge_defaults(pod, limit_range)
        return AdmissionResult(pod)

    async def validate(self, request: AdmissionRequest) -> list[str]:
        if not self._applies(request):
            return []
        assert request.object is not None
        check = pod_limit_errors if request.resource == "pods" else claim_limit_errors
        for limit_range in self._limit_ranges(request):
            errors = check(limit_range, request.object)
            if errors:
                raise forbidden(_named(request), aggregate(errors))
        return []


def _named(request: AdmissionRequest) -> AdmissionRequest:
    """The request named after its object (``extractResourceName``), its generateName failing that."""
    if request.name or request.object is None:
        return request
    metadata = request.object.get("metadata") or {}
    return replace(request, name=str(metadata.get("name") or metadata.get("generateName") or ""))
