"""The API's objects as plain dicts: the merge patch from one version of an object to another,
and an object's controller."""

from __future__ import annotations

from kadmit.kube import Obj, merge_patch
from kadmit.kube.objects import controller_of, owner_uids


def apply(target: object, patch: object) -> object:
    """RFC 7386's MergePatch, to check that a computed patch does what it should."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply(out.get(key), value)
    return out


def test_the_merge_patch_between_two_versions_holds_only_the_changes() -> None:
    old = {
        "metadata": {
            "name": "a",
            "labels": {"keep": "1", "gone": "2", "changed": "3"},
            "resourceVersion": "5",
        },
        "spec": {"parallelism": 2, "groups": [{"name": "g", "replicas": 1}], "same": {"x": 1}},
    }
    new = {
        "metadata": {
            "name": "a",
            "labels": {"keep": "1", "changed": "4", "added": "5"},
            "resourceVersion": "5",
        },
        "spec": {"parallelism": 3, "groups": [{"name": "g", "replicas": 2}], "same": {"x": 1}},
    }
    patch = merge_patch(old, new)
    assert patch == {
        "metadata": {"labels": {"gone": None, "changed": "4", "added": "5"}},
        "spec": {"parallelism": 3, "groups": [{"name": "g", "replicas": 2}]},
    }
    assert apply(old, patch) == new
    assert merge_patch(new, new) == {}


def test_the_controller_of_an_object_is_its_one_controller_reference() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "name": "sample", "uid": "u1", "controller": True}
    owner = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "u2"}
    pod = {"metadata": {"name": "sample-x", "ownerReferences": [owner, job]}}
    assert controller_of(pod) == job
    assert owner_uids(pod) == ["u1"]
    orphans: list[Obj] = [{"metadata": {"ownerReferences": [owner]}}, {"metadata": {}}, {"metadata": None}]
    for orphan in orphans:
        assert controller_of(orphan) is None
        assert owner_uids(orphan) == []
