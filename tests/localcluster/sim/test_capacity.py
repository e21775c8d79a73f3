"""The autoscaler's arithmetic: what fits where, and how many Nodes of which pool to add."""

from __future__ import annotations

import pytest

from kadmit.localcluster.sim.capacity import CapacityError, SimNode, expand, fits_existing, plan_scale_up
from kadmit.localcluster.sim.nodeconfig import NodePool

from .conftest import Obj

CPU = NodePool("cpu", ("cpu-0",), 3, allocatable={"cpu": "4", "memory": "8Gi", "pods": "110"})
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU = NodePool("gpu", ("gpu-0",), 2, taints=(GPU_TAINT,),
               allocatable={"cpu": "8", "nvidia.com/gpu": "2", "pods": "110"})


def pod(cpu: str = "1", gpu: str | None = None, tolerate: bool = False) -> Obj:
    requests = {"cpu": cpu}
    if gpu:
        requests["nvidia.com/gpu"] = gpu
    spec: Obj = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if tolerate:
        spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    return spec


def test_existing_nodes_take_what_fits_largest_first() -> None:
    node = SimNode(CPU.node("cpu-0"))
    left = fits_existing(expand([(pod("1"), 2), (pod("3"), 1)]), [node])
    assert [requests["cpu"] for _, requests in left] == [1]  # the 3-CPU Pod went first
    assert node.pods == 2


def test_scale_up_picks_the_pool_that_can_host_the_pod() -> None:
    plan = plan_scale_up(expand([(pod("1", gpu="1", tolerate=True), 3)]), (CPU, GPU), {"cpu": 1, "gpu": 0})
    assert plan.new_nodes == {"gpu": 2}  # two GPUs per node
    cpu_plan = plan_scale_up(expand([(pod("3"), 2)]), (CPU, GPU), {"cpu": 1, "gpu": 1})
    assert cpu_plan.new_nodes == {"cpu": 2} and cpu_plan.total == 2


def test_scale_up_stops_at_max_count_and_says_why() -> None:
    with pytest.raises(CapacityError, match="pool cpu: at its maximum of 3 nodes"):
        plan_scale_up(expand([(pod("4"), 3)]), (CPU,), {"cpu": 1})
    with pytest.raises(CapacityError, match="untolerated taint"):
        plan_scale_up(expand([(pod("1", gpu="1"), 1)]), (GPU,), {"gpu": 0})
    with pytest.raises(CapacityError, match="Insufficient cpu"):
        plan_scale_up(expand([(pod("64"), 1)]), (CPU,), {"cpu": 0})
