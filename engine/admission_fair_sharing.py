"""Admission Fair Sharing (Kueue's ``admissionFairSharing``, KEP 4136): within a ClusterQueue
whose ``spec.admissionScope.admissionMode`` is ``UsageBasedAdmissionFairSharing``, the LocalQueue
that consumed less recently goes first.

Each LocalQueue keeps a :class:`UsageLedger`: its consumed resources, an exponentially decayed
average of its admitted usage (half-life ``usageHalfLifeTime``), plus the *entry penalties* of
workloads reserved but not yet Admitted (``alpha * requests``, where ``alpha`` is the weight one
sampling interval gives to new usage), so that one LocalQueue cannot take several turns before its
usage is sampled again. Its usage, ``sum(resourceWeight * (consumed + penalty)) / weight``, orders
the ClusterQueue's heads before priority and time.

Amounts are kept in nano-units (Kueue rounds them down to 9 decimals). Time is an argument: the
controller samples the ledgers every ``usageSamplingInterval`` with its clock (:meth:`sample`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from kadmit.engine.model import FlavorResource, WorkloadKey
from kadmit.engine.quantity import MILLI, NANO

USAGE_BASED = "UsageBasedAdmissionFairSharing"
NO_ADMISSION_FAIR_SHARING = "NoAdmissionFairSharing"
ADMISSION_MODES = (USAGE_BASED, NO_ADMISSION_FAIR_SHARING)
DEFAULT_SAMPLING_INTERVAL = 300.0
"""``usageSamplingInterval``'s default (5 minutes)."""

Amounts = dict[str, int]
"""Nano-units per resource name."""


@dataclass(frozen=True, slots=True)
class AdmissionFairSharing:
    """The Configuration's ``admissionFairSharing`` block (durations in seconds)."""

    usage_half_life: float = 0.0
    sampling_interval: float = DEFAULT_SAMPLING_INTERVAL
    resource_weights: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.usage_half_life < 0:
            raise ValueError("admissionFairSharing.usageHalfLifeTime: must not be negative")
        if self.sampling_interval <= 0:
            raise ValueError("admissionFairSharing.usageSamplingInterval: must be greater than 0")
        for name, weight in self.resource_weights.items():
            if weight < 0:
                raise ValueError(f"admissionFairSharing.resourceWeights.{name}: must not be negative")

    @property
    def entry_alpha(self) -> float:
        """The share of its requests a workload adds to its LocalQueue's usage when reserved."""
        return alpha_rate(self.sampling_interval, self.usage_half_life)


def alpha_rate(elapsed: float, half_life: float) -> float:
    """The weight ``elapsed`` seconds give to new usage against the decayed old one."""
    if half_life == 0:
        return 0.0
    return 1.0 - math.pow(0.5, elapsed / half_life)


def scaled(amounts: Mapping[str, int], factor: float) -> Amounts:
    """``amounts * factor``, rounded down to the nano-unit (Kueue's ``MulByFloat``)."""
    return {name: math.floor(value * factor) for name, value in amounts.items()}


def merged(a: Mapping[str, int], b: Mapping[str, int]) -> Amounts:
    out = dict(a)
    for name, value in b.items():
        out[name] = out.get(name, 0) + value
    return out


def decayed(old: Mapping[str, int], new: Mapping[str, int], elapsed: float, half_life: float) -> Amounts:
    """``old * (1 - alpha) + new * alpha`` for ``elapsed`` seconds (Kueue's
    ``CalculateDecayedConsumed``); a half-life of 0 keeps the old value (the caller resets)."""
    alpha = alpha_rate(max(0.0, elapsed), half_life)
    return merged(scaled(old, 1 - alpha), scaled(new, alpha))


def from_milli(usage: Mapping[FlavorResource, int]) -> Amounts:
    """A flavor-resource usage in milli-units, summed over flavors, in nano-units."""
    out: Amounts = {}
    for (_, resource), value in usage.items():
        out[resource] = out.get(resource, 0) + value * (NANO // MILLI)
    return out


def weighted_usage(
    consumed: Mapping[str, int], penalty: Mapping[str, int], lq_weight: float, weights: Mapping[str, float]
) -> float:
    """Kueue's ``CalculateUsage``: the LocalQueue's usage that orders its workloads."""
    total = 0.0
    for name in sorted(consumed.keys() | penalty.keys()):
        total += weights.get(name, 1.0) * (consumed.get(name, 0) + penalty.get(name, 0)) / NANO
    if lq_weight <= 0:
        return math.inf
    return total / lq_weight


class UsageLedger:
    """One LocalQueue's consumed resources and its workloads' pending entry penalties."""

    __slots__ = ("consumed", "last_update", "penalties", "pending", "version")

    def __init__(self, consumed: Amounts | None = None, last_update: float | None = None) -> None:
        self.consumed: Amounts = consumed or {}
        self.last_update = last_update
        """When ``consumed`` was last sampled (None: not yet)."""
        self.penalties: dict[WorkloadKey, Amounts] = {}
        self.pending: Amounts = {}
        """The sum of ``penalties``."""
        self.version = 0
        """Bumped when the consumed resources or their time change (the status shows them)."""

    def usage(self, lq_weight: float, weights: Mapping[str, float]) -> float:
        return weighted_usage(self.consumed, self.pending, lq_weight, weights)

    def push(self, key: WorkloadKey, penalty: Amounts) -> None:
        """``key`` reserved quota: its penalty counts until it is Admitted (or never will be)."""
        self.drop(key)
        self.penalties[key] = penalty
        self.pending = merged(self.pending, penalty)

    def drop(self, key: WorkloadKey) -> Amounts:
        """Forget ``key``'s penalty (it will not settle); what it was."""
        penalty = self.penalties.pop(key, None)
        if penalty is None:
            return {}
        pending = self.pending
        for name, value in penalty.items():
            left = pending.get(name, 0) - value
            if left:
                pending[name] = left
            else:
                pending.pop(name, None)
        return penalty

    def sample(self, admitted: Mapping[str, int], now: float, half_life: float) -> None:
        """Decay the consumed resources towards the LocalQueue's admitted usage ``admitted``
        since the last sample (Kueue's LocalQueue reconciler); a half-life of 0 resets them."""
        if half_life == 0:
            self.consumed = {}
        elif self.last_update is not None:
            self.consumed = decayed(self.consumed, admitted, now - self.last_update, half_life)
        if self.last_update is None or now > self.last_update:
            self.last_update = now
        self.version += 1

    def settle(self, key: WorkloadKey, admitted: Mapping[str, int], now: float, half_life: float) -> None:
        """``key`` was Admitted: sample, then fold its penalty into the consumed resources
        (Kueue's workload reconciler, on every transition to Admitted)."""
        if self.last_update is None:
            self.last_update = now
        self.sample(admitted, now, half_life)
        penalty = self.drop(key)
        if penalty:
            self.consumed = merged(self.consumed, penalty)
