"""What the cluster and the Configuration change in what a Workload's pods ask for.

Kueue does not count a pod set's requests as written: ``AdjustResources`` adds the overhead of
the pod's RuntimeClass and the namespace's LimitRange defaults, and ``resources`` in the
Configuration drops and transforms resources. A Workload is read under one
:class:`ResourceAdjustments`; read under another (a LimitRange or RuntimeClass changed), its
pod sets are read again.
"""

from __future__ import annotations

from collections.abc import Mapping

from kadmit.engine.limit_ranges import LimitSummary
from kadmit.engine.transformations import ResourceTransformations


class ResourceAdjustments:
    """A namespace's LimitRanges, the cluster's RuntimeClass overheads and the Configuration's
    ``resources`` rules, as one Workload is read under them."""

    __slots__ = ("limits", "runtime_overheads", "transformations")

    def __init__(
        self,
        limits: LimitSummary | None = None,
        runtime_overheads: Mapping[str, Mapping[str, int]] | None = None,
        transformations: ResourceTransformations | None = None,
    ) -> None:
        self.limits = limits
        self.runtime_overheads: Mapping[str, Mapping[str, int]] = runtime_overheads or {}
        """Per RuntimeClass name, its ``overhead.podFixed`` in the engine's units: the overhead
        of a pod naming it and declaring none (Kueue's ``handlePodOverhead``)."""
        self.transformations = transformations if transformations else None
