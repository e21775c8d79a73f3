"""Label and field selectors, parsed from query strings as the API server accepts them."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from kadmit.localcluster.errors import bad_request
from kadmit.localcluster.objects import Obj

Predicate = Callable[[Obj], bool]

_LABEL_TERM = re.compile(
    r"""\s*(?:
        (?P<not>!)\s*(?P<nkey>[^\s,=!()]+)                                # !key
      | (?P<skey>[^\s,=!()]+)\s+(?P<op>in|notin)\s*\((?P<values>[^)]*)\)  # key in (a,b)
      | (?P<ekey>[^\s,=!()]+)\s*(?P<eop>==|=|!=)\s*(?P<value>[^\s,=!()]*)  # key=value
      | (?P<xkey>[^\s,=!()]+)                                             # key
    )\s*(?:,|$)""",
    re.VERBOSE,
)


class SelectorError(ValueError):
    """A selector that cannot be evaluated (an unknown operator, In or NotIn without values)."""


LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
NODE_OPERATORS = LABEL_OPERATORS | {"Gt", "Lt"}  # a NodeSelectorRequirement may also compare numbers


def requirement_matches(
    requirement: Obj, labels: Mapping[str, str], operators: frozenset[str] = LABEL_OPERATORS
) -> bool:
    """One ``{key, operator, values}`` requirement against ``labels`` (``labels.Requirement.Matches``).

    Every selector of the local cluster comes down to this: query-string and ``metav1`` label
    selectors, node affinity, quota scope selectors. Raises :class:`SelectorError` for an operator
    outside ``operators``.
    """
    key = str(requirement.get("key", ""))
    operator = requirement.get("operator")
    if operator not in operators:
        raise SelectorError(f'"{operator}" is not a valid label selector operator')
    values = [str(v) for v in requirement.get("values") or []]
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if not present or len(values) != 1:  # Gt, Lt
        return False
    try:
        have, bound = int(labels[key]), int(values[0])
    except ValueError:
        return False
    return have > bound if operator == "Gt" else have < bound


def parse_label_selector(text: str) -> Predicate | None:
    """A predicate on an object's labels; None when the selector selects everything."""
    text = text.strip()
    if not text:
        return None
    requirements: list[Obj] = []
    pos = 0
    while pos < len(text):
        match = _LABEL_TERM.match(text, pos)
        if not match or match.end() == pos:
            raise bad_request(f"unable to parse requirement: invalid label selector: {text!r}")
        pos = match.end()
        if match.group("nkey"):
            requirements.append({"key": match.group("nkey"), "operator": "DoesNotExist"})
        elif match.group("skey"):
            values = [v.strip() for v in match.group("values").split(",") if v.strip()]
            operator = "In" if match.group("op") == "in" else "NotIn"
            requirements.append({"key": match.group("skey"), "operator": operator, "values": values})
        elif match.group("ekey"):
            operator = "NotIn" if match.group("eop") == "!=" else "In"
            value = match.group("value")
            requirements.append({"key": match.group("ekey"), "operator": operator, "values": [value]})
        else:
            requirements.append({"key": match.group("xkey"), "operator": "Exists"})

    def matches(obj: Obj) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(requirement_matches(requirement, labels) for requirement in requirements)

    return matches


def label_selector_matches(selector: Obj | None, labels: Mapping[str, str]) -> bool:
    """``metav1.LabelSelector`` semantics: matchLabels and matchExpressions all hold; empty matches all.

    Raises :class:`SelectorError` for an expression that cannot be evaluated.
    """
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        operator = expression.get("operator")
        if operator in ("In", "NotIn") and not expression.get("values"):
            raise SelectorError(f"{operator}: values must be non-empty for key {expression.get('key')!r}")
        if not requirement_matches(expression, labels):
            return False
    return True


# Fields every kind supports, plus the extra ones real servers register per kind.
COMMON_FIELDS = ("metadata.name", "metadata.namespace")
EXTRA_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "pods"): (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
    ("", "nodes"): ("spec.unschedulable",),
    ("", "namespaces"): ("status.phase",),
    ("", "secrets"): ("type",),
    ("", "events"): (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    ("batch", "jobs"): ("status.successful",),
}


def _field_value(obj: Obj, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_field_selector(text: str, allowed: tuple[str, ...]) -> Predicate | None:
    """A predicate for ``fieldSelector``; unknown fields are a 400, as on a real server."""
    text = text.strip()
    if not text:
        return None
    tests: list[tuple[str, bool, str]] = []
    for term in text.split(","):
        term = term.strip()
        if not term:
            continue
        match = re.fullmatch(r"([^=!\s]+)\s*(==|=|!=)\s*(.*)", term)
        if not match:
            raise bad_request(f"invalid field selector: {term!r}")
        field, op, value = match.group(1), match.group(2), match.group(3).strip()
        if field not in allowed:
            raise bad_request(f"field label not supported: {field}")
        tests.append((field, op == "!=", value))

    def matches(obj: Obj) -> bool:
        for field, negate, value in tests:
            if field == "metadata.namespace":
                actual = obj.get("metadata", {}).get("namespace") or ""
            else:
                actual = _field_value(obj, field)
            if (actual == value) == negate:
                return False
        return True

    return matches
