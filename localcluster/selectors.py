"""Label and field selectors, parsed from query strings as the API server accepts them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kadmit.localcluster.errors import ApiError, bad_request
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


LabelTest = Callable[[dict[str, str]], bool]


def _absent(key: str) -> LabelTest:
    return lambda labels: key not in labels


def _present(key: str) -> LabelTest:
    return lambda labels: key in labels


def _in_set(key: str, values: set[str], inside: bool) -> LabelTest:
    return lambda labels: (labels.get(key) in values) == inside


def _equals(key: str, value: str, equal: bool) -> LabelTest:
    return lambda labels: (labels.get(key) == value) == equal


def parse_label_selector(text: str) -> Predicate | None:
    """A predicate on an object's labels; None when the selector selects everything."""
    text = text.strip()
    if not text:
        return None
    tests: list[LabelTest] = []
    pos = 0
    while pos < len(text):
        match = _LABEL_TERM.match(text, pos)
        if not match or match.end() == pos:
            raise bad_request(f"unable to parse requirement: invalid label selector: {text!r}")
        pos = match.end()
        if match.group("nkey"):
            tests.append(_absent(match.group("nkey")))
        elif match.group("skey"):
            values = {v.strip() for v in match.group("values").split(",") if v.strip()}
            tests.append(_in_set(match.group("skey"), values, match.group("op") == "in"))
        elif match.group("ekey"):
            tests.append(_equals(match.group("ekey"), match.group("value"), match.group("eop") != "!="))
        else:
            tests.append(_present(match.group("xkey")))

    def matches(obj: Obj) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(test(labels) for test in tests)

    return matches


def match_label_selector(selector: Obj | None, labels: dict[str, str]) -> bool:
    """A ``metav1.LabelSelector`` (matchLabels + matchExpressions); an empty one matches everything."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
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
            raise ApiError(
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": f"field label not supported: {field}",
                    "reason": "BadRequest",
                    "code": 400,
                }
            )
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
