"""A status write's schema check: only the status, and in it only the fields the write changes
(validation ratcheting, as the real server's ``CRDValidationRatcheting``)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from kadmit.localcluster.crdschema import SchemaValidator

CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"


def workload_validator() -> SchemaValidator:
    crd = yaml.safe_load((CRDS / "kueue.x-k8s.io_workloads.yaml").read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2")
    return SchemaValidator(version["schema"]["openAPIV3Schema"])


def condition(kind: str, status: str = "True") -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": kind,
        "message": "m",
        "lastTransitionTime": "2026-11-26T00:00:00Z",
    }


def stored() -> dict[str, Any]:
    """A Workload stored when its schema allowed a value it no longer does (clusterName a number)."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {
            "queueName": "q",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                }
            ],
        },
        "status": {"clusterName": 5, "conditions": [condition("QuotaReserved", "False")]},
    }


def fields(causes: list[dict[str, Any]]) -> list[str]:
    return [str(c["field"]) for c in causes]


def test_an_unchanged_status_field_is_not_checked_again() -> None:
    validator, old = workload_validator(), stored()
    new = copy.deepcopy(old)
    new["status"]["conditions"] = [condition("QuotaReserved"), condition("Admitted")]
    assert validator.status_causes(new, old) == []
    # Without the stored object the whole status is checked, and the old value is reported.
    assert fields(validator.status_causes(new)) == ["status.clusterName"]


def test_a_changed_status_field_is_checked_in_the_whole_objects_words() -> None:
    validator, old = workload_validator(), stored()
    renamed = copy.deepcopy(old)
    renamed["status"]["clusterName"] = 6
    assert fields(validator.status_causes(renamed, old)) == ["status.clusterName"]
    broken = copy.deepcopy(old)
    broken["status"]["conditions"] = [{"type": "Admitted", "status": "True"}]
    broken["status"]["clusterName"] = "worker"
    found = fields(validator.status_causes(broken, old))
    assert found and all(f.startswith("status.conditions[0]") for f in found)
    # A field the stored object did not have is a change too.
    added = copy.deepcopy(old)
    added["status"]["admission"] = {"clusterQueue": 7, "podSetAssignments": []}
    assert "status.admission.clusterQueue" in fields(validator.status_causes(added, old))


def test_conditions_are_ratcheted_item_by_item_by_their_type() -> None:
    validator, old = workload_validator(), stored()
    # A stored condition its schema refuses now (no status): left alone while another is added.
    old["status"]["conditions"].append({"type": "Evicted", "reason": "R", "message": "m",
                                        "lastTransitionTime": "2026-11-26T00:00:00Z"})
    new = copy.deepcopy(old)
    new["status"]["conditions"].append(condition("Finished"))
    assert validator.status_causes(new, old) == []
    # The same refused condition, changed, is checked.
    changed = copy.deepcopy(old)
    changed["status"]["conditions"][1]["message"] = "changed"
    assert "status.conditions[1].status" in fields(validator.status_causes(changed, old))
    # A new condition is checked.
    bad = copy.deepcopy(old)
    bad["status"]["conditions"].append({"type": "Finished", "status": "Maybe", "reason": "R",
                                        "message": "m", "lastTransitionTime": "2026-11-26T00:00:00Z"})
    assert "status.conditions[2].status" in fields(validator.status_causes(bad, old))
    # The list's own bound is checked whatever its items (maxItems 16).
    long = copy.deepcopy(old)
    long["status"]["conditions"] += [condition(f"Extra{i}") for i in range(15)]
    assert "status.conditions" in fields(validator.status_causes(long, old))


def test_a_value_that_passed_is_remembered_and_an_other_one_is_still_checked() -> None:
    validator, old = workload_validator(), stored()
    admission = {"clusterQueue": "cq", "podSetAssignments": [
        {"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}]}
    for _ in range(2):  # the second time from the remembered encodings
        new = copy.deepcopy(old)
        new["status"]["admission"] = copy.deepcopy(admission)
        assert validator.status_causes(new, old) == []
    wrong = copy.deepcopy(old)
    wrong["status"]["admission"] = {**copy.deepcopy(admission), "clusterQueue": 7}
    assert "status.admission.clusterQueue" in fields(validator.status_causes(wrong, old))


def test_the_remembered_values_are_bounded(monkeypatch: Any) -> None:
    from kadmit.localcluster import crdschema

    monkeypatch.setattr(crdschema, "PASSED_VALUES", 3)
    validator, old = workload_validator(), stored()
    for i in range(10):
        new = copy.deepcopy(old)
        new["status"]["admission"] = {"clusterQueue": f"cq-{i}", "podSetAssignments": []}
        assert validator.status_causes(new, old) == []
    remembered = validator._passed["admission"]
    assert len(remembered) == 3
    assert b'"cq-9"' in list(remembered)[-1]


def test_the_first_status_write_is_checked_field_by_field() -> None:
    validator, old = workload_validator(), stored()
    del old["status"]
    new = copy.deepcopy(old)
    new["status"] = {"conditions": [condition("QuotaReserved")], "clusterName": "worker"}
    assert validator.status_causes(new, old) == []
    assert set(validator._passed) == {"clusterName"}  # through the per-field path
    new["status"]["clusterName"] = 5
    assert fields(validator.status_causes(new, old)) == ["status.clusterName"]
