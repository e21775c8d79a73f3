"""``metav1.LabelSelector``: the one reading (:func:`parse.label_selector`) and the one matcher."""

from __future__ import annotations

from typing import Any

import pytest

from kadmit.engine.errors import InvalidObject
from kadmit.engine.parse import label_selector

NAMESPACE = "kubernetes.io/metadata.name"


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ({}, {}, True),  # {} selects everything
        ({}, {"a": "b"}, True),
        ({"matchLabels": {"a": "b"}}, {"a": "b", "c": "d"}, True),
        ({"matchLabels": {"a": "b"}}, {"a": "c"}, False),
        ({"matchLabels": {"a": "b"}}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["b", "c"]}]}, {"a": "c"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["b"]}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}, {"a": "b"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": []}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": "b"}, False),
        (
            {
                "matchLabels": {"team": "ml"},
                "matchExpressions": [{"key": NAMESPACE, "operator": "NotIn", "values": ["kube-system"]}],
            },
            {"team": "ml", NAMESPACE: "research"},
            True,
        ),
    ],
)
def test_matches_as_kubernetes_does(selector: dict[str, Any], labels: dict[str, str], expected: bool) -> None:
    assert label_selector(selector).matches(labels) is expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ({"key": "a", "operator": "Near", "values": ["b"]}, "selector key a: unknown operator 'Near'"),
        ({"key": "a", "values": ["b"]}, "selector key a: unknown operator None"),
        ({"key": "a", "operator": "Gt", "values": ["1"]}, "unknown operator 'Gt'"),  # node selectors only
        ({"key": "a", "operator": "In"}, "selector key a: operator In needs values"),
        ({"key": "a", "operator": "NotIn", "values": []}, "selector key a: operator NotIn needs values"),
        ({"key": "a", "operator": "Exists", "values": ["b"]}, "key a: operator Exists takes no values"),
        ({"key": "a", "operator": "DoesNotExist", "values": ["b"]}, "operator DoesNotExist takes no values"),
        ({"operator": "Exists"}, r"matchExpressions\[0\]\.key: Required value"),
        ({"key": "a", "operator": "In", "values": [1]}, r"values\[0\]: must be a string"),
    ],
)
def test_a_selector_that_cannot_be_evaluated_is_refused_when_read(
    expression: dict[str, Any], message: str
) -> None:
    """Found when the selector is read (once, at startup), not when some label set reaches it."""
    selector = {"matchLabels": {"x": "y"}, "matchExpressions": [expression]}
    with pytest.raises(InvalidObject, match=message):
        label_selector(selector, "Configuration", "managedJobsNamespaceSelector")


def test_errors_say_where_the_selector_sits() -> None:
    broken = {"matchExpressions": [{"key": "a", "operator": "Near"}]}
    with pytest.raises(InvalidObject) as caught:
        label_selector(broken, "Configuration", "managedJobsNamespaceSelector")
    assert str(caught.value) == (
        "Configuration: managedJobsNamespaceSelector.matchExpressions[0].operator: "
        "selector key a: unknown operator 'Near'"
    )
    with pytest.raises(InvalidObject, match=r"^LabelSelector: matchExpressions\[0\]\.operator: "):
        label_selector(broken)
