"""Flavor assignment and fungibility (Kueue's ``flavorassigner.go``).

For each pod set, the resource groups its requests touch are walked flavor by flavor in list
order. A flavor is skipped when the pod set does not tolerate its taints or its node labels
contradict the pod set's nodeSelector / required node affinity; otherwise every requested
resource gets a *mode* (Fit, Preempt/Reclaim, NoCandidates, NoFit) and the flavor's mode is the
worst of them. ``flavorFungibility`` decides whether to stop at a flavor or keep the best one.

Pod sets naming the same ``topologyRequest.podSetGroupName`` are assigned together: their
requests are summed, a flavor must suit every one of them, and each gets the chosen flavors of
the resources it requests itself (Kueue's ``groupedRequests`` and ``resolvePodSetFlavors``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kadmit.engine.model import (
    MAY_STOP_SEARCH,
    NEVER,
    PREEMPTION_OVER_BORROWING,
    TRY_NEXT_FLAVOR,
    ClusterQueue,
    FlavorResource,
    Obj,
    PodSet,
    ResourceFlavor,
    ResourceGroup,
)
from kadmit.engine.quantity import MILLI, format_milli
from kadmit.engine.quota import (
    QuotaNode,
    available,
    borrowing_level,
    lowest_fitting_subtree,
    potential_available,
)

# Modes, worst first; comparisons use these integers.
NO_FIT = 0
NO_CANDIDATES = 1
PREEMPT = 2
RECLAIM = 3
FIT = 4
MODE_NAMES = {
    NO_FIT: "NoFit",
    NO_CANDIDATES: "NoCandidates",
    PREEMPT: "Preempt",
    RECLAIM: "Reclaim",
    FIT: "Fit",
}

# Pending reasons (granular, as Kueue's UnadmittedWorkloadsObservability writes them).
WAITING_FOR_QUOTA = "WaitingForQuota"
EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
NO_MATCHING_FLAVOR = "NoMatchingFlavor"

FlavorMemory = Sequence[Mapping[str, int]]
"""Kueue's ``LastTriedFlavorIdx``: per pod set, resource → index of the flavor where the last
walk stopped (-1: it went through the last flavor, so the next walk starts at the first)."""

PreemptionOracle = Callable[[FlavorResource, int], tuple[int, int]]
"""Given a flavor/resource and the quantity needed there, PREEMPT, RECLAIM or NO_CANDIDATES,
with the borrowing level once the victims are gone (Kueue's ``SimulatePreemption``)."""


@dataclass(slots=True)
class PodSetFlavors:
    name: str
    count: int
    flavors: dict[str, str]
    usage: dict[str, int]


@dataclass(slots=True, init=False)
class Assignment:
    """The outcome of assigning flavors to every pod set of a workload on one ClusterQueue.

    Its ``__init__`` is written out, as the decisions' are (see :mod:`kadmit.engine.decisions`):
    one is made for each head assessed."""

    mode: int
    pod_sets: list[PodSetFlavors]
    usage: dict[FlavorResource, int]
    borrowing: int
    reason: str
    message: str
    needs_preemption: set[FlavorResource]
    no_candidates: bool
    """NO_FIT only because preemption found no candidates (Kueue's ``noPreemptionCandidates``,
    whose representative mode is Preempt): ``usage`` holds the flavors chosen, and the head may
    reserve capacity for itself (``reserveCapacityForUnreclaimablePreempt``)."""
    last_tried: list[dict[str, int]]
    """Where each pod set's flavor walk stopped, per resource (see :data:`FlavorMemory`)."""
    _status: list[Obj] | None
    _flavor_names: frozenset[str] | None
    _fits: dict[int, Assignment] | None
    """A template's Fit outcomes by borrowing level (see :meth:`FlavorAssigner.reassess`)."""
    _misses: dict[tuple[int, tuple[int, ...], int], Assignment] | None
    """A template's other outcomes by borrowing level and the room left on each flavor/resource."""

    def __init__(
        self,
        mode: int,
        pod_sets: list[PodSetFlavors] | None = None,
        usage: dict[FlavorResource, int] | None = None,
        borrowing: int = 0,
    ) -> None:
        self.mode = mode
        self.pod_sets = [] if pod_sets is None else pod_sets
        self.usage = {} if usage is None else usage
        self.borrowing = borrowing
        self.reason = ""
        self.message = ""
        self.needs_preemption = set()
        self.no_candidates = False
        self.last_tried = []
        self._status = None
        self._flavor_names = None
        self._fits = None
        self._misses = None

    def flavor_names(self) -> frozenset[str]:
        """The flavors assigned (computed once, shared by reassessed copies)."""
        if self._flavor_names is None:
            self._flavor_names = frozenset(f for ps in self.pod_sets for f in ps.flavors.values())
        return self._flavor_names

    def status_pod_sets(self) -> list[Obj]:
        """``status.admission.podSetAssignments`` (computed once, shared by reassessed copies)."""
        if self._status is None:
            self._status = [
                {
                    "name": ps.name,
                    "flavors": dict(sorted(ps.flavors.items())),
                    "resourceUsage": {res: format_milli(res, v) for res, v in sorted(ps.usage.items())},
                    "count": ps.count,
                }
                for ps in self.pod_sets
            ]
        return self._status


def untolerated_taint(pod_set: PodSet, flavor: ResourceFlavor) -> str | None:
    for taint in flavor.node_taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if any(t.tolerates(taint) for t in pod_set.tolerations) or any(
            t.tolerates(taint) for t in flavor.tolerations
        ):
            continue
        return f"untolerated taint {{{taint.key} {taint.value} {taint.effect}}} in flavor {flavor.name}"
    return None


def matches_node_labels(pod_set: PodSet, flavor: ResourceFlavor) -> bool:
    """nodeSelector and required node affinity, restricted to the keys the flavor defines."""
    labels = flavor.node_labels
    for key, value in pod_set.node_selector.items():
        if key in labels and labels[key] != value:
            return False
    if not pod_set.affinity_terms:
        return True
    for term in pod_set.affinity_terms:
        relevant = [req for req in term if req.key in labels]
        if all(req.matches(labels) for req in relevant):
            return True
    return False


def _excluded_by_any(pod_sets: Sequence[PodSet], flavor: ResourceFlavor) -> str | None:
    """Why ``flavor`` does not suit the first of ``pod_sets`` it does not suit (an untolerated
    taint, or node labels its nodeSelector / required node affinity contradict), or None."""
    for pod_set in pod_sets:
        if flavor.node_taints:
            taint = untolerated_taint(pod_set, flavor)
            if taint is not None:
                return taint
        constrained = pod_set.node_selector or pod_set.affinity_terms
        if constrained and flavor.node_labels and not matches_node_labels(pod_set, flavor):
            return f"flavor {flavor.name} doesn't match node affinity"
    return None


def _could_not_assign(names: Sequence[str], text: str) -> str:
    """Kueue's ``Assignment.Message`` for pod sets sharing one status (a pod set group's)."""
    return "; ".join(f"couldn't assign flavors to pod set {name}: {text}" for name in names)


def _pod_set_groups(pod_sets: Sequence[PodSet]) -> list[list[int]]:
    """The indexes of the pod sets of each pod set group, in order of their first pod set."""
    groups_of: dict[str, list[int]] = {}
    for index, pod_set in enumerate(pod_sets):
        key = str(index) if pod_set.group_name is None else pod_set.group_name
        groups_of.setdefault(key, []).append(index)
    return list(groups_of.values())


def pod_set_requests(pod_set: PodSet, count: int, covers_pods: bool) -> dict[str, int]:
    requests = {name: value * count for name, value in pod_set.requests.items()}
    if covers_pods:
        requests["pods"] = count * MILLI
    return requests


class FlavorAssigner:
    """Assigns flavors for one ClusterQueue against the current usage of its quota node."""

    def __init__(
        self,
        cq: ClusterQueue,
        node: QuotaNode,
        flavors: Mapping[str, ResourceFlavor],
        oracle: PreemptionOracle | None,
        fair_sharing: bool = False,
    ) -> None:
        self.fair_sharing = fair_sharing
        """Kueue's ``enableFairSharing``: with fair sharing a queue may preempt while borrowing
        when its ``reclaimWithinCohort`` is not Never (``canPreemptWhileBorrowing``)."""
        self.cq = cq
        self.node = node
        self.flavors = flavors
        self.oracle = oracle
        self.group_of: dict[str, ResourceGroup] = {}
        for group in cq.resource_groups:
            for res in group.covered_resources:
                self.group_of[res] = group
        self.covers_pods = "pods" in self.group_of
        self.always_simulate = False
        """Ask the oracle even for single-flavor groups (partial admission needs the real mode)."""
        self.allowed: tuple[str, ...] | None = None
        """The only flavors the workload being assigned may take (a ConcurrentAdmission
        variant's annotation), or None."""

    def assign(
        self, pod_sets: Sequence[PodSet], counts: Sequence[int], memory: FlavorMemory | None = None
    ) -> Assignment:
        """Flavors for every pod set. With ``memory`` (contract §5.3 step 3), each resource
        group's walk resumes right after the flavor where the previous attempt stopped.

        Pod sets sharing a ``podSetGroupName`` are assigned together, in order of their first
        pod set (a pod set without a group is one of its own, keyed by its index as Kueue keys
        it: a group named after a number joins the pod set of that index, as in Kueue, whose job
        webhooks refuse such names). A group's requests are summed and each resource group
        walked once for the sum, with the memory of the group's first pod set; a flavor must
        suit every pod set of the group. Each pod set then gets the chosen flavors of the
        resources it requests itself, its own usage, and the walk's memory for them. The
        assignments stay in the pod sets' order (Kueue lists them group by group, which is the
        same order unless groups interleave).
        """
        requests_of = [
            pod_set_requests(pod_set, count, self.covers_pods)
            for pod_set, count in zip(pod_sets, counts, strict=True)
        ]
        result = Assignment(mode=FIT)
        result.last_tried = [{} for _ in pod_sets]
        assigned: list[PodSetFlavors | None] = [None] * len(pod_sets)
        for members in _pod_set_groups(pod_sets):
            first = pod_sets[members[0]]
            others = tuple(pod_sets[index] for index in members[1:])
            names = [pod_sets[index].name for index in members]
            if others:
                requests: dict[str, int] = {}
                for index in members:
                    for res, value in requests_of[index].items():
                        requests[res] = requests.get(res, 0) + value
            else:
                requests = requests_of[members[0]]
            groups: list[ResourceGroup] = []
            for res, value in requests.items():
                group = self.group_of.get(res)
                if group is None:
                    if value == 0:
                        continue
                    return self._fail(
                        result, names, NO_MATCHING_FLAVOR, [f"resource {res} unavailable in ClusterQueue"]
                    )
                if group not in groups:
                    groups.append(group)
            remembered = memory[members[0]] if memory is not None and members[0] < len(memory) else {}
            chosen: dict[str, str] = {}
            for group in groups:
                wanted = {res: requests[res] for res in group.covered_resources if res in requests}
                start = next((remembered[res] for res in wanted if res in remembered), -1) + 1
                outcome = self._choose_flavor(first, group, wanted, result.usage, start, others)
                if outcome.tried is not None:
                    for index in members:
                        tried = result.last_tried[index]
                        for res in wanted:
                            if res in requests_of[index]:
                                tried[res] = outcome.tried
                if outcome.mode == NO_FIT:
                    return self._fail(result, names, outcome.reason, outcome.messages)
                result.mode = min(result.mode, outcome.mode)
                result.borrowing = max(result.borrowing, outcome.borrowing)
                result.needs_preemption |= outcome.needs_preemption
                for res in wanted:
                    chosen[res] = outcome.flavor
                    fr = FlavorResource(outcome.flavor, res)
                    result.usage[fr] = result.usage.get(fr, 0) + wanted[res]
                if outcome.mode < FIT and not result.message:
                    result.reason = outcome.reason
                    result.message = _could_not_assign(names, ", ".join(outcome.messages))
            for index in members:
                own = requests_of[index]
                flavors = {res: flavor for res, flavor in chosen.items() if res in own}
                usage = {res: own[res] for res in flavors}
                assigned[index] = PodSetFlavors(pod_sets[index].name, counts[index], flavors, usage)
        result.pod_sets = [ps for ps in assigned if ps is not None]
        if result.mode == NO_CANDIDATES:
            result.mode = NO_FIT
            result.no_candidates = True
        return result

    def reassess(self, template: Assignment) -> tuple[Assignment, int] | None:
        """``template`` again, against today's usage, for a CQ with one flavor per group, with
        the *slack* of a Fit (the least room it leaves over its flavor/resources; -1 otherwise).

        The flavors cannot change, so only the quota checks of :meth:`_evaluate` are redone. The
        outcomes are shared objects, one per borrowing level (and, when it does not fit, per room
        left): a fresh assignment for each head, with its messages formatted anew, was a fifth
        of a cycle's time.
        """
        node = self.node
        used, subtree = node.usage, node.subtree
        level = 0
        slack = -1
        short: list[tuple[FlavorResource, int, int]] | None = None
        frees: list[int] = []
        for fr, value in template.usage.items():
            free = available(node, fr)
            frees.append(free)
            if value <= free:
                if slack < 0 or free - value < slack:
                    slack = free - value
                if used.get(fr, 0) + value > subtree.get(fr, 0):
                    level = max(level, borrowing_level(node, fr, value))
                continue
            if short is None:
                short = []
            short.append((fr, value, free))
        if short is None:
            fits = template._fits
            if fits is None:
                fits = template._fits = {}
            found = fits.get(level)
            if found is None:
                found = Assignment(FIT, template.pod_sets, template.usage, level)
                found._status = template.status_pod_sets()
                found._flavor_names = template.flavor_names()
                fits[level] = found
            return found, slack
        if len(template.pod_sets) > 1:
            return None  # say which pod set failed: the full assignment knows
        mode = FIT
        needs: set[FlavorResource] = set()
        for fr, value, _ in short:
            if self.may_preempt(fr, value):
                needs.add(fr)
                mode = min(mode, PREEMPT)
                if value > node.nominal.get(fr, 0):  # borrows even once its victims are gone
                    level = max(level, borrowing_level(node, fr, value))
            else:
                mode = NO_FIT
        key = (level, tuple(frees), mode)
        misses = template._misses
        if misses is None or len(misses) > 64:  # a handful at a time; bounded all the same
            misses = template._misses = {}
        found = misses.get(key)
        if found is not None:
            return found, -1
        messages = [
            f"insufficient unused quota for {fr[1]} in flavor {fr[0]}, "
            f"{format_milli(fr[1], value - max(free, 0))} more needed"
            for fr, value, free in short
        ]
        result = Assignment(mode, template.pod_sets, template.usage, level if mode != NO_FIT else 0)
        result.reason = WAITING_FOR_QUOTA
        result.message = (
            f"couldn't assign flavors to pod set {template.pod_sets[0].name}: {', '.join(messages)}"
        )
        result.needs_preemption = needs
        misses[key] = result
        return result, -1

    @staticmethod
    def _fail(result: Assignment, names: Sequence[str], reason: str, messages: list[str]) -> Assignment:
        """NoFit, with Kueue's message: a group's status is every one of its pod sets'."""
        result.mode = NO_FIT
        result.reason = reason
        result.message = _could_not_assign(names, ", ".join(sorted(messages)))
        return result

    def _choose_flavor(
        self,
        pod_set: PodSet,
        group: ResourceGroup,
        wanted: Mapping[str, int],
        assigned: Mapping[FlavorResource, int],
        start: int = 0,
        others: Sequence[PodSet] = (),
    ) -> _FlavorOutcome:
        """Walk the group's flavors from ``start``; the outcome's ``tried`` is what to remember.

        ``others``: the rest of ``pod_set``'s pod set group, which the flavor must suit too
        (Kueue's ``checkFlavorForPodSets``: the first pod set it does not suit is reported)."""
        fungibility = self.cq.flavor_fungibility
        best: _FlavorOutcome | None = None
        messages: list[str] = []
        reasons: set[str] = set()
        flavors = group.flavors
        last = len(flavors) - 1
        if start > last:
            start = 0  # the group lost flavors since: walk it all
        for index in range(start, last + 1):
            quotas = flavors[index]
            if self.allowed is not None and quotas.name not in self.allowed:
                messages.append(
                    f"skipping flavor {quotas.name} due to WorkloadAllowedResourceFlavorAnnotation annotation"
                )
                reasons.add(NO_MATCHING_FLAVOR)
                continue
            flavor = self.flavors.get(quotas.name)
            if flavor is None:
                messages.append(f"flavor {quotas.name} not found")
                reasons.add(NO_MATCHING_FLAVOR)
                continue
            taint = untolerated_taint(pod_set, flavor) if flavor.node_taints else None
            if taint is not None:
                messages.append(taint)
                reasons.add(NO_MATCHING_FLAVOR)
                continue
            constrained = pod_set.node_selector or pod_set.affinity_terms
            if constrained and flavor.node_labels and not matches_node_labels(pod_set, flavor):
                messages.append(f"flavor {flavor.name} doesn't match node affinity")
                reasons.add(NO_MATCHING_FLAVOR)
                continue
            if others:
                excluded = _excluded_by_any(others, flavor)
                if excluded is not None:
                    messages.append(excluded)
                    reasons.add(NO_MATCHING_FLAVOR)
                    continue
            outcome = self._evaluate(
                flavor.name, wanted, assigned, len(group.flavors) > 1 or self.always_simulate
            )
            messages.extend(outcome.messages)
            if outcome.mode < FIT:
                reasons.add(outcome.reason)
            if best is None or self._better(outcome, best):
                best = outcome
            if outcome.mode == FIT and outcome.borrowing == 0:
                outcome.tried = -1 if index == last else index
                return outcome
            if outcome.mode in (NO_FIT, NO_CANDIDATES):
                continue
            if outcome.mode in (PREEMPT, RECLAIM) and fungibility.when_can_preempt == TRY_NEXT_FLAVOR:
                continue
            if outcome.borrowing > 0 and fungibility.when_can_borrow == TRY_NEXT_FLAVOR:
                continue
            outcome.tried = -1 if index == last else index
            return outcome
        if best is not None and best.mode == NO_CANDIDATES:
            # Kueue keeps the flavor (representative mode Preempt, no targets): the head may
            # reserve capacity there.
            best.messages = messages
            best.reason = WAITING_FOR_QUOTA
            best.tried = -1
            return best
        if best is None or best.mode == NO_FIT:
            if WAITING_FOR_QUOTA in reasons:
                reason = WAITING_FOR_QUOTA
            elif EXCEEDS_MAX_QUOTA in reasons:
                reason = EXCEEDS_MAX_QUOTA
            else:
                reason = NO_MATCHING_FLAVOR
            failed = _FlavorOutcome("", NO_FIT, 0, reason, messages)
            if best is not None and best.mode == NO_CANDIDATES:  # Kueue remembers the full walk
                failed.tried = -1
            return failed
        best.messages = messages
        best.tried = -1  # the walk went through the last flavor
        return best

    def _better(self, a: _FlavorOutcome, b: _FlavorOutcome) -> bool:
        if self.cq.flavor_fungibility.preference == PREEMPTION_OVER_BORROWING and a.mode > NO_CANDIDATES:
            return (a.borrowing, -a.mode) < (b.borrowing, -b.mode) or b.mode <= NO_CANDIDATES
        return (a.mode, -a.borrowing) > (b.mode, -b.borrowing)

    def _evaluate(
        self, flavor: str, wanted: Mapping[str, int], assigned: Mapping[FlavorResource, int], simulate: bool
    ) -> _FlavorOutcome:
        """Mode of one flavor. Without ``simulate`` (a group with a single flavor, where the mode
        cannot change the choice), a possible preemption is taken as Preempt and the real victim
        search, done once afterwards, decides."""
        node = self.node
        mode = FIT
        level = 0
        messages: list[str] = []
        reason = ""
        needs: set[FlavorResource] = set()
        for res, request in wanted.items():
            fr = FlavorResource(flavor, res)
            previous = assigned.get(fr, 0)
            value = previous + request
            maximum = potential_available(node, fr)
            if value > maximum:
                messages.append(
                    f"insufficient quota for {res} in flavor {flavor}, previously considered podsets "
                    f"requests ({format_milli(res, previous)}) + current podset request "
                    f"({format_milli(res, request)}) > maximum capacity ({format_milli(res, maximum)})"
                )
                return _FlavorOutcome(flavor, NO_FIT, 0, EXCEEDS_MAX_QUOTA, messages)
            free = available(node, fr)
            if value <= free:
                level = max(level, borrowing_level(node, fr, value))
                continue
            messages.append(
                f"insufficient unused quota for {res} in flavor {flavor}, "
                f"{format_milli(res, value - max(free, 0))} more needed"
            )
            res_mode = NO_FIT
            if self.oracle is not None and self.may_preempt(fr, value):
                needs.add(fr)
                if simulate:
                    res_mode, after = self.oracle(fr, value)
                    level = max(level, after)
                else:
                    res_mode = PREEMPT
                    if value > node.nominal.get(fr, 0):  # borrows even once its victims are gone
                        level = max(level, borrowing_level(node, fr, value))
            if res_mode == NO_FIT:
                return _FlavorOutcome(flavor, NO_FIT, 0, WAITING_FOR_QUOTA, messages)
            mode = min(mode, res_mode)
            reason = WAITING_FOR_QUOTA
        return _FlavorOutcome(flavor, mode, level, reason, messages, needs)

    def may_preempt(self, fr: FlavorResource, value: int) -> bool:
        """Kueue's test before simulating preemption in ``fitsResourceQuota``: the queue's own
        nominal quota covers the request, or a subtree below the root holds it (the queue may
        reclaim there), or it may preempt while borrowing (``canPreemptWhileBorrowing``)."""
        policy = self.cq.preemption
        if self.node.nominal.get(fr, 0) >= value:
            return True
        if policy.borrow_within_cohort != NEVER:
            return True
        if self.fair_sharing and policy.reclaim_within_cohort != NEVER:
            return True
        return lowest_fitting_subtree(self.node, fr, value)[1]


@dataclass(slots=True)
class _FlavorOutcome:
    flavor: str
    mode: int
    borrowing: int
    reason: str
    messages: list[str]
    needs_preemption: set[FlavorResource] = field(default_factory=set)
    tried: int | None = None
    """The flavor index to remember (-1 after the last flavor; None: nothing to remember)."""


__all__ = [
    "EXCEEDS_MAX_QUOTA",
    "FIT",
    "MAY_STOP_SEARCH",
    "MODE_NAMES",
    "NO_CANDIDATES",
    "NO_FIT",
    "NO_MATCHING_FLAVOR",
    "PREEMPT",
    "RECLAIM",
    "WAITING_FOR_QUOTA",
    "Assignment",
    "FlavorAssigner",
    "FlavorMemory",
    "PodSetFlavors",
]
