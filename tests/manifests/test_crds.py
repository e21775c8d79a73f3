"""The CRDs: valid apiextensions/v1 objects, structural schemas, and Kueue's names and versions."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.manifests.kube_schema import structural_errors

# Kueue contract §1.0: scope, short names, status subresource, conversion webhook.
KUEUE_KINDS = {
    "ResourceFlavor": ("resourceflavors", "Cluster", ["flavor", "flavors", "rf"], False, False),
    "ClusterQueue": ("clusterqueues", "Cluster", ["cq"], True, True),
    "LocalQueue": ("localqueues", "Namespaced", ["queue", "queues", "lq"], True, True),
    "Cohort": ("cohorts", "Cluster", ["co"], True, True),
    "Workload": ("workloads", "Namespaced", ["kwl", "kueueworkload", "kueueworkloads"], True, True),
    "WorkloadPriorityClass": ("workloadpriorityclasses", "Cluster", ["wpc"], False, False),
    "AdmissionCheck": ("admissionchecks", "Cluster", ["ac"], True, False),
    "MultiKueueCluster": ("multikueueclusters", "Cluster", ["mkc"], True, True),
    "MultiKueueConfig": ("multikueueconfigs", "Cluster", ["mkconf"], False, False),
    "ProvisioningRequestConfig": ("provisioningrequestconfigs", "Cluster", ["prc"], False, False),
    "Topology": ("topologies", "Cluster", ["topo"], False, False),
}
PRINTER_COLUMNS = {
    "Workload": ["Queue", "Reserved in", "Admitted", "Finished", "Age"],
    "ClusterQueue": ["Cohort", "Strategy", "Pending Workloads", "Admitted Workloads"],
    "LocalQueue": ["ClusterQueue", "Pending Workloads", "Admitted Workloads"],
    "MultiKueueCluster": ["Connected", "Age"],
    "WorkloadPriorityClass": ["Value"],
}


def kueue_crd(crds: dict[str, dict[str, Any]], kind: str) -> dict[str, Any]:
    found: dict[str, Any] = crds[f"{KUEUE_KINDS[kind][0]}.kueue.x-k8s.io"]
    return found


def version(crd: dict[str, Any], name: str) -> dict[str, Any]:
    matching: list[dict[str, Any]] = [v for v in crd["spec"]["versions"] if v["name"] == name]
    (found,) = matching
    return found


def schema_at(crd: dict[str, Any], version_name: str, dotted: str) -> dict[str, Any]:
    node: dict[str, Any] = version(crd, version_name)["schema"]["openAPIV3Schema"]
    for part in dotted.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


def test_every_kueue_kind_has_a_crd(crds: dict[str, dict[str, Any]]) -> None:
    kueue = {name for name in crds if name.endswith(".kueue.x-k8s.io")}
    assert kueue == {f"{plural}.kueue.x-k8s.io" for plural, *_ in KUEUE_KINDS.values()}


@pytest.mark.parametrize("kind", sorted(KUEUE_KINDS))
def test_kueue_crd_names_scope_and_subresources(crds: dict[str, dict[str, Any]], kind: str) -> None:
    plural, scope, short_names, status, conversion = KUEUE_KINDS[kind]
    crd = kueue_crd(crds, kind)
    spec = crd["spec"]
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert spec["group"] == "kueue.x-k8s.io"
    assert spec["scope"] == scope
    assert spec["names"] == {
        "categories": ["kueue"],
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "shortNames": short_names,
        "singular": kind.lower(),
    }
    for v in spec["versions"]:
        assert ("subresources" in v) == status, v["name"]
        if status:
            assert v["subresources"] == {"status": {}}
    if conversion:
        assert spec["conversion"] == {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": {
                    "service": {
                        "name": "kadmit-webhook-service",
                        "namespace": "kadmit-system",
                        "port": 443,
                        "path": "/convert",
                    }
                },
                "conversionReviewVersions": ["v1"],
            },
        }
    else:
        assert "conversion" not in spec


@pytest.mark.parametrize("kind", sorted(KUEUE_KINDS))
def test_v1beta2_is_stored_and_v1beta1_deprecated(crds: dict[str, dict[str, Any]], kind: str) -> None:
    versions = {v["name"]: v for v in kueue_crd(crds, kind)["spec"]["versions"]}
    assert set(versions) == {"v1beta1", "v1beta2"}
    assert versions["v1beta2"]["served"] and versions["v1beta2"]["storage"]
    assert "deprecated" not in versions["v1beta2"]
    assert versions["v1beta1"]["served"] and not versions["v1beta1"]["storage"]
    assert versions["v1beta1"]["deprecated"] is True
    assert versions["v1beta1"]["deprecationWarning"] == "This version is deprecated. Use v1beta2 instead."


@pytest.mark.parametrize("kind", sorted(PRINTER_COLUMNS))
def test_printer_columns_are_kueues(crds: dict[str, dict[str, Any]], kind: str) -> None:
    for v in kueue_crd(crds, kind)["spec"]["versions"]:
        assert [c["name"] for c in v["additionalPrinterColumns"]] == PRINTER_COLUMNS[kind]
    cohort = {
        v["name"]: v["additionalPrinterColumns"][0]["jsonPath"]
        for v in kueue_crd(crds, "ClusterQueue")["spec"]["versions"]
    }
    assert cohort == {"v1beta2": ".spec.cohortName", "v1beta1": ".spec.cohort"}


def test_every_crd_schema_is_structural(crds: dict[str, dict[str, Any]]) -> None:
    problems = {
        f"{name}/{v['name']}": structural_errors(v["schema"]["openAPIV3Schema"])
        for name, crd in crds.items()
        for v in crd["spec"]["versions"]
    }
    assert {key: errs for key, errs in problems.items() if errs} == {}


def test_structural_check_catches_what_the_api_server_refuses(crds: dict[str, dict[str, Any]]) -> None:
    schema = copy.deepcopy(version(kueue_crd(crds, "ClusterQueue"), "v1beta2")["schema"]["openAPIV3Schema"])
    spec = schema["properties"]["spec"]
    del spec["properties"]["queueingStrategy"]["type"]
    spec["properties"]["namespaceSelector"]["additionalProperties"] = {"type": "string"}
    spec["properties"]["admissionChecksStrategy"]["properties"]["admissionChecks"]["items"]["required"] = []
    spec["x-kubernetes-validations"].append({"rule": "self.cohortName ==", "message": "broken"})
    spec["properties"]["stopPolicy"]["default"] = "Sometimes"
    schema["properties"]["metadata"]["properties"] = {"labels": {"type": "object"}}
    spec["x-kubernetes-validations"].append({"rule": "has(self.cohort)", "message": "v1beta1 name"})
    coverage = spec["properties"]["resourceGroups"]["items"]["properties"]["coveredResources"]
    coverage["x-kubernetes-validations"] = [{"rule": "self == oldSelf", "message": "immutable"}]
    errors = "\n".join(structural_errors(schema))
    assert ".spec.queueingStrategy: no type" in errors
    assert ".spec.namespaceSelector: properties and additionalProperties are mutually exclusive" in errors
    assert "list map key 'name' must be a required or defaulted scalar" in errors
    assert "CEL rule does not compile: 'self.cohortName =='" in errors
    assert ".spec.stopPolicy: default 'Sometimes' does not validate" in errors
    assert ".metadata: only name and generateName may be specified" in errors
    assert ".spec: CEL rule refers to an undeclared field self.cohort" in errors
    assert ".spec.resourceGroups[].coveredResources: transition rule (oldSelf) inside a list" in errors


def test_quantities_are_int_or_string_with_the_quantity_pattern(crds: dict[str, dict[str, Any]]) -> None:
    crd = kueue_crd(crds, "ClusterQueue")
    for v in ("v1beta1", "v1beta2"):
        quota = schema_at(crd, v, "spec.resourceGroups.[].flavors.[].resources.[].nominalQuota")
        assert quota["x-kubernetes-int-or-string"] is True
        assert quota["anyOf"] == [{"type": "integer"}, {"type": "string"}]
        assert quota["pattern"].startswith("^(\\+|-)?")


def test_kueue_defaults(crds: dict[str, dict[str, Any]]) -> None:
    cq = kueue_crd(crds, "ClusterQueue")
    assert schema_at(cq, "v1beta2", "spec.queueingStrategy")["default"] == "BestEffortFIFO"
    assert schema_at(cq, "v1beta2", "spec.stopPolicy")["default"] == "None"
    assert schema_at(cq, "v1beta2", "spec.preemption")["default"] == {}
    assert schema_at(cq, "v1beta2", "spec.preemption.reclaimWithinCohort")["default"] == "Never"
    assert schema_at(cq, "v1beta2", "spec.preemption.withinClusterQueue")["default"] == "Never"
    assert schema_at(cq, "v1beta2", "spec.preemption.borrowWithinCohort.policy")["default"] == "Never"
    assert schema_at(cq, "v1beta2", "spec.flavorFungibility.whenCanBorrow")["default"] == "MayStopSearch"
    assert schema_at(cq, "v1beta2", "spec.flavorFungibility.whenCanPreempt")["default"] == "TryNextFlavor"
    assert schema_at(cq, "v1beta2", "spec.fairSharing.weight")["default"] == 1
    wl = kueue_crd(crds, "Workload")
    assert schema_at(wl, "v1beta2", "spec.podSets.[].name")["default"] == "main"
    assert schema_at(wl, "v1beta2", "spec.podSets.[].count")["default"] == 1
    assert schema_at(wl, "v1beta2", "spec.active")["default"] is True
    prc = crds["provisioningrequestconfigs.kueue.x-k8s.io"]
    assert schema_at(prc, "v1beta2", "spec.retryStrategy")["default"] == {
        "backoffLimitCount": 3,
        "backoffBaseSeconds": 60,
        "backoffMaxSeconds": 1800,
    }
    mkc = kueue_crd(crds, "MultiKueueCluster")
    assert schema_at(mkc, "v1beta2", "spec.clusterSource.kubeConfig.locationType")["default"] == "Secret"


def test_v1beta1_has_the_v1beta1_field_names(crds: dict[str, dict[str, Any]]) -> None:
    def fields(kind: str, v: str, dotted: str) -> set[str]:
        return set(schema_at(kueue_crd(crds, kind), v, dotted)["properties"])

    assert {"cohort", "admissionChecks"} <= fields("ClusterQueue", "v1beta1", "spec")
    assert not {"cohortName", "concurrentAdmissionPolicy"} & fields("ClusterQueue", "v1beta1", "spec")
    assert {"cohortName", "concurrentAdmissionPolicy"} <= fields("ClusterQueue", "v1beta2", "spec")
    assert "admissionChecks" not in fields("ClusterQueue", "v1beta2", "spec")
    assert {"priorityClassSource", "priorityClassName"} <= fields("Workload", "v1beta1", "spec")
    assert "priorityClassRef" not in fields("Workload", "v1beta1", "spec")
    assert "accumulatedPastExexcutionTimeSeconds" in fields("Workload", "v1beta1", "status")
    assert "accumulatedPastExecutionTimeSeconds" in fields("Workload", "v1beta2", "status")
    assert {"flavorUsage", "flavors"} <= fields("LocalQueue", "v1beta1", "status")
    assert "flavorsUsage" in fields("LocalQueue", "v1beta2", "status")
    assert "retryDelayMinutes" in fields("AdmissionCheck", "v1beta1", "spec")
    assert "retryDelayMinutes" not in fields("AdmissionCheck", "v1beta2", "spec")
    assert fields("MultiKueueCluster", "v1beta1", "spec") == {"kubeConfig", "clusterProfileRef"}
    assert fields("MultiKueueCluster", "v1beta2", "spec") == {"clusterSource"}
    assert "quotaManagement" not in fields("MultiKueueConfig", "v1beta1", "spec")


def test_list_map_keys_where_kueue_has_them(crds: dict[str, dict[str, Any]]) -> None:
    expected = {
        ("ClusterQueue", "spec.resourceGroups.[].flavors"): ["name"],
        ("ClusterQueue", "spec.admissionChecksStrategy.admissionChecks"): ["name"],
        ("ClusterQueue", "status.conditions"): ["type"],
        ("Workload", "spec.podSets"): ["name"],
        ("Workload", "status.admissionChecks"): ["name"],
        ("Workload", "status.schedulingStats.evictions"): ["reason", "underlyingCause"],
    }
    for (kind, dotted), keys in expected.items():
        node = schema_at(kueue_crd(crds, kind), "v1beta2", dotted)
        assert node["x-kubernetes-list-type"] == "map", dotted
        assert node["x-kubernetes-list-map-keys"] == keys, dotted


def test_jobset_crd(crds: dict[str, dict[str, Any]]) -> None:
    crd = crds["jobsets.jobset.x-k8s.io"]
    assert crd["spec"]["scope"] == "Namespaced"
    (v,) = crd["spec"]["versions"]
    assert (v["name"], v["served"], v["storage"], v["subresources"]) == (
        "v1alpha2",
        True,
        True,
        {"status": {}},
    )
    spec = v["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert {"replicatedJobs", "suspend", "managedBy", "successPolicy", "failurePolicy"} <= set(
        spec["properties"]
    )
    template = spec["properties"]["replicatedJobs"]["items"]["properties"]["template"]
    assert template["properties"]["spec"]["x-kubernetes-preserve-unknown-fields"] is True


@pytest.mark.parametrize(
    "name", ["jobsets.jobset.x-k8s.io", *(f"{plural}.kueue.x-k8s.io" for plural, *_ in KUEUE_KINDS.values())]
)
def test_every_crd_is_a_valid_apiextensions_v1_object(crds: dict[str, dict[str, Any]], name: str) -> None:
    crd = crds[name]
    assert (crd["apiVersion"], crd["kind"]) == ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    spec = crd["spec"]
    names = spec["names"]
    assert crd["metadata"]["name"] == f"{names['plural']}.{spec['group']}"
    assert names["plural"] == names["plural"].lower() and names["singular"] == names["kind"].lower()
    assert names["listKind"] == f"{names['kind']}List"
    assert spec["scope"] in ("Cluster", "Namespaced")
    assert [v["storage"] for v in spec["versions"]].count(True) == 1
    assert len({v["name"] for v in spec["versions"]}) == len(spec["versions"])
    for v in spec["versions"]:
        assert v["served"] is True
        assert v["schema"]["openAPIV3Schema"]["type"] == "object"
        assert set(v.get("subresources", {})) <= {"status", "scale"}
        for col in v.get("additionalPrinterColumns", []):
            assert col["type"] in ("integer", "number", "string", "boolean", "date"), col
            assert col["jsonPath"].startswith("."), col
            assert col["name"] != "Name"
    # Client-side `kubectl apply` keeps the whole object in an annotation of at most 256 KiB.
    assert len(json.dumps(crd, separators=(",", ":"))) < 262144
    # A conversion webhook is only meaningful, and only allowed, with more than one version.
    if spec.get("conversion", {}).get("strategy") == "Webhook":
        assert len(spec["versions"]) > 1
