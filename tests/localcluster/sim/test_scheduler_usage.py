"""The simulated scheduler keeps each Node's use as Pods change, as kube-scheduler's cache does,
instead of summing every bound Pod again in each cycle."""

from __future__ import annotations

from fractions import Fraction

from kadmit.localcluster.sim.scheduler import Scheduler

from .conftest import Obj


def pod(uid: str, node: str = "", cpu: str = "500m", phase: str = "Pending") -> Obj:
    return {
        "metadata": {"name": f"p-{uid}", "namespace": "default", "uid": uid},
        "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": phase},
    }


def cpu_and_pods(scheduler: Scheduler) -> dict[str, tuple[Fraction, int]]:
    return {name: (use.requested.get("cpu", Fraction(0)), use.pods)
            for name, use in scheduler.node_usage().items()}


async def test_node_use_follows_binding_ending_and_deletion() -> None:
    scheduler = Scheduler()
    scheduler._on_pod("ADDED", pod("a"), None)
    assert cpu_and_pods(scheduler) == {}  # not bound yet
    scheduler._on_pod("MODIFIED", pod("a", "n1"), pod("a"))
    scheduler._on_pod("ADDED", pod("b", "n1", cpu="1"), None)
    scheduler._on_pod("ADDED", pod("c", "n2", phase="Running"), None)
    assert cpu_and_pods(scheduler) == {"n1": (Fraction(3, 2), 2), "n2": (Fraction(1, 2), 1)}
    # A relist reports a Pod it already had: counted once.
    scheduler._on_pod("ADDED", pod("b", "n1", cpu="1"), None)
    assert cpu_and_pods(scheduler)["n1"] == (Fraction(3, 2), 2)
    # An ended Pod no longer counts, nor a deleted one.
    scheduler._on_pod("MODIFIED", pod("a", "n1", phase="Succeeded"), pod("a", "n1"))
    scheduler._on_pod("DELETED", pod("c", "n2", phase="Running"), pod("c", "n2", phase="Running"))
    assert cpu_and_pods(scheduler) == {"n1": (Fraction(1), 1)}
    # What a cycle changes in its copy (its own decisions) is not the kept use.
    scheduler.node_usage()["n1"].requested["cpu"] += 5
    assert cpu_and_pods(scheduler) == {"n1": (Fraction(1), 1)}
