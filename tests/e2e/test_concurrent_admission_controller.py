"""Kueue's concurrent-admission controller table (``pkg/controller/concurrentadmission/
controller_test.go``, ``TestReconcile``), translated: each case's parent and variants are made
through the embedded API server, the loop reconciles the parent once (as Kueue's test calls
``Reconcile`` once), and the Workloads are read back from the API.

Flavors: reservation, on-demand, spot (in that order of preference), in ClusterQueue ``cq``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kadmit.controller.concurrent_admission import ConcurrentAdmissionReconciler, variant_name
from kadmit.controller.local_setup import install_crds
from kadmit.engine.concurrent_admission import ALLOWED_FLAVORS_ANNOTATION, PARENT_LABEL, PREEMPTION_GATE
from kadmit.engine.timestamps import format_time
from kadmit.kube import Client, EventRecorder, Informers
from kadmit.kube.resources import CLUSTER_QUEUES, LOCAL_QUEUES, RESOURCE_FLAVORS, WORKLOADS
from kadmit.localcluster.cluster import LocalCluster
from tests.e2e.conftest import eventually

Obj = dict[str, Any]
API = "kueue.x-k8s.io/v1beta2"
FLAVORS = ("reservation", "on-demand", "spot")
NOW = 1_767_225_600.0
PARENT = "wl-12345"


class Harness:
    def __init__(self, kube: Client, informers: Informers, reconciler: ConcurrentAdmissionReconciler) -> None:
        self.kube = kube
        self.informers = informers
        self.reconciler = reconciler

    async def setup(self, policy: Obj, flavors: tuple[str, ...] = FLAVORS) -> None:
        for flavor in FLAVORS:
            await self.kube.create(
                RESOURCE_FLAVORS, {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": flavor}}
            )
        groups = [
            {
                "coveredResources": ["cpu"],
                "flavors": [
                    {"name": f, "resources": [{"name": "cpu", "nominalQuota": "10"}]} for f in flavors
                ],
            }
        ]
        cq = {"namespaceSelector": {}, "resourceGroups": groups, "concurrentAdmissionPolicy": policy}
        await self.kube.create(
            CLUSTER_QUEUES,
            {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": "cq"}, "spec": cq},
        )
        await self.kube.create(
            LOCAL_QUEUES,
            {
                "apiVersion": API,
                "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": "default"},
                "spec": {"clusterQueue": "cq"},
            },
        )

    async def workload(
        self,
        name: str,
        *,
        status: Obj | None = None,
        active: bool = True,
        owner: Obj | None = None,
        flavor: str | None = None,
        parent: bool = False,
    ) -> Obj:
        meta: Obj = {"name": name, "namespace": "default"}
        if parent:
            meta["labels"] = {PARENT_LABEL: "true"}
        if owner is not None:
            meta["ownerReferences"] = [
                {
                    "apiVersion": API,
                    "kind": "Workload",
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        if flavor is not None:
            meta["annotations"] = {ALLOWED_FLAVORS_ANNOTATION: flavor}
        spec: Obj = {
            "queueName": "lq",
            "active": active,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
                            ]
                        }
                    },
                }
            ],
        }
        if owner is not None:
            spec["preemptionGates"] = [{"name": PREEMPTION_GATE}]
        created = await self.kube.create(
            WORKLOADS, {"apiVersion": API, "kind": "Workload", "metadata": meta, "spec": spec}
        )
        if status:
            created["status"] = status
            created = await self.kube.replace_status(WORKLOADS, created)
        return created

    async def variants(self, parent: Obj, admitted: str | None = None, **per_flavor: Obj) -> dict[str, Obj]:
        out = {}
        for flavor in FLAVORS:
            name = variant_name(PARENT, parent["metadata"]["uid"], flavor)
            status = (
                admitted_status(flavor) if flavor == admitted else per_flavor.get(flavor.replace("-", "_"))
            )
            out[flavor] = await self.workload(name, owner=parent, flavor=flavor, status=status)
        return out

    async def reconcile(self) -> None:
        """Once the cache holds what the API holds (every Workload at its resourceVersion)."""

        async def synced() -> bool:
            listing = (await self.kube.list(WORKLOADS, "default"))["items"]
            informer = self.informers.get(WORKLOADS)
            return (
                all(
                    (cached := informer.get("default", w["metadata"]["name"])) is not None
                    and cached["metadata"]["resourceVersion"] == w["metadata"]["resourceVersion"]
                    for w in listing
                )
                and self.informers.get(CLUSTER_QUEUES).get(None, "cq") is not None
                and self.informers.get(LOCAL_QUEUES).get("default", "lq") is not None
            )

        await eventually(synced, within=30, what="the informers caught up")
        await self.reconciler.reconcile("default", PARENT)

    async def get(self, name: str) -> Obj:
        return await self.kube.get(WORKLOADS, "default", name)

    async def active(self, variants: dict[str, Obj]) -> dict[str, bool]:
        return {
            f: (await self.get(v["metadata"]["name"]))["spec"].get("active", True)
            for f, v in variants.items()
        }


def cond(kind: str, status: str, reason: str, message: str = "") -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": format_time(NOW),
    }


def admitted_status(flavor: str, *extra: Obj) -> Obj:
    return {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": flavor}, "resourceUsage": {"cpu": "1"}, "count": 1}
            ],
        },
        "conditions": [
            cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
            cond("Admitted", "True", "Admitted", "The workload is admitted"),
            *extra,
        ],
    }


def conditions(obj: Obj) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c["status"], c["reason"], c["message"])
        for c in (obj.get("status") or {}).get("conditions") or []
    }


@pytest.fixture
async def harness() -> AsyncIterator[Harness]:
    async with LocalCluster() as cluster, await cluster.api_client() as api:
        kube = Client(api)
        await install_crds(kube)
        informers = Informers(kube)
        reconciler = ConcurrentAdmissionReconciler(
            kube,
            informers.get(WORKLOADS),
            informers.get(LOCAL_QUEUES),
            informers.get(CLUSTER_QUEUES),
            EventRecorder(kube, "kadmit-test"),
            clock=lambda: NOW,
        )
        await informers.start()
        async with asyncio.timeout(30):
            await informers.wait_synced()
        try:
            yield Harness(kube, informers, reconciler)
        finally:
            await informers.stop()


TRY = {"migration": {"mode": "TryPreferredFlavors"}}
TRY_RESERVATION = {
    "migration": {"mode": "TryPreferredFlavors", "constraints": {"lastAcceptableFlavorName": "reservation"}}
}
RETAIN = {"migration": {"mode": "RetainFirstAdmission"}}


async def test_parent_workload_without_variants_creates_them(harness: Harness) -> None:
    await harness.setup(TRY)
    parent = await harness.workload(PARENT, parent=True)
    await harness.reconcile()
    listing = (await harness.kube.list(WORKLOADS, "default"))["items"]
    variants = {
        w["metadata"]["annotations"][ALLOWED_FLAVORS_ANNOTATION]: w
        for w in listing
        if w["metadata"]["name"] != PARENT
    }
    assert sorted(variants) == sorted(FLAVORS)
    for flavor, variant in variants.items():
        assert variant["metadata"]["name"] == variant_name(PARENT, parent["metadata"]["uid"], flavor)
        assert variant["metadata"]["name"].startswith(f"wl-variant-{flavor}-")
        assert variant["spec"]["preemptionGates"] == [{"name": PREEMPTION_GATE}]
        assert variant["metadata"]["ownerReferences"][0]["uid"] == parent["metadata"]["uid"]


async def test_flavor_removed_from_cluster_queue_deletes_its_variant(harness: Harness) -> None:
    await harness.setup(TRY, flavors=("reservation", "on-demand"))
    parent = await harness.workload(PARENT, parent=True)
    spot = await harness.workload(
        variant_name(PARENT, parent["metadata"]["uid"], "spot"), owner=parent, flavor="spot"
    )
    await harness.reconcile()
    names = {w["metadata"]["name"] for w in (await harness.kube.list(WORKLOADS, "default"))["items"]}
    assert spot["metadata"]["name"] not in names
    assert len(names) == 3  # the parent and its reservation and on-demand variants


DEACTIVATION = [
    # Kueue's case names; (policy, admitted flavor, flavors deactivated)
    (
        "with minTargetFlavor=reservation, variant admitted on spot, deactivate on-demand",
        TRY_RESERVATION,
        "spot",
        {"on-demand"},
    ),
    (
        "with minTargetFlavor=reservation, variant admitted on on-demand, deactivate spot",
        TRY_RESERVATION,
        "on-demand",
        {"spot"},
    ),
    (
        "with minTargetFlavor=reservation, variant admitted on reservation, deactivate spot and on-demand",
        TRY_RESERVATION,
        "reservation",
        {"spot", "on-demand"},
    ),
    ("without minTargetFlavor, variant admitted on spot, nothing deactivated", TRY, "spot", set()),
    ("without minTargetFlavor, variant admitted on on-demand, deactivate spot", TRY, "on-demand", {"spot"}),
    (
        "without minTargetFlavor, variant admitted on reservation, deactivate spot and on-demand",
        TRY,
        "reservation",
        {"spot", "on-demand"},
    ),
    (
        "RetainFirstAdmission, variant admitted on spot, deactivate reservation and on-demand",
        RETAIN,
        "spot",
        {"reservation", "on-demand"},
    ),
]


@pytest.mark.parametrize(
    ("policy", "admitted", "deactivated"), [pytest.param(*c[1:], id=c[0]) for c in DEACTIVATION]
)
async def test_deactivation(harness: Harness, policy: Obj, admitted: str, deactivated: set[str]) -> None:
    await harness.setup(policy)
    parent = await harness.workload(PARENT, parent=True, status=admitted_status(admitted))
    variants = await harness.variants(parent, admitted)
    await harness.reconcile()
    assert await harness.active(variants) == {f: f not in deactivated for f in FLAVORS}


async def test_admitted_variant_syncs_admission_to_parent(harness: Harness) -> None:
    await harness.setup(TRY)
    parent = await harness.workload(PARENT, parent=True)
    variants = await harness.variants(parent, "spot")
    await harness.reconcile()
    got = await harness.get(PARENT)
    assert got["status"]["admission"]["podSetAssignments"][0]["flavors"] == {"cpu": "spot"}
    have = conditions(got)
    assert have["QuotaReserved"] == ("True", "QuotaReserved", "Quota reserved in ClusterQueue cq")
    assert have["Admitted"] == (
        "True",
        "Admitted",
        f"The variant {variants['spot']['metadata']['name']} is admitted",
    )


async def test_no_variant_admitted_parent_admitted_evicts_parent(harness: Harness) -> None:
    await harness.setup(TRY)
    parent = await harness.workload(PARENT, parent=True, status=admitted_status("spot"))
    await harness.variants(parent)
    await harness.reconcile()
    assert conditions(await harness.get(PARENT))["Evicted"] == (
        "True",
        "ConcurrentAdmission",
        "No variant is running",
    )


async def test_admitted_variant_evicted_parent_has_quota_evicts_parent_and_waits(harness: Harness) -> None:
    await harness.setup(TRY)
    parent = await harness.workload(PARENT, parent=True, status=admitted_status("spot"))
    evicted = admitted_status("spot", cond("Evicted", "True", "Preempted", "Evicted by preemption"))
    variants = await harness.variants(parent, spot=evicted)
    await harness.reconcile()
    assert conditions(await harness.get(PARENT))["Evicted"] == (
        "True",
        "VariantEvicted",
        "Admitted variant was evicted",
    )
    spot = await harness.get(variants["spot"]["metadata"]["name"])
    assert spot["status"]["admission"] is not None  # kept until the parent has given its quota back


async def test_admitted_variant_evicted_parent_without_quota_clears_variant_reservation(
    harness: Harness,
) -> None:
    await harness.setup(TRY)
    parent = await harness.workload(PARENT, parent=True)
    evicted = admitted_status("spot", cond("Evicted", "True", "Preempted", "Evicted by preemption"))
    variants = await harness.variants(parent, spot=evicted)
    await harness.reconcile()
    spot = await harness.get(variants["spot"]["metadata"]["name"])
    assert spot["status"].get("admission") is None
    have = conditions(spot)
    assert have["QuotaReserved"] == ("False", "PendingEvaluation", "Evicted by preemption")
    assert have["Requeued"] == ("True", "Preempted", "Evicted by preemption")
    assert have["Admitted"][0] == "False"


async def test_parent_marked_finished_marks_all_variants_finished(harness: Harness) -> None:
    await harness.setup(TRY)
    finished = {"conditions": [cond("Finished", "True", "Succeeded", "Job finished successfully")]}
    parent = await harness.workload(PARENT, parent=True, status=finished)
    variants = await harness.variants(parent)
    await harness.reconcile()
    for variant in variants.values():
        got = conditions(await harness.get(variant["metadata"]["name"]))
        assert got["Finished"] == ("True", "Succeeded", "Job finished successfully")


async def test_parent_not_active_deactivates_all_variants(harness: Harness) -> None:
    await harness.setup(TRY)
    parent = await harness.workload(PARENT, parent=True, active=False)
    variants = await harness.variants(parent)
    await harness.reconcile()
    assert await harness.active(variants) == dict.fromkeys(FLAVORS, False)


async def test_admitted_variants_flavor_removed_deletes_it_and_evicts_the_parent(harness: Harness) -> None:
    """Kueue: "admitted variant's flavor removed; variant deleted and parent evicted"."""
    await harness.setup(TRY, flavors=("reservation", "on-demand"))
    parent = await harness.workload(PARENT, parent=True, status=admitted_status("spot"))
    variants = await harness.variants(parent, "spot")
    await harness.reconcile()
    names = {w["metadata"]["name"] for w in (await harness.kube.list(WORKLOADS, "default"))["items"]}
    assert variants["spot"]["metadata"]["name"] not in names
    assert conditions(await harness.get(PARENT))["Evicted"] == (
        "True",
        "ConcurrentAdmission",
        "No variant is running",
    )


@pytest.mark.parametrize("admitted_parent", [True, False], ids=["parent admitted", "parent not admitted"])
async def test_parent_pods_ready_syncs_to_the_admitted_variant(
    harness: Harness, admitted_parent: bool
) -> None:
    """Kueue: "parent changes WaitForPodsReady from True to False, syncs to admitted variant" and
    "parent not admitted, variant admitted, parent changes WaitForPodsReady from True to False,
    syncs to variant and admits parent"."""
    await harness.setup(TRY)
    not_ready = cond("PodsReady", "False", "PodsNotReady", "Pods are not ready")
    status = admitted_status("spot", not_ready) if admitted_parent else {"conditions": [not_ready]}
    parent = await harness.workload(PARENT, parent=True, status=status)
    variants = await harness.variants(
        parent, spot=admitted_status("spot", cond("PodsReady", "True", "PodsReady", "Pods are ready"))
    )
    await harness.reconcile()
    spot = conditions(await harness.get(variants["spot"]["metadata"]["name"]))
    assert spot["PodsReady"] == ("False", "PodsNotReady", "Pods are not ready")
    got = conditions(await harness.get(PARENT))
    assert got["Admitted"][0] == "True"
    assert got["PodsReady"] == ("False", "PodsNotReady", "Pods are not ready")


async def test_created_variants_inherit_the_parents_preemption_gates(harness: Harness) -> None:
    """Kueue: "parent with a pre-existing preemption gate; created variants inherit it plus the
    ConcurrentAdmission gate"."""
    await harness.setup(TRY)
    parent = await harness.workload(PARENT, parent=True)
    parent["spec"]["preemptionGates"] = [{"name": "example.com/gate"}]
    await harness.kube.replace(WORKLOADS, parent)
    await harness.reconcile()
    listing = (await harness.kube.list(WORKLOADS, "default"))["items"]
    gates = [w["spec"]["preemptionGates"] for w in listing if w["metadata"]["name"] != PARENT]
    assert gates == [[{"name": "example.com/gate"}, {"name": PREEMPTION_GATE}]] * 3
