"""The by-hand patch must do exactly what jsonpatch's would."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
from hypothesis import given, settings
from hypothesis import strategies as st

from kadmit.webhook.patch import diff, escape

keys = st.sampled_from(["a", "b", "kueue.x-k8s.io/queue-name", "x~y", "", "suspend"])
scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=3)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
objects = st.dictionaries(keys, json_values, max_size=5)


@settings(max_examples=120, deadline=None)
@given(objects, objects)
def test_diff_applies_to_the_same_result_as_jsonpatch(old: dict[str, Any], new: dict[str, Any]) -> None:
    ours = jsonpatch.apply_patch(copy.deepcopy(old), diff(old, new))
    theirs = jsonpatch.apply_patch(copy.deepcopy(old), jsonpatch.make_patch(old, new))
    assert ours == new
    assert theirs == new
    assert ours == theirs


def test_equal_objects_give_no_operations() -> None:
    job = {"spec": {"suspend": True, "template": {"spec": {"containers": [{"name": "c"}]}}}}
    assert diff(job, copy.deepcopy(job)) == []


def test_bool_and_int_are_different_json() -> None:
    assert diff({"a": 1}, {"a": True}) == [{"op": "replace", "path": "/a", "value": True}]


def test_label_keys_are_escaped() -> None:
    assert escape("kueue.x-k8s.io/queue-name") == "kueue.x-k8s.io~1queue-name"
    assert diff({"labels": {}}, {"labels": {"a/b~c": "v"}}) == [
        {"op": "add", "path": "/labels/a~1b~0c", "value": "v"}
    ]
