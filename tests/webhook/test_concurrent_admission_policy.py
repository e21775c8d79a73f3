"""ClusterQueue ``spec.concurrentAdmissionPolicy`` validation over HTTPS, in Kueue's words
(``validateConcurrentAdmissionPolicy``), with the ConcurrentAdmission gate on and off."""

from __future__ import annotations

from typing import Any

import pytest

from kadmit.webhook.kueue import KueueWebhooks
from tests.webhook.test_kueue import admit, cluster_queue, denial

TRY = {"migration": {"mode": "TryPreferredFlavors"}}


@pytest.fixture
async def gated(serve: Any) -> Any:
    return await serve(KueueWebhooks(concurrent_admission=True).webhooks())


async def test_valid_policies_are_admitted(gated: Any) -> None:
    await admit(gated, cluster_queue(concurrentAdmissionPolicy=TRY))
    await admit(
        gated, cluster_queue(concurrentAdmissionPolicy={"migration": {"mode": "RetainFirstAdmission"}})
    )
    last = {"migration": {"mode": "TryPreferredFlavors", "constraints": {"lastAcceptableFlavorName": "spot"}}}
    await admit(gated, cluster_queue(concurrentAdmissionPolicy=last))


async def test_one_resource_group_only(gated: Any) -> None:
    cq = cluster_queue(concurrentAdmissionPolicy=TRY)
    group = cq["spec"]["resourceGroups"][0]
    cq["spec"]["resourceGroups"] = [
        {
            "coveredResources": ["cpu"],
            "flavors": [{**group["flavors"][0], "resources": group["flavors"][0]["resources"][:1]}],
        },
        {
            "coveredResources": ["memory"],
            "flavors": [{**group["flavors"][1], "resources": group["flavors"][1]["resources"][1:]}],
        },
    ]
    assert await denial(gated, cq) == (
        "spec.resourceGroups: Invalid value: 2: must have exactly one ResourceGroup when "
        "ConcurrentAdmissionPolicy is defined"
    )


async def test_at_most_sixteen_flavors(gated: Any) -> None:
    cq = cluster_queue(concurrentAdmissionPolicy=TRY)
    template = cq["spec"]["resourceGroups"][0]["flavors"][0]
    cq["spec"]["resourceGroups"][0]["flavors"] = [{**template, "name": f"f{i}"} for i in range(17)]
    assert await denial(gated, cq) == (
        "spec.resourceGroups[0].flavors: Invalid value: 17: cannot have more than 16 resource flavors "
        "in the ResourceGroup when ConcurrentAdmissionPolicy is defined"
    )


async def test_constraints_only_with_try_preferred_flavors(gated: Any) -> None:
    policy = {
        "migration": {"mode": "RetainFirstAdmission", "constraints": {"lastAcceptableFlavorName": "spot"}}
    }
    assert await denial(gated, cluster_queue(concurrentAdmissionPolicy=policy)) == (
        "spec.concurrentAdmissionPolicy.migration.constraints: Forbidden: may only be set when "
        'migration.mode is "TryPreferredFlavors" (got "RetainFirstAdmission")'
    )


async def test_last_acceptable_flavor_must_be_a_flavor_of_the_queue(gated: Any) -> None:
    policy = {
        "migration": {"mode": "TryPreferredFlavors", "constraints": {"lastAcceptableFlavorName": "gpu"}}
    }
    assert await denial(gated, cluster_queue(concurrentAdmissionPolicy=policy)) == (
        "spec.concurrentAdmissionPolicy.migration.constraints.lastAcceptableFlavorName: "
        'Invalid value: "gpu": '
        "must be one of the flavors defined in the ClusterQueue: [on-demand spot]"
    )


async def test_no_strict_fifo(gated: Any) -> None:
    cq = cluster_queue(concurrentAdmissionPolicy=TRY, queueingStrategy="StrictFIFO")
    assert await denial(gated, cq) == (
        'spec.queueingStrategy: Invalid value: "StrictFIFO": StrictFIFO queueing strategy cannot be '
        "used when ConcurrentAdmissionPolicy is defined"
    )


async def test_gate_off_checks_nothing_but_immutability(serve: Any) -> None:
    server = await serve(KueueWebhooks().webhooks())
    await admit(server, cluster_queue(concurrentAdmissionPolicy=TRY, queueingStrategy="StrictFIFO"))
    assert (
        await denial(server, cluster_queue(), old=cluster_queue(concurrentAdmissionPolicy=TRY))
        == "spec.concurrentAdmissionPolicy: Invalid value: field is immutable"
    )


async def test_no_resource_group_is_not_one(gated: Any) -> None:
    """Kueue: "ConcurrentAdmissionPolicy with empty ResourceGroups"."""
    assert await denial(gated, cluster_queue(concurrentAdmissionPolicy=TRY, resourceGroups=[])) == (
        "spec.resourceGroups: Invalid value: 0: must have exactly one ResourceGroup when "
        "ConcurrentAdmissionPolicy is defined"
    )
