"""A head that needs preemption and finds no victims when it is nominated preempts nothing in
that cycle, as in Kueue: its scheduler skips such an entry (``len(e.preemptionTargets) == 0``,
requeue reason ``PreemptionNoCandidates``) and recomputes the targets only of entries whose
targets overlap another preemptor's (``RecomputeAssignmentUponPreemptionTargetsOverlap``). Usage
claimed by the cycle's earlier preemptors must not turn their own queues' workloads into victims
of a later head of the same cycle (a cascade Kueue never makes); the head tries again next cycle.
"""

from __future__ import annotations

import random
from typing import Any
from unittest.mock import patch

import pytest

from kadmit.engine import Engine
from kadmit.engine.cycle import Cycle
from kadmit.engine.decisions import Decisions
from tests.engine.conftest import interpreted_only, leave_and_finish
from tests.engine.test_fair_search_bound import AFS, _crowded


def _cycles(objects: list[dict[str, Any]], seed: int, fair_sharing: bool) -> tuple[int, int]:
    """Eight cycles over the objects; every head decided checked against what it found when it
    was nominated. Returns (heads decided with no victims at nomination, preemptions)."""
    engine = Engine(  # unbounded: one schedule call is one whole cycle
        fair_sharing=fair_sharing, admission_fair_sharing=AFS if fair_sharing else None, heads_per_call=None
    )
    for obj in objects:
        engine.upsert(obj)
    decided = 0
    real_decide = Cycle._decide

    def decide(self: Cycle, head: Any, progress: Any, now: float, decisions: Decisions) -> int:
        nonlocal decided
        entry, nominated = head[6], head[12]
        before = len(decisions.preemptions)
        cost = real_decide(self, head, progress, now, decisions)
        if isinstance(nominated, int):  # needed preemption, found no victims when nominated
            decided += 1
            taken = [p.victim for p in decisions.preemptions[before:]]
            assert not taken, f"{entry.key} found no victims when nominated, yet preempted {taken}"
        return cost

    rng = random.Random(seed)
    reserved: list[tuple[str, str]] = []
    preemptions = 0
    with patch.object(Cycle, "_decide", decide):
        for cycle in range(8):
            now = 1000.0 + cycle
            if fair_sharing:
                engine.sample_admission_fair_sharing(now)
            decisions = engine.schedule(now)
            preemptions += len(decisions.preemptions)
            leave_and_finish(engine, decisions, reserved, rng)
    return decided, preemptions


@interpreted_only
@pytest.mark.parametrize("fair_sharing", [False, True], ids=["classical", "fair-sharing"])
def test_a_head_with_no_victims_at_nomination_preempts_nothing_in_its_cycle(fair_sharing: bool) -> None:
    decided = preemptions = 0
    for seed in range(0, 240, 3):  # with fair sharing, seeds 114 and 204 cascaded before the rule
        d, p = _cycles(_crowded(seed), seed, fair_sharing)
        decided += d
        preemptions += p
    # The trees reach both sides of the rule: heads that found nothing, and preemptions.
    assert decided >= 10
    assert preemptions >= 300
