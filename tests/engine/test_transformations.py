"""The Configuration's ``resources`` block in the engine: excluded prefixes and transformations,
as Kueue's ``dropExcludedResources`` and ``applyResourceTransformations``."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from kadmit.engine import Engine
from kadmit.engine.transformations import REPLACE, ResourceTransformation, ResourceTransformations

from .conftest import (
    T0,
    admitted_names,
    cluster_queue,
    flavor,
    local_queue,
    pending_by_name,
    pod_set,
    workload,
)


def engine_with(rules: ResourceTransformations, *groups: dict[str, Any]) -> Engine:
    engine = Engine(resource_transformations=rules)
    for obj in (flavor("f"), flavor("credits"), cluster_queue("cq", list(groups)), local_queue("lq", "cq")):
        engine.upsert(obj)
    return engine


def group(flavor_name: str, **quota: Any) -> dict[str, Any]:
    return {
        "coveredResources": list(quota),
        "flavors": [
            {"name": flavor_name, "resources": [{"name": k, "nominalQuota": v} for k, v in quota.items()]}
        ],
    }


def usage(decisions: Any, name: str) -> dict[str, str]:
    [reservation] = [r for r in decisions.reservations if r.workload[1] == name]
    return dict(reservation.admission["podSetAssignments"][0]["resourceUsage"])


def test_retained_input_and_its_output_both_count() -> None:
    # Kueue's shared-quota sample: cpu is charged as itself and as cpu_credits.
    rules = ResourceTransformations(
        transformations=[ResourceTransformation("cpu", {"cpu_credits": Fraction(1)})]
    )
    engine = engine_with(rules, group("f", cpu=9), group("credits", cpu_credits=10))
    engine.upsert_workload(workload("a", pod_sets=[pod_set(3, requests={"cpu": "1"})]))
    engine.upsert_workload(workload("b", created=1, pod_sets=[pod_set(4, requests={"cpu": "1500m"})]))
    decisions = engine.schedule(T0)
    assert usage(decisions, "a") == {"cpu": "3", "cpu_credits": "3"}
    # b fits the 6 cpu left, but a pod's 1.5 credits count as 2 (rounded up as Kueue's
    # ResourceValue): 8 credits, 7 left
    assert pending_by_name(decisions)["b"] == (
        "WaitingForQuota",
        "couldn't assign flavors to pod set main: "
        "insufficient unused quota for cpu_credits in flavor credits, 1 more needed",
    )


def test_replace_drops_the_input_and_multiply_by_scales_the_outputs() -> None:
    gpu = ResourceTransformation(
        "nvidia.com/gpu",
        {"gpu-memory": Fraction(16), "gpu-slots": Fraction(1, 2)},
        REPLACE,
        multiply_by="cpu",
    )
    engine = engine_with(
        ResourceTransformations(transformations=[gpu]),
        group("f", cpu=8, **{"gpu-memory": 256, "gpu-slots": 8}),
    )
    engine.upsert_workload(workload("w", pod_sets=[pod_set(1, requests={"cpu": "2", "nvidia.com/gpu": "3"})]))
    # 3 gpu times 2 cpu = 6 units: 96 gpu-memory, 3 gpu-slots; nvidia.com/gpu itself is not asked for
    assert usage(engine.schedule(T0), "w") == {"cpu": "2", "gpu-memory": "96", "gpu-slots": "3"}


def test_negative_outputs_are_allowances_summed_then_floored_at_zero() -> None:
    rules = ResourceTransformations(
        transformations=[
            ResourceTransformation("cpu", {"units": Fraction(2)}, REPLACE),
            ResourceTransformation("memory", {"units": Fraction(-1, 2**30)}, REPLACE),
        ]
    )
    engine = engine_with(rules, group("f", units=10))
    engine.upsert_workload(workload("small", pod_sets=[pod_set(1, requests={"cpu": "1", "memory": "1Gi"})]))
    engine.upsert_workload(
        workload("mem", created=1, pod_sets=[pod_set(1, requests={"cpu": "1", "memory": "8Gi"})])
    )
    decisions = engine.schedule(T0)
    assert usage(decisions, "small") == {"units": "1"}  # 2 - 1
    assert usage(decisions, "mem") == {"units": "0"}  # 2 - 8: never below zero


def test_excluded_prefixes_leave_resources_out_of_quota() -> None:
    rules = ResourceTransformations(excluded_prefixes=["example.com/"])
    engine = engine_with(rules, group("f", cpu=4))
    engine.upsert_workload(
        workload("w", pod_sets=[pod_set(2, requests={"cpu": "1", "example.com/nic": "1"})])
    )
    assert admitted_names(engine.schedule(T0)) == ["w"]
    plain = engine_with(ResourceTransformations(), group("f", cpu=4))
    plain.upsert_workload(workload("w", pod_sets=[pod_set(2, requests={"cpu": "1", "example.com/nic": "1"})]))
    assert pending_by_name(plain.schedule(T0))["w"][0] == "NoMatchingFlavor"


def test_an_input_is_transformed_once() -> None:
    with pytest.raises(ValueError, match="two transformations of cpu"):
        ResourceTransformations(
            transformations=[
                ResourceTransformation("cpu", {}),
                ResourceTransformation("cpu", {"x": Fraction(1)}),
            ]
        )
    with pytest.raises(ValueError, match="Retain or Replace"):
        ResourceTransformation("cpu", {}, "Drop")
