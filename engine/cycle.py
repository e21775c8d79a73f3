"""The scheduling cycle: heads nominated, flavors assigned, reservations and preemptions."""

from __future__ import annotations

import gc
import sys
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, field

from kadmit.engine.concurrent_admission import (
    ADMISSION_GATED,
    BELOW_LAST_ACCEPTABLE,
    BLOCKED_ON_PREEMPTION_GATES,
    FLAVOR_MIGRATION,
    GATED_MESSAGE,
    MORE_FAVORABLE_ADMITTED,
    PENDING_MIGRATION,
    PREEMPTION_GATED,
    admitted_sibling,
    migration_allowed,
    migration_message,
)
from kadmit.engine.decisions import (
    Decisions,
    Eviction,
    Pending,
    Preemption,
    Reservation,
    condition,
)
from kadmit.engine.entry import Entry, WalkMemory
from kadmit.engine.fair_sharing import (
    Tournament,
    fair_targets,
)
from kadmit.engine.flavors import (
    FIT,
    NO_CANDIDATES,
    PREEMPT,
    RECLAIM,
    Assignment,
    FlavorAssigner,
    FlavorMemory,
)
from kadmit.engine.model import (
    ANY,
    LOWER_PRIORITY,
    NEVER,
    ClusterQueue,
    FlavorResource,
    WorkloadKey,
)
from kadmit.engine.preemption import HUMAN_REASON, Preemptor, Simulation, Target, find_targets
from kadmit.engine.queues import ClusterQueueQueue, Queued
from kadmit.engine.quota import QuotaNode, add_usage, available, borrowing_level, lowest_fitting_subtree
from kadmit.engine.reasons import (
    MISCONFIGURED,
    PENDING_EVALUATION,
    WAITING_FOR_PODS_READY,
    WAITING_FOR_PREEMPTED,
)
from kadmit.engine.reporting import Reporting
from kadmit.engine.slices import SliceAssignment, assign_slice

Nominated = tuple[list[Target], int] | int
"""The victim search of a head nominated with Preempt (Kueue computes the targets, and the
borrowing level after them, in ``nominate``): the victims and the tree's usage version when
they were found, or :data:`NO_VICTIMS_FOUND` when there were none (an int: nothing for the
cyclic garbage collector to track, for the many heads that wait)."""
NO_VICTIMS_FOUND = 0
"""A head that needs preemption and found no victims when nominated: it is not searched again
in its cycle, whatever the cycle's earlier heads did (Kueue skips an entry in Preempt mode with
no ``preemptionTargets``; it recomputes only targets that overlap another preemptor's). Usage
claimed by earlier preemptors would otherwise make their own queues' workloads its victims."""
Head = tuple[int, int, int, float, str, int, Entry, Assignment, int, int, str, int, Nominated | None]
_NO_VICTIMS: list[Target] = []
_NO_PRIORITIES: dict[int, dict[FlavorResource, int]] = {}
"""Shared, never changed: a search that found nothing."""
"""A nominated head: its sort key — 0 for a preemptor whose victims left (else 1), borrowing
level, then the queue order (-priority, timestamp, uid) — and nomination index (ties keep the
nomination order, and sorting never compares entries); then the entry, its assignment and
slack, the tree's consumed quota at nomination, the ClusterQueue, and the call that nominated it.
A flat tuple: a round sorts a thousand of them, and nested keys cost a fifth more. Last, for a
head that needs preemption, the victims found when it was nominated."""


@dataclass(slots=True)
class _Progress:
    """Where a cycle stands between two calls of :meth:`Cycle.schedule` when its budget ran out."""

    live: list[str]
    """This round's ClusterQueues, in name order."""
    nominated: int = 0
    """How many of them had their head nominated."""
    heads: list[Head] = field(default_factory=list)
    turns: Iterator[Head] | None = None
    """The heads in the order they are decided, once the whole round is nominated."""
    still: list[str] = field(default_factory=list)
    """Queues with more to try in the next round."""
    rounds: int = 0
    """Rounds completed."""
    victims: list[Entry] = field(default_factory=list)
    """The workloads this round's preemptors evict: later victim searches of the round see them
    gone (Kueue's ``fits`` removes the cycle's ``preemptedWorkloads``)."""
    claims: list[tuple[QuotaNode, dict[FlavorResource, int]]] = field(default_factory=list)
    """Usage held for preemptors until the cycle ends, so that what their victims free is theirs
    (and by blocked StrictFIFO heads that cannot be sure to reclaim what they lend)."""
    held: list[tuple[QuotaNode, dict[FlavorResource, int]]] = field(default_factory=list)
    """Usage held back until the round ends by heads that cannot be sure to reclaim what they
    lend (a round is what a Kueue scheduling cycle is)."""
    nodes: dict[str, QuotaNode] = field(default_factory=dict)
    """The tree the cycle runs on: a rebuild between calls ends it."""


NO_LONGER_FITS = "Workload no longer fits after processing another workload"
"""Kueue's message for a head that fitted when nominated, but not once earlier heads of the
cycle took their quota."""

CANDIDATES_PER_HEAD = 8
"""A victim search is charged one head of a call's budget per this many workloads it may look at."""


PEERS_PER_HEAD = 8
"""Telling a parked shape's peers why they wait costs about an eighth of evaluating a head each:
that many count as one head against a call's budget, so a call stays short however many wait."""


class Cycle(Reporting):
    """One scheduling cycle: Kueue's admission loop over the ClusterQueue heads."""

    _progress: _Progress | None = None
    """The cycle in progress, when the previous call stopped at its budget."""

    _search_memo: tuple[int, dict[Hashable, list[Target]]] | None = None
    """Fair-sharing victim searches of the current call that other preemptors may share
    (:func:`fair_targets`' ``memo``), with the call they were made in."""

    def schedule(self, now: float) -> Decisions:
        """One scheduling cycle at time ``now`` (POSIX seconds): admit as many as fit.

        A cycle evaluates at most ``heads_per_call`` heads per call (a nomination and a decision
        count one each); when it stops there, ``decisions.more`` is True and the next call goes
        on where it stopped, so that successive calls decide exactly what one unbounded call
        would have, given no new input. Input between the calls is taken into account: a head
        nominated before it is nominated again before it is decided.

        The cyclic garbage collector is paused for the call. A cycle allocates its decisions,
        which must survive until the caller has written them; a collection in the middle of it
        promotes them and, once enough pile up, runs full collections over the whole model — a
        third of a cycle's time at 50,000 workloads. After the call the collector handles them
        in one young-generation pass; what the cycle discards is freed by reference counting
        as usual, so only cyclic garbage waits, and not past the call."""
        collecting = gc.isenabled()
        if collecting:
            gc.disable()
        try:
            return self._schedule(now)
        finally:
            if collecting:
                gc.enable()

    def _schedule(self, now: float) -> Decisions:
        progress = self._progress
        if progress is not None and (self._dirty or progress.nodes is not self._nodes):
            progress = None  # the configuration changed: the queues were rebuilt, start afresh
        if self._dirty:
            self._rebuild()
        self._calls += 1
        decisions = Decisions()
        if progress is None:
            self._cycle += 1
            self._release_backoff(now, decisions)
            self._evaluate_checks(now, decisions)
            self._report_unrouted(now, decisions)
            self._report_parked_arrivals(now, decisions)
            live = [name for name, q in self._queues.items() if name not in self._inactive and not q.blocked]
            live.sort()
            progress = _Progress(live, nodes=self._nodes, claims=self._standing_claims())
        for node, usage in (*progress.claims, *progress.held):
            add_usage(node, usage)
            self._touch(node.name)
        budget = self.heads_per_call if self.heads_per_call is not None else sys.maxsize
        try:
            decisions.more = self._run(progress, budget, now, decisions)
        finally:
            for node, usage in (*progress.claims, *progress.held):
                add_usage(node, usage, -1)
                self._touch(node.name)
        self._progress = progress if decisions.more else None
        if not decisions.more:
            self._report_unblocked(now, decisions)
        return decisions

    def _run(self, progress: _Progress, budget: int, now: float, decisions: Decisions) -> bool:
        """Rounds of one head per ClusterQueue until no queue has anything left to try; False
        when the cycle is over, True when ``budget`` ran out first."""
        queues = self._queues
        while progress.live:
            if progress.turns is None:
                live = progress.live
                while progress.nominated < len(live):
                    name = live[progress.nominated]
                    queue = queues[name]
                    entry = queue.head()
                    if entry is None:  # nothing to try: costs no budget (an idle cycle)
                        progress.nominated += 1
                        continue
                    if budget <= 0:
                        return True
                    budget -= 1
                    progress.nominated += 1
                    budget -= self._nominate(entry, name, queue, progress, now, decisions)
                progress.heads.sort()
                progress.turns = self._in_turn(progress.heads)
            turns = progress.turns
            while True:
                if budget <= 0:
                    return True
                head = next(turns, None)
                if head is None:
                    break
                budget -= 1
                if head[11] <= self._input_in(head[10]):  # nominated before its tree's latest input
                    budget -= 1
                    head = self._renominate(head, progress, now, decisions)
                    if head is None:
                        continue
                budget -= self._decide(head, progress, now, decisions)
            for node, usage in progress.held:
                add_usage(node, usage, -1)
                self._touch(node.name)
            progress.held = []
            progress.victims = []
            still = set(progress.still)
            progress.rounds += 1
            if self.max_rounds is not None and progress.rounds >= self.max_rounds:
                still = set()
            progress.live = [name for name in progress.live if name in still]  # still in name order
            progress.nominated = 0
            progress.heads = []
            progress.turns = None
            progress.still = []
        return False

    def _nominate(
        self,
        entry: Queued,
        name: str,
        queue: ClusterQueueQueue,
        progress: _Progress,
        now: float,
        decisions: Decisions,
    ) -> int:
        """Assign flavors to the head of ``name``'s queue, to be decided in this round's order;
        the budget a victim search took beyond the head's own unit."""
        assert isinstance(entry, Entry)
        if not self._nominate_ok(entry, name, queue, now, decisions):
            if queue.head() is not None and not queue.blocked and queue.sticky is None:
                progress.still.append(name)
            return 0
        assignment, slack = self._assign(entry, name)
        version = self._consumed.get(self._root_of[name], 0)
        nominated: Nominated | None = None
        level = assignment.borrowing
        cost = 0
        if assignment.mode == PREEMPT or assignment.mode == RECLAIM:
            if not self.fair_sharing and self._own_queue_cannot_free_enough(entry, name, assignment):
                # The common case of a full queue, with no tuples for the collector to count.
                nominated = NO_VICTIMS_FOUND
                level = self._level_without_victims(name, assignment)
            else:
                nominated, level, cost = self._nominate_targets(entry, name, assignment)
        # A preemptor whose victims have just left goes first, so that the quota it freed
        # is not taken by the victims requeued beside it (no preemption ping-pong).
        priority, timestamp, uid = entry.order
        heads = progress.heads
        heads.append(
            (
                0 if entry.preempted else 1,
                level,
                priority,
                timestamp,
                uid,
                len(heads),
                entry,
                assignment,
                slack,
                version,
                name,
                self._calls,
                nominated,
            )
        )
        return cost

    def _renominate(self, head: Head, progress: _Progress, now: float, decisions: Decisions) -> Head | None:
        """Workloads changed between the call that nominated ``head`` and this one: nominate its
        queue's head again (the same entry, unless it left), keeping its turn."""
        entry, name = head[6], head[10]
        queue = self._queues[name]
        if queue.head() is not entry:
            progress.still.append(name)  # it left the queue, or another came first: next round
            return None
        if not self._nominate_ok(entry, name, queue, now, decisions):
            if queue.head() is not None and not queue.blocked and queue.sticky is None:
                progress.still.append(name)
            return None
        assignment, slack = self._assign(entry, name)
        version = self._consumed.get(self._root_of[name], 0)
        nominated, _, _ = self._nominate_targets(entry, name, assignment)
        return (*head[:6], entry, assignment, slack, version, name, self._calls, nominated)

    def _nominate_targets(
        self, entry: Entry, name: str, assignment: Assignment
    ) -> tuple[Nominated | None, int, int]:
        """For a head that needs preemption: its victims, and the borrowing level it is ordered
        by (Kueue's ``borrowAfterPreemptions``: the level once its victims are gone, or at
        today's usage when there are none); with the budget the search took."""
        if assignment.mode not in (PREEMPT, RECLAIM):
            return None, assignment.borrowing, 0
        targets, cost = self._targets(entry, name, assignment)
        if not targets:
            return NO_VICTIMS_FOUND, self._level_without_victims(name, assignment), cost
        node = self._nodes[name]
        usage = assignment.usage
        with Simulation(self._nodes) as simulation:  # rare: the level once they are gone
            for target in targets:
                simulation.remove(target.workload)
            level = max((lowest_fitting_subtree(node, fr, v)[0] for fr, v in usage.items()), default=0)
        return (targets, self._versions.get(self._root_of[name], 0)), level, cost

    def _level_without_victims(self, name: str, assignment: Assignment) -> int:
        """The borrowing level of a head that needs preemption and has no victims: at today's
        usage (the assigner left it 0 where the request is within nominal)."""
        node = self._nodes[name]
        nominal = node.nominal
        usage = assignment.usage
        level = assignment.borrowing
        for fr in assignment.needs_preemption:
            value = usage.get(fr, 0)
            if value <= nominal.get(fr, 0):
                found = borrowing_level(node, fr, value)
                if found > level:
                    level = found
        return level

    def _nominated_targets(
        self, name: str, assignment: Assignment, nominated: Nominated | None, progress: _Progress
    ) -> list[Target] | None:
        """The victims found at nomination, if they still make the head fit once they and this
        round's earlier victims are gone (Kueue's ``fits``); None: they no longer do; ``[]``:
        there were none (and there will be none this cycle), or they overlap this round's victims
        (then search again, as Kueue's ``RecomputeAssignmentUponPreemptionTargetsOverlap`` does)."""
        if nominated is None or isinstance(nominated, int):  # NO_VICTIMS_FOUND
            return _NO_VICTIMS
        targets = nominated[0]
        if nominated[1] == self._versions.get(self._root_of[name], 0) and not progress.victims:
            return targets  # nothing changed since they were found
        gone = {v.key for v in progress.victims}
        for target in targets:
            victim = target.workload
            if victim.key in gone or victim.reserved_in is None:
                return _NO_VICTIMS
        with Simulation(self._nodes) as simulation:
            for victim in progress.victims:
                if victim.reserved_in in self._nodes:
                    simulation.remove(victim)
            for target in targets:
                simulation.remove(target.workload)
            fits = self._still_fits(name, assignment)
        return targets if fits else None

    def _decide(self, head: Head, progress: _Progress, now: float, decisions: Decisions) -> int:
        """Reserve, preempt for, or leave pending one nominated head; the budget it took beyond
        its own unit (a victim search's)."""
        entry, assignment, slack, version, name = head[6:11]
        queue = self._queues[name]
        mode = assignment.mode
        if (
            mode == FIT
            and self._consumed.get(self._root_of[name], 0) - version > slack
            and not self._still_fits(name, assignment)
        ):
            # Earlier decisions of this round took the room: Kueue skips the head for this
            # cycle and tries it again in the next (here: the next round).
            decisions.attempts_inadmissible += 1
            self._pending(entry, name, "WaitingForQuota", NO_LONGER_FITS, now, decisions)
            progress.still.append(name)
            return 0
        if mode == FIT:
            if self.block_admission and self._not_ready:
                self._pending(
                    entry,
                    name,
                    WAITING_FOR_PODS_READY,
                    "waiting for all admitted workloads to be in PodsReady condition",
                    now,
                    decisions,
                )
                queue.blocked = True  # until the admitted workloads' pods are ready
                self._awake.discard(self._root_of[name])
                return 0
            if self.concurrent_admission and entry.wl.parent_uid and self._migrate(
                entry, name, queue, assignment, progress, now, decisions
            ):
                return 0
            self._admit(entry, name, assignment, now, decisions)
            decisions.attempts_success += 1
            progress.still.append(name)
            return 0
        if mode in (PREEMPT, RECLAIM):
            nominated = head[12]
            found = self._nominated_targets(name, assignment, nominated, progress)
            if found is None:  # Kueue's fits failed: earlier heads took the room, next round
                decisions.attempts_inadmissible += 1
                self._pending(entry, name, "WaitingForQuota", NO_LONGER_FITS, now, decisions)
                progress.still.append(name)
                return 0
            if found:
                targets, cost = found, 0
            elif isinstance(nominated, int):  # NO_VICTIMS_FOUND
                targets, cost = _NO_VICTIMS, 0  # not searched again in its cycle
            else:
                targets, cost = self._targets(entry, name, assignment, progress.victims)
            if targets and self.concurrent_admission and entry.wl.preemption_gated:
                self._gated(entry, name, queue, now, decisions, progress)
                return cost
            if targets:
                progress.victims.extend(t.workload for t in targets if isinstance(t.workload, Entry))
                node = self._nodes[name]
                decisions.attempts_inadmissible += 1
                self._preempt(entry, name, targets, now, decisions)
                add_usage(node, assignment.usage)
                self._touch(name, assignment.usage)
                progress.claims.append((node, assignment.usage))
                self._wait_for_preempted(entry, name, queue, now, decisions)
                queue.blocked = queue.strict_fifo
                return cost
            self._hold_back(entry, name, queue, assignment, progress)
            return cost + self._not_fit(entry, name, queue, assignment, now, decisions, progress.still)
        if assignment.no_candidates:
            self._hold_back(entry, name, queue, assignment, progress)
        return self._not_fit(entry, name, queue, assignment, now, decisions, progress.still)

    def _gated(
        self,
        entry: Entry,
        name: str,
        queue: ClusterQueueQueue,
        now: float,
        decisions: Decisions,
        progress: _Progress,
    ) -> None:
        """Kueue's ``markPreemptionGated``: the head needs to preempt and has victims, but a
        preemption gate is closed (a ConcurrentAdmission variant whose turn to preempt has not
        come): pending ``AdmissionGated`` with ``BlockedOnPreemptionGates=True``, until its gate
        opens (a Workload update, which wakes its queue)."""
        decisions.attempts_inadmissible += 1
        if entry.reported != (ADMISSION_GATED, GATED_MESSAGE):
            entry.reported = (ADMISSION_GATED, GATED_MESSAGE)
            conditions = [
                condition("QuotaReserved", "False", ADMISSION_GATED, GATED_MESSAGE, now),
                condition(BLOCKED_ON_PREEMPTION_GATES, "True", PREEMPTION_GATED, GATED_MESSAGE, now),
            ]
            decisions.pending.append(
                Pending(entry.key, name, ADMISSION_GATED, GATED_MESSAGE, conditions, entry.wl)
            )
        queue.park(entry, ADMISSION_GATED, GATED_MESSAGE, shared=False)
        self._awake.discard(self._root_of[name])
        progress.still.append(name)

    def _more_favorable_admitted(self, entry: Entry, name: str) -> bool:
        cq = self.cluster_queues[name]
        holders = self._holders.get(name, {}).values()
        return admitted_sibling(entry.wl, cq, holders, more_favorable=True) is not None

    def _migrate(
        self,
        entry: Entry,
        name: str,
        queue: ClusterQueueQueue,
        assignment: Assignment,
        progress: _Progress,
        now: float,
        decisions: Decisions,
    ) -> bool:
        """A variant that fits while a sibling on a less preferred flavor is Admitted: evict
        that sibling and wait for its quota (Kueue's ``issueMigration``), or stay pending when
        the policy's ``lastAcceptableFlavorName`` ranks this flavor below it. False: no such
        sibling, admit as usual."""
        cq = self.cluster_queues[name]
        sibling = admitted_sibling(entry.wl, cq, self._holders.get(name, {}).values(), more_favorable=False)
        if sibling is None:
            return False
        decisions.attempts_inadmissible += 1
        if not migration_allowed(entry.wl, cq):
            self._pending(entry, name, PENDING_EVALUATION, BELOW_LAST_ACCEPTABLE, now, decisions)
            queue.park(entry, PENDING_EVALUATION, BELOW_LAST_ACCEPTABLE, shared=False)
            self._awake.discard(self._root_of[name])
            progress.still.append(name)
            return True
        message = migration_message(entry.wl.uid)
        if not sibling.evicted:
            sibling.evicted = True
            conditions = [condition("Evicted", "True", FLAVOR_MIGRATION, message, now)]
            decisions.evictions.append(Eviction(sibling.key, FLAVOR_MIGRATION, message, None, conditions))
        entry.targets = frozenset((sibling.key,))
        node = self._nodes[name]
        add_usage(node, assignment.usage)  # what the sibling frees is this variant's
        self._touch(name, assignment.usage)
        progress.claims.append((node, assignment.usage))
        self._pending(entry, name, WAITING_FOR_PREEMPTED, PENDING_MIGRATION, now, decisions)
        queue.sticky = None if queue.strict_fifo else entry
        return True

    def _standing_claims(self) -> list[tuple[QuotaNode, dict[FlavorResource, int]]]:
        """What the blocked StrictFIFO heads hold back in this cycle (dropped once their queue
        is unblocked or another workload heads it)."""
        claims = []
        for name, (entry, usage) in list(self._standing.items()):
            queue = self._queues.get(name)
            if queue is None or not queue.blocked or name in self._inactive or queue.head() is not entry:
                del self._standing[name]
                continue
            claims.append((self._nodes[name], usage))
        return claims

    def _hold_back(
        self, entry: Entry, name: str, queue: ClusterQueueQueue, assignment: Assignment, progress: _Progress
    ) -> None:
        """Kueue's ``reserveCapacityForUnreclaimablePreempt``: a head that needs preemption but
        found no candidates keeps the quota it would use, up to its nominal quota (up to its
        borrowing limit when it borrows), for the rest of the cycle, unless its queue can always
        reclaim what it lends (``reclaimWithinCohort: Any``). Otherwise a lower-priority workload
        of another queue could take it now, and the queue might never get it back."""
        cq = self.cluster_queues[name]
        if cq.preemption.reclaim_within_cohort == ANY or not assignment.usage:
            return
        node = self._nodes[name]
        usage = assignment.usage
        borrows = any(lowest_fitting_subtree(node, fr, value)[0] > 0 for fr, value in usage.items())
        held: dict[FlavorResource, int] = {}
        for fr, value in usage.items():
            nominal = node.nominal.get(fr, 0)
            used = node.usage.get(fr, 0)
            if borrows:
                limit = node.borrowing_limit.get(fr)
                amount = value if limit is None else min(value, nominal + limit - used)
            else:
                amount = min(value, nominal - used)
            if amount > 0:
                held[fr] = amount
        if not held:
            return
        add_usage(node, held)
        self._touch(name, held)
        if queue.strict_fifo:  # tried again in every cycle while it stays blocked
            progress.claims.append((node, held))
            self._standing[name] = (entry, held)
        else:
            progress.held.append((node, held))

    def _in_turn(self, heads: list[Head]) -> Iterator[Head]:
        """Heads in the order they are decided: sorted (classical), or one fair-sharing
        tournament at a time, each seeing the usage the previous admissions left."""
        if not self.fair_sharing:
            yield from heads
            return
        yield from (h for h in heads if h[0] == 0)
        remaining = {h[10]: h for h in heads if h[0] != 0}
        contenders = {name: (h[6], h[7].usage) for name, h in remaining.items()}
        order = Tournament(contenders, self._nodes, self._shares)
        input_at = self._input_at
        while order:
            if self._input_at != input_at:  # a workload may have changed (its priority): rank afresh
                input_at = self._input_at
                order.forget()
            yield remaining.pop(order.pop())

    def _still_fits(self, name: str, assignment: Assignment) -> bool:
        node = self._nodes[name]
        return all(value <= available(node, fr) for fr, value in assignment.usage.items())

    def _not_fit(
        self,
        entry: Entry,
        name: str,
        queue: ClusterQueueQueue,
        assignment: Assignment,
        now: float,
        decisions: Decisions,
        still: list[str],
    ) -> int:
        """Leave ``entry`` pending (and park its shape); the budget its peers' telling took."""
        reason = assignment.reason or "WaitingForQuota"
        message = assignment.message
        decisions.attempts_inadmissible += 1
        self._pending(entry, name, reason, message, now, decisions)
        self._awake.discard(self._root_of[name])
        if queue.strict_fifo:
            queue.blocked = True
            return 0
        told = self._park(queue, entry, name, reason, message, now, decisions)
        still.append(name)
        return told // PEERS_PER_HEAD

    def _nominate_ok(
        self, entry: Entry, name: str, queue: ClusterQueueQueue, now: float, decisions: Decisions
    ) -> bool:
        self._awake.discard(self._root_of[name])  # whatever happens next, this tree may wait on an event
        wl = entry.wl
        if not self._selected(name, wl.namespace):
            message = "workload namespace doesn't match ClusterQueue selector"
            self._pending(entry, name, MISCONFIGURED, message, now, decisions)
            self._park(queue, entry, name, MISCONFIGURED, message, now, decisions)
            return False
        if wl.invalid_resources:  # Kueue's ValidateResources: its own, not its shape's
            self._pending(entry, name, MISCONFIGURED, wl.invalid_resources, now, decisions)
            queue.park(entry, MISCONFIGURED, wl.invalid_resources, shared=False)
            return False
        if wl.check_states and any(c.state in ("Retry", "Rejected") for c in wl.check_states):
            message = "The workload has failed admission checks"
            self._pending(entry, name, PENDING_EVALUATION, message, now, decisions)
            queue.park(entry, PENDING_EVALUATION, message, shared=False)
            return False
        if self.concurrent_admission and wl.parent_uid and self._more_favorable_admitted(entry, name):
            self._pending(entry, name, PENDING_EVALUATION, MORE_FAVORABLE_ADMITTED, now, decisions)
            queue.park(entry, PENDING_EVALUATION, MORE_FAVORABLE_ADMITTED, shared=False)
            return False
        if entry.targets:
            # A victim still holding quota is waited for only while its eviction stands: one whose
            # eviction was not written (the engine was set back) is preempted again.
            alive = frozenset(
                k
                for k in entry.targets
                if (e := self._entries.get(k)) is not None and e.reserved_in and e.evicted
            )
            entry.targets = alive
            if alive:
                self._wait_for_preempted(entry, name, queue, now, decisions)
                queue.blocked = True
                return False
        return True

    def _wait_for_preempted(
        self, entry: Entry, name: str, queue: ClusterQueueQueue, now: float, decisions: Decisions
    ) -> None:
        """The head waits for its victims to release their quota and keeps its turn meanwhile
        (sticky; a StrictFIFO queue keeps it by staying blocked instead)."""
        self._pending(
            entry,
            name,
            WAITING_FOR_PREEMPTED,
            "Waiting for the preempted workloads to release their quota",
            now,
            decisions,
        )
        queue.sticky = None if queue.strict_fifo else entry

    def _assign(self, entry: Entry, name: str) -> tuple[Assignment, int]:
        """Flavors for ``entry`` on ``name`` against today's usage, with the room a Fit leaves
        (its slack; -1: unknown, check again before admitting once others took quota)."""
        replaced = self._replaced_slice(entry, name)
        if replaced is not None:
            return self._assign_slice(entry, replaced, name), -1
        if name in self._fixed_flavor_cqs:
            bucket = entry.bucket
            template = bucket.memo if bucket is not None else None
            if template is None:
                template = self._templates.get((name, entry.shape))
                ClusterQueueQueue.remember(entry, template)
            if template is not None:
                fast = self._assigners[name].reassess(template)
                if fast is not None:
                    return fast
        cq = self.cluster_queues[name]
        node = self._nodes[name]

        def oracle(fr: FlavorResource, value: int) -> tuple[int, int]:
            pre = Preemptor(cq, node, entry.wl.priority, entry.timestamp, {fr: value})
            if self.fair_sharing:
                holders = self._holders_in_tree(name, True)
                targets = fair_targets(pre, [fr], holders, self._shares, self.preemption_strategies)
            else:
                targets = find_targets(pre, [fr], lambda others: self._holders_in_tree(name, others))
            if not targets:
                return NO_CANDIDATES, lowest_fitting_subtree(node, fr, value)[0]
            with Simulation(self._nodes) as simulation:  # Kueue's borrowAfterPreemptions
                for target in targets:
                    simulation.remove(target.workload)
                level = lowest_fitting_subtree(node, fr, value)[0]
            mode = PREEMPT if any(t.workload.reserved_in == name for t in targets) else RECLAIM
            return mode, level

        assigner = self._assigners[name]
        assigner.oracle = oracle
        assigner.allowed = entry.wl.allowed_flavors if self.concurrent_admission else None
        partial_allowed = any(ps.min_count for ps in entry.wl.pod_sets)
        assigner.always_simulate = partial_allowed
        full = entry.wl.wanted_counts()
        walking = name not in self._fixed_flavor_cqs  # one flavor per group: nothing to remember
        if assigner.allowed is not None:
            walking = False  # a variant's walk is its allowed flavors, always from the first
        memory = self._walk_start(entry, name) if walking else None
        assignment = assigner.assign(entry.wl.pod_sets, full, memory)
        if assignment.mode < PREEMPT and partial_allowed:
            partial = self._partial(entry, assigner, memory)
            if partial is not None:
                assignment = partial
        if walking:
            generation = self._generation(name)
            entry.walk = WalkMemory(self._cycle, name, generation, memory, assignment.last_tried)
        if (
            assignment.mode >= PREEMPT  # complete: every pod set has its (only possible) flavors
            and name in self._fixed_flavor_cqs
            and not partial_allowed
        ):
            self._templates[(name, entry.shape)] = assignment
            ClusterQueueQueue.remember(entry, assignment)
        return assignment, -1

    def _replaced_slice(self, entry: Entry, name: str) -> Entry | None:
        """The slice ``entry`` replaces when it holds quota in ``name`` and is not being evicted
        (Kueue's ``ReplacedWorkloadSlice``); None: ``entry`` is assigned as any other workload."""
        key = entry.wl.replaces
        if key is None or key[0] != entry.wl.namespace:
            return None
        old = self._entries.get(key)
        if old is None or old.reserved_in != name or old.evicted or old.wl.admission is None:
            return None
        return old

    def _assign_slice(self, entry: Entry, old: Entry, name: str) -> SliceAssignment:
        admission = old.wl.admission
        assert admission is not None
        return assign_slice(
            entry.wl.pod_sets,
            admission.pod_set_assignments,
            old.charged,
            old.key,
            self._nodes[name],
            self._assigners[name].covers_pods,
            self._assigners[name].may_preempt,
        )

    def _generation(self, name: str) -> int:
        """Kueue's ``AllocatableResourceGeneration``: advances when the queue's quotas change or
        quota is given back anywhere in its tree."""
        return self._generations.get(name, 0) + self._freed.get(self._root_of.get(name, ""), 0)

    def _walk_start(self, entry: Entry, name: str) -> FlavorMemory | None:
        """Where this attempt's flavor walks start (contract §5.3 step 3, ``LastTriedFlavorIdx``).

        The memory of the previous attempt is dropped when it was made on another ClusterQueue,
        or is older than the preceding cycle while the queue's quotas changed since (Kueue's
        ``lastAssignmentOutdated``). A second assignment within one cycle (earlier admissions
        took the room) starts where the cycle's first one did."""
        walk = entry.walk
        if walk is None:
            return None
        if walk.cluster_queue != name or (
            walk.cycle < self._cycle - 1 and self._generation(name) > walk.generation
        ):
            entry.walk = None
            return None
        return walk.start if walk.cycle == self._cycle else walk.last

    def _partial(
        self, entry: Entry, assigner: FlavorAssigner, memory: FlavorMemory | None
    ) -> Assignment | None:
        """Partial admission: the largest counts ≥ minCount that fit (Kueue's binary search), from
        the counts less reclaimable pods down."""
        sets = entry.wl.pod_sets
        wanted = entry.wl.wanted_counts()
        pairs = list(zip(sets, wanted, strict=True))
        least = [min(ps.min_count, count) if ps.min_count else count for ps, count in pairs]
        total = sum(count - low for count, low in zip(wanted, least, strict=True))
        if total <= 0:
            return None

        def counts_for(k: int) -> list[int]:
            return [count - (count - low) * k // total for count, low in zip(wanted, least, strict=True)]

        best: Assignment | None = None
        low, high = 1, total
        while low <= high:
            mid = (low + high) // 2
            attempt = assigner.assign(sets, counts_for(mid), memory)
            if attempt.mode >= PREEMPT:
                best = attempt
                high = mid - 1
            else:
                low = mid + 1
        return best

    def _holders_in_tree(
        self, name: str, others: bool = True
    ) -> list[tuple[QuotaNode, ClusterQueue, Iterable[Entry]]]:
        """The preemptor's own queue plus every borrowing queue of its tree, with their holders.

        Only a borrowing queue can lose workloads to another queue, so the rest is skipped; the
        list is cached per root until usage in that tree changes."""
        if not others:
            own = self._holders.get(name)
            return [(self._nodes[name], self.cluster_queues[name], own.values())] if own else []
        out: list[tuple[QuotaNode, ClusterQueue, Iterable[Entry]]] = []
        for cq_name in self._searched_queues(name):
            holders = self._holders.get(cq_name)
            if holders:
                out.append((self._nodes[cq_name], self.cluster_queues[cq_name], holders.values()))
        return out

    def _searched_queues(self, name: str) -> list[str]:
        """The names of :meth:`_holders_in_tree`'s queues (holders or not): ``name`` and the
        borrowing queues of its tree, cached per root until usage in that tree changes."""
        root = self._root_of[name]
        version = self._versions.get(root, 0)
        cached = self._borrowing_cache.get(root)
        if cached is None or cached[0] != version:
            borrowing = []
            for cq_name in self._roots.get(root, ()):
                node = self._nodes[cq_name]
                subtree = node.subtree
                if any(v > subtree.get(fr, 0) for fr, v in node.usage.items()):
                    borrowing.append(cq_name)
            cached = (version, borrowing)
            self._borrowing_cache[root] = cached
        return cached[1] if name in cached[1] else [name, *cached[1]]

    def _own_queue_cannot_free_enough(self, entry: Entry, name: str, assignment: Assignment) -> bool:
        """Classical preemption only within the queue (borrowWithinCohort Never and the queue at
        or above nominal): even evicting every eligible workload of the queue would not do."""
        cq = self.cluster_queues[name]
        policy = cq.preemption
        if policy.borrow_within_cohort != NEVER:
            return False
        node = self._nodes[name]
        parent = node.parent
        if parent is not None and parent.parent is not None and policy.reclaim_within_cohort != NEVER:
            return False  # deeper than a flat cohort: it may reclaim by hierarchical advantage
        usage, nominal = node.usage, node.nominal
        for fr in assignment.needs_preemption or assignment.usage:
            if usage.get(fr, 0) >= nominal.get(fr, 0):
                break
        else:
            return False  # below nominal on everything it needs
        if policy.within_cluster_queue == NEVER:
            return True
        ceiling = self._victim_ceiling(entry, cq)
        for fr, value in assignment.usage.items():
            if value > available(node, fr) + self._held_below(name, ceiling, fr):
                return True
        return False

    def _own_may_yield(self, entry: Entry, cq: ClusterQueue, needed: Iterable[FlavorResource]) -> bool:
        """Whether ``cq``'s own workloads may hold a candidate for ``entry``: some of a priority
        its ``withinClusterQueue`` lets ``entry`` take hold something ``needed``. Read from the
        queue's usage by priority, not workload by workload: most searches of a full tree in
        which no queue borrows end here (a search would find its candidates among the queue's
        own workloads only)."""
        if cq.preemption.within_cluster_queue == NEVER:
            return False
        ceiling = self._victim_ceiling(entry, cq)
        return any(self._held_below(cq.name, ceiling, fr) > 0 for fr in needed)

    def _held_below(self, name: str, ceiling: int, fr: FlavorResource) -> int:
        """What the workloads of queue ``name`` with a priority below ``ceiling`` hold of ``fr``
        (from the queue's usage by priority): at most what preempting them within it frees."""
        held = 0
        for priority, used in self._priority_usage.get(name, _NO_PRIORITIES).items():
            if priority < ceiling:
                held += used.get(fr, 0)
        return held

    @staticmethod
    def _victim_ceiling(entry: Entry, cq: ClusterQueue) -> int:
        """Workloads of the queue with a priority below this may be preempted by ``entry``."""
        if cq.preemption.within_cluster_queue == LOWER_PRIORITY:
            return entry.wl.priority
        return entry.wl.priority + 1

    def _targets(
        self, entry: Entry, name: str, assignment: Assignment, gone: list[Entry] | None = None
    ) -> tuple[list[Target], int]:
        """The victims that make ``entry`` fit (none: it cannot), and what the search cost in
        heads' worth of a call's budget: a search looks at the workloads holding quota in the
        borrowing queues of the tree, which can take a thousand heads' time. ``gone``: victims
        of this round's earlier preemptions, counted as gone (and not to be taken again)."""
        if not gone:
            if not self.fair_sharing and self._own_queue_cannot_free_enough(entry, name, assignment):
                return _NO_VICTIMS, 0  # the common case of a full queue: no search at all
            return self._search(entry, name, assignment, None)
        excluded = {victim.key for victim in gone}
        with Simulation(self._nodes) as simulation:
            for victim in gone:
                if victim.reserved_in in self._nodes:
                    simulation.remove(victim)
            found = self._search(entry, name, assignment, excluded)
        self._touch(name)  # the cache of borrowing queues may hold the simulated usage
        return found

    def _search(
        self, entry: Entry, name: str, assignment: Assignment, excluded: set[WorkloadKey] | None
    ) -> tuple[list[Target], int]:
        def holders(others: bool) -> list[tuple[QuotaNode, ClusterQueue, Iterable[Entry]]]:
            found = self._holders_in_tree(name, others)
            if not excluded:
                return found
            # Only the queues that hold an excluded workload are filtered (a search looks at
            # every holder of the borrowing queues; the excluded are a round's few victims).
            queues: set[str | None] = set()
            for key in excluded:
                held = self._entries.get(key)
                if held is None:  # unknown here: filter every queue
                    return [(n, c, [w for w in ws if w.key not in excluded]) for n, c, ws in found]
                queues.add(held.reserved_in)
            return [
                (n, c, [w for w in ws if w.key not in excluded]) if c.name in queues else (n, c, ws)
                for n, c, ws in found
            ]

        if excluded and not self.fair_sharing and self._own_queue_cannot_free_enough(entry, name, assignment):
            return _NO_VICTIMS, 0
        if entry.wl.replaces is not None:  # a Workload slice never preempts the slice it replaces
            excluded = {*(excluded or ()), entry.wl.replaces}
        cq = self.cluster_queues[name]
        needed = assignment.needs_preemption or assignment.usage
        # What a search costs: every holder of the queues it looks at, whether or not excluded.
        all_holders = self._holders
        held = 0
        others_hold = False
        for queue_name in self._searched_queues(name):
            count = len(all_holders.get(queue_name) or ())
            held += count
            if count and queue_name != name:
                others_hold = True
        cost = held // CANDIDATES_PER_HEAD
        if not others_hold and not self._own_may_yield(entry, cq, needed):
            # No other queue of the tree borrows, and none of its own may go: most searches of
            # a full tree end here, before any list of candidates is made.
            return _NO_VICTIMS, cost
        pre = Preemptor(cq, self._nodes[name], entry.wl.priority, entry.timestamp, assignment.usage)
        lq_usage = self._candidate_usage if self.admission_fair_sharing is not None else None
        if self.fair_sharing:
            strategies = self.preemption_strategies
            # The tree's state for fair_targets' memo: its usage and workloads (the version, within
            # this call: what happens between calls, such as sampling, moves no version) and the
            # victims counted as gone.
            root = self._root_of[name]
            gone = frozenset(excluded) if excluded else None
            state = (self._calls, root, self._versions.get(root, 0), gone)
            kept = self._search_memo
            if kept is None or kept[0] != self._calls:
                kept = self._search_memo = (self._calls, {})
            listed = holders(True)
            found = fair_targets(pre, needed, listed, self._shares, strategies, lq_usage, kept[1], state)
            return found, cost
        return find_targets(pre, needed, holders, lq_usage), cost

    def _admit(
        self, entry: Entry, name: str, assignment: Assignment, now: float, decisions: Decisions
    ) -> None:
        cq = self.cluster_queues[name]
        self._dequeue(entry)
        flavors = assignment.flavor_names()
        charge, replaced = assignment.usage, None
        if isinstance(assignment, SliceAssignment):
            charge, replaced = assignment.charge, self._replace_slice(entry, assignment.replaced)
        self._reserve(entry, name, charge, flavors, now)  # shared, never changed in place
        self._push_penalty(entry, name, assignment.usage)
        entry.assumed = True
        entry.evicted_at = None
        entry.preempted = False
        entry.reported = None
        entry.view = assignment
        entry.walk = None
        checks = (
            sorted(rule.name for rule in cq.admission_checks if rule.applies_to(flavors))
            if name in self._checked_cqs
            else []
        )
        entry.admitted = not checks
        self._index(entry)  # reserving (not Admitted yet while it has checks)
        entry.evicted = False
        if entry.admitted:
            self._not_ready.add(entry.key)  # just admitted: its pods are not ready yet
        pod_sets = []
        for psa in assignment.status_pod_sets():  # copies: the formatted template is shared by a shape
            pod_sets.append(
                {
                    "name": psa["name"],
                    "flavors": psa["flavors"].copy(),
                    "resourceUsage": psa["resourceUsage"].copy(),
                    "count": psa["count"],
                }
            )
        admission = {"clusterQueue": name, "podSetAssignments": pod_sets}
        conditions = [
            condition("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {name}", now)
        ]
        if not checks:
            conditions.append(condition("Admitted", "True", "Admitted", "The workload is admitted", now))
        previous_conditions = entry.wl.conditions
        if previous_conditions:
            for kind in ("Evicted", "Preempted", BLOCKED_ON_PREEMPTION_GATES):
                previous = previous_conditions.get(kind)
                if previous is not None and previous.status == "True":
                    conditions.append(
                        condition(kind, "False", "QuotaReserved", f"Previously: {previous.message}", now)
                    )
        borrowing = assignment.borrowing > 0
        decisions.reservations.append(
            Reservation(entry.key, name, admission, conditions, checks, entry.admitted, borrowing, replaced)
        )

    def _preempt(
        self, entry: Entry, name: str, targets: list[Target], now: float, decisions: Decisions
    ) -> None:
        preemptor_path = self._nodes[name].path()
        entry.targets = frozenset(t.workload.key for t in targets)
        entry.preempted = True
        for target in targets:
            victim = target.workload
            assert isinstance(victim, Entry)
            if victim.evicted:
                continue
            victim.evicted = True
            victim_path = self._nodes[victim.reserved_in or name].path()
            job_uid = entry.wl.job_uid or "UNKNOWN"
            message = (
                f"Preempted to accommodate a workload (UID: {entry.wl.uid}, JobUID: {job_uid}) due to "
                f"{HUMAN_REASON[target.reason]}; preemptor path: {preemptor_path}; "
                f"preemptee path: {victim_path}"
            )
            conditions = [
                condition("Evicted", "True", "Preempted", message, now),
                condition("Preempted", "True", target.reason, message, now),
            ]
            decisions.preemptions.append(
                Preemption(victim.key, entry.key, target.reason, message, conditions)
            )
