"""A namespace's LimitRanges, as Kueue applies them to a Workload's pod sets.

Kueue fills a container's missing limits and requests from its namespace's LimitRange defaults
before it counts the quota a Workload needs (``AdjustResources``), and keeps a Workload pending,
``Misconfigured``, while a container or a whole pod breaks a LimitRange's ``min`` or ``max``
(``ValidateLimitRange``): the pods could never be created. Several LimitRanges are summarised
into one per limit type (``pkg/util/limitrange``): the least ``max``, the greatest ``min``, the
first ``default`` and ``defaultRequest``. The ResourceQuota check charges pods with the same
defaults, which LimitRanger will give them.

Values are kept as the API holds them (quantity strings or numbers) and, for comparisons, in
the engine's units (:func:`kadmit.engine.quantity.to_milli`, Kueue's ``ResourceValue``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kadmit.engine.quantity import parse_exact, to_milli

POD = "Pod"
CONTAINER = "Container"
PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
LIMIT_TYPES = (POD, CONTAINER, PERSISTENT_VOLUME_CLAIM)

# Kueue's messages (pkg/util/limitrange, pkg/workload/resources.go).
ABOVE_MAX = "requests must not be above the limitRange max"
BELOW_MIN = "requests must not be below the limitRange min"
LIMIT_RANGE_UNSATISFIED = "resources didn't satisfy LimitRange constraints"

Quantities = Mapping[str, object]


class LimitRangeItem:
    """One entry of a LimitRange's ``spec.limits``, with what the API server defaults in it
    (``SetDefaults_LimitRangeItem``: a Container's missing ``default`` is its ``max``, a missing
    ``defaultRequest`` its ``default``, else its ``min``), so an object read from a cluster and
    one written by hand mean the same."""

    __slots__ = ("default", "default_request", "limit_type", "max", "max_limit_request_ratio", "min")

    def __init__(
        self,
        limit_type: str,
        maximum: Quantities,
        minimum: Quantities,
        default: Quantities,
        default_request: Quantities,
        max_limit_request_ratio: Quantities,
    ) -> None:
        self.limit_type = limit_type
        self.max: dict[str, object] = dict(maximum)
        self.min: dict[str, object] = dict(minimum)
        self.default: dict[str, object] = dict(default)
        self.default_request: dict[str, object] = dict(default_request)
        self.max_limit_request_ratio: dict[str, object] = dict(max_limit_request_ratio)
        if limit_type == CONTAINER:
            for name, value in self.max.items():
                self.default.setdefault(name, value)
            for name, value in self.default.items():
                self.default_request.setdefault(name, value)
            for name, value in self.min.items():
                self.default_request.setdefault(name, value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LimitRangeItem) and self._fields() == other._fields()

    def _fields(self) -> tuple[object, ...]:
        return (
            self.limit_type,
            self.max,
            self.min,
            self.default,
            self.default_request,
            self.max_limit_request_ratio,
        )


class Limits:
    """One limit type's summary over every LimitRange of a namespace."""

    __slots__ = ("default", "default_request", "max", "max_units", "min", "min_units")

    def __init__(self, items: Sequence[LimitRangeItem]) -> None:
        self.max: dict[str, object] = {}
        self.min: dict[str, object] = {}
        self.default: dict[str, object] = {}
        self.default_request: dict[str, object] = {}
        for item in items:
            _merge(self.max, item.max, keep_greater=False)
            _merge(self.min, item.min, keep_greater=True)
            for name, value in item.default.items():
                self.default.setdefault(name, value)
            for name, value in item.default_request.items():
                self.default_request.setdefault(name, value)
        self.max_units = units(self.max)
        self.min_units = units(self.min)


class LimitSummary:
    """A namespace's LimitRanges, summarised per limit type (Kueue's ``limitrange.Summarize``).

    ``items`` come in the order the API lists them: by LimitRange name, then as written."""

    __slots__ = ("container", "default_limits", "default_requests", "pod")

    def __init__(self, items: Iterable[LimitRangeItem]) -> None:
        by_type: dict[str, list[LimitRangeItem]] = {}
        for item in items:
            by_type.setdefault(item.limit_type, []).append(item)
        self.container = Limits(by_type[CONTAINER]) if CONTAINER in by_type else None
        self.pod = Limits(by_type[POD]) if POD in by_type else None
        self.default_limits: dict[str, int] = units(self.container.default) if self.container else {}
        """A container's missing limits, in the engine's units."""
        self.default_requests: dict[str, int] = (
            units(self.container.default_request) if self.container else {}
        )
        """A container's missing requests, in the engine's units."""

    @property
    def empty(self) -> bool:
        """No Container or Pod limits: nothing for a Workload (Kueue lists only those)."""
        return self.container is None and self.pod is None


def summarize(ranges: Mapping[str, Sequence[LimitRangeItem]]) -> LimitSummary | None:
    """The summary of a namespace's LimitRanges by name, or None when none bears on pods."""
    summary = LimitSummary(item for name in sorted(ranges) for item in ranges[name])
    return None if summary.empty else summary


def units(values: Quantities) -> dict[str, int]:
    return {name: to_milli(name, value) for name, value in values.items()}


def _merge(into: dict[str, object], more: Quantities, keep_greater: bool) -> None:
    for name, value in more.items():
        if name not in into or (parse_exact(value) > parse_exact(into[name])) == keep_greater:
            into[name] = value


def greater_keys(values: Mapping[str, int], other: Mapping[str, int]) -> list[str]:
    """Kueue's ``GreaterKeys``: the resources, sorted, both name where ``values`` is greater."""
    if not values or not other:
        return []
    return sorted(name for name, value in values.items() if name in other and value > other[name])


def violations(
    limits: Limits, low: Mapping[str, int], high: Mapping[str, int]
) -> list[tuple[list[str], str]]:
    """What of a container (or a pod) breaks ``limits``: ``high`` (the greater of each request
    and limit) above a ``max``, then ``min`` above ``low`` (the lesser of the two), each as the
    resources it names and Kueue's message."""
    found: list[tuple[list[str], str]] = []
    above = greater_keys(high, limits.max_units)
    if above:
        found.append((above, ABOVE_MAX))
    below = greater_keys(limits.min_units, low)
    if below:
        found.append((below, BELOW_MIN))
    return found
