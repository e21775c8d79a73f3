"""JobSet (``jobset.x-k8s.io/v1alpha2``), the second job framework kadmit manages.

A **reduced** schema: the fields kadmit reads or writes (replicatedJobs, suspend, managedBy,
successPolicy, failurePolicy, and the status it reports) are described; ``spec`` and ``status``
keep any other JobSet field as sent (``x-kubernetes-preserve-unknown-fields``), and each Job
template's ``spec`` is stored unchanged, so a real JobSet manifest is never pruned.
"""

from __future__ import annotations

from typing import Any

from openapi import (
    DNS1123_LABEL,
    Schema,
    arr,
    boolean,
    conditions,
    integer,
    obj,
    object_meta_of_template,
    preserved,
    string,
)

GROUP = "jobset.x-k8s.io"
VERSION = "v1alpha2"


def _replicated_job() -> Schema:
    return obj(
        {
            "name": string(
                "Name of the replicated job; part of the Jobs' names.", max_length=63, pattern=DNS1123_LABEL
            ),
            "groupName": string("Group of replicated jobs this one belongs to.", max_length=63),
            "replicas": integer("Number of Jobs made from the template.", default=1, minimum=0),
            "template": obj(
                {"metadata": object_meta_of_template(), "spec": preserved("The JobSpec, stored unchanged.")},
                "The Job template.",
            ),
        },
        required=["name", "template"],
    )


def schema() -> Schema:
    spec = obj(
        {
            "replicatedJobs": arr(
                _replicated_job(), "Groups of identical Jobs.", list_type="map", map_keys=["name"]
            ),
            "suspend": boolean("Suspends the JobSet's Jobs; kadmit sets it until the workload is admitted."),
            "managedBy": string(
                "Controller that reconciles the JobSet (kueue.x-k8s.io/multikueue for MultiKueue).",
                max_length=63,
                rules=[("self == oldSelf", "managedBy is immutable")],
            ),
            "successPolicy": obj(
                {
                    "operator": string(enum=["All", "Any"]),
                    "targetReplicatedJobs": arr(
                        string(), "Replicated jobs the operator applies to; all if empty."
                    ),
                },
                "When the JobSet counts as succeeded.",
                required=["operator"],
            ),
            "failurePolicy": obj(
                {
                    "maxRestarts": integer("Restarts before the JobSet fails."),
                    "restartStrategy": string(enum=["Recreate", "BlockingRecreate"]),
                    "rules": arr(preserved("One failure policy rule.")),
                },
                "What happens when a Job fails.",
            ),
            "ttlSecondsAfterFinished": integer(minimum=0),
        },
        "Desired state of the JobSet (reduced: other JobSet fields are kept as sent).",
        preserve_unknown=True,
    )
    status = obj(
        {
            "conditions": conditions("Completed, Failed, Suspended, StartupPolicyCompleted."),
            "replicatedJobsStatus": arr(
                obj(
                    {
                        "name": string(),
                        "ready": integer(),
                        "succeeded": integer(),
                        "failed": integer(),
                        "active": integer(),
                        "suspended": integer(),
                    },
                    required=["name", "ready", "succeeded", "failed", "active", "suspended"],
                ),
                list_type="map",
                map_keys=["name"],
            ),
            "restarts": integer("Times the JobSet was restarted."),
            "restartsCountTowardsMax": integer(),
            "terminalState": string("Completed or Failed once the JobSet is finished."),
        },
        "Observed state of the JobSet (reduced: other fields are kept as sent).",
        preserve_unknown=True,
    )
    return obj(
        {
            "apiVersion": string(),
            "kind": string(),
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        "JobSet: a group of Jobs that run as one workload.",
    )


def crd(labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"jobsets.{GROUP}", "labels": dict(labels)},
        "spec": {
            "group": GROUP,
            "names": {"kind": "JobSet", "listKind": "JobSetList", "plural": "jobsets", "singular": "jobset"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "additionalPrinterColumns": [
                        {"jsonPath": ".status.terminalState", "name": "TerminalState", "type": "string"},
                        {"jsonPath": ".status.restarts", "name": "Restarts", "type": "string"},
                        {
                            "jsonPath": '.status.conditions[?(@.type=="Completed")].status',
                            "name": "Completed",
                            "type": "string",
                        },
                        {"jsonPath": ".spec.suspend", "name": "Suspended", "type": "string"},
                        {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"},
                    ],
                    "schema": {"openAPIV3Schema": schema()},
                    "subresources": {"status": {}},
                }
            ],
        },
    }
