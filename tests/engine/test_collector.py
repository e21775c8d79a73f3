"""The cycle pauses the cyclic garbage collector, and gives the caller back its setting."""

from __future__ import annotations

import gc

from tests.engine.conftest import cluster_queue, flavor, load, local_queue, quotas, workload


def test_schedule_pauses_the_collector_only_for_the_cycle() -> None:
    engine = load(flavor("f"), cluster_queue("cq", quotas({"f": {"cpu": 1}})), local_queue("lq", "cq"))
    engine.upsert(workload("a"))
    engine.upsert(workload("b"))
    assert gc.isenabled()
    engine.schedule(1.0)
    assert gc.isenabled()
    gc.disable()
    try:
        engine.schedule(2.0)
        assert not gc.isenabled()  # the caller's choice is kept
    finally:
        gc.enable()


def test_no_collection_runs_inside_a_cycle() -> None:
    engine = load(flavor("f"), cluster_queue("cq", quotas({"f": {"cpu": 50}})), local_queue("lq", "cq"))
    for i in range(40):
        engine.upsert(workload(f"w{i}"))
    engine.sync()
    collections: list[int] = []

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    threshold = gc.get_threshold()
    gc.callbacks.append(record)
    gc.set_threshold(1)  # a collection at almost every allocation, unless paused
    try:
        decisions = engine.schedule(1.0)
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.remove(record)
    assert len(decisions.reservations) == 40
    assert collections == []
