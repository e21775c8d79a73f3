"""Will these Pods fit, and how many new Nodes of which pool would make them fit?

The autoscaler's arithmetic, kept pure: first-fit of each Pod onto Nodes (existing ones,
then new members of the pools that could host it), with the binder's own filters, so the
capacity it promises is capacity the binder will find.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ..objects import Obj
from ..quantity import Resources, add
from .client import key_of
from .nodeconfig import NodePool
from .placement import node_allocatable, pod_requests, rejections


@dataclass
class SimNode:
    """A Node being filled during a simulation: its object and what is already requested of it."""

    node: Obj
    requested: Resources = field(default_factory=dict)
    pods: int = 0

    def place(self, spec: Obj, requests: Resources) -> bool:
        if rejections(spec, requests, self.node, self.requested, self.pods):
            return False
        add(self.requested, requests)
        self.pods += 1
        return True


@dataclass
class ScaleUp:
    """New Nodes to add, per pool, for the Pods that did not fit on existing Nodes."""

    new_nodes: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.new_nodes.values())


class CapacityError(Exception):
    """The Pods cannot be made to fit; the message says which and why."""


def expand(pod_sets: list[tuple[Obj, int]]) -> list[tuple[Obj, Resources]]:
    """One ``(spec, requests)`` per Pod, largest first, as bin packing wants."""
    pods = [(spec, pod_requests(spec)) for spec, count in pod_sets for _ in range(count)]
    pods.sort(key=lambda p: (-p[1].get("cpu", Fraction(0)), -p[1].get("memory", Fraction(0))))
    return pods


def fits_existing(pods: list[tuple[Obj, Resources]], nodes: list[SimNode]) -> list[tuple[Obj, Resources]]:
    """Place what fits onto ``nodes`` (mutating them); return the Pods left over."""
    left: list[tuple[Obj, Resources]] = []
    for spec, requests in pods:
        if not any(node.place(spec, requests) for node in nodes):
            left.append((spec, requests))
    return left


def plan_scale_up(
    pods: list[tuple[Obj, Resources]], pools: tuple[NodePool, ...], pool_sizes: dict[str, int]
) -> ScaleUp:
    """New Nodes (within each pool's ``max_count``) that host every Pod in ``pods``.

    Raises :class:`CapacityError` naming the first Pod no pool can take.
    """
    plan = ScaleUp()
    added: dict[str, list[SimNode]] = {}
    for spec, requests in pods:
        placed = any(node.place(spec, requests) for nodes in added.values() for node in nodes)
        if placed:
            continue
        reasons: list[str] = []
        for pool in pools:
            candidate = SimNode(pool.node(f"{pool.name}-new"))
            if not candidate.place(spec, requests):
                why = ", ".join(rejections(spec, requests, candidate.node, {}, 0))
                reasons.append(f"pool {pool.name}: {why}")
                continue
            size = pool_sizes.get(pool.name, 0) + plan.new_nodes.get(pool.name, 0)
            if size >= pool.max_count:
                reasons.append(f"pool {pool.name}: at its maximum of {pool.max_count} nodes")
                continue
            plan.new_nodes[pool.name] = plan.new_nodes.get(pool.name, 0) + 1
            added.setdefault(pool.name, []).append(candidate)
            placed = True
            break
        if not placed:
            raise CapacityError("; ".join(reasons) or "no node pools are configured")
    return plan


def sim_nodes(nodes: list[Obj], usage: dict[str, tuple[Resources, int]]) -> list[SimNode]:
    """Existing Nodes with what their Pods already use, in name order."""
    out = []
    for node in sorted(nodes, key=lambda n: key_of(n)[1]):
        requested, pods = usage.get(key_of(node)[1], ({}, 0))
        if node_allocatable(node):
            out.append(SimNode(node, dict(requested), pods))
    return out
