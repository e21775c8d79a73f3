"""What a check plugin answers: one of four verdicts, as Kueue's AdmissionCheckState names them.

A plugin never writes the Workload itself; it returns a verdict, and the runner turns it into
the ``status.admissionChecks[]`` entry (state, message, lastTransitionTime, podSetUpdates,
requeueAfterSeconds) and writes it with conflict retries. A check that owns a field of the
Workload's status beside its state (MultiKueue: where the copies went, which worker won) names
it in the verdict's ``status``, and it lands in the same write as the state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kadmit.workload import PENDING, READY, REJECTED, RETRY

STATES = (PENDING, READY, RETRY, REJECTED)

STATUS_FIELDS = ("clusterName", "nominatedClusterNames")
"""The Workload status fields Kueue leaves to admission-check controllers (MultiKueue's); the
rest (conditions, admission, the check states themselves) belong to Kueue."""


class _SetsStatus:
    """What the verdicts that may set Workload status fields (:class:`Ready`, :class:`Pending`)
    share: their ``status`` is checked once, when the verdict is made."""

    status: Mapping[str, Any]

    def __post_init__(self) -> None:
        unknown = sorted(set(self.status) - set(STATUS_FIELDS))
        if unknown:
            raise ValueError(f"{type(self).__name__}.status may set only {', '.join(STATUS_FIELDS)}; "
                             f"got {', '.join(unknown)}")


@dataclass(frozen=True)
class PodSetUpdate:
    """What Kueue merges into one pod set's template when the job starts (purely additive)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()

    def to_api(self) -> dict[str, Any]:
        """The ``PodSetUpdate`` as the Workload API spells it; empty fields are left out."""
        out: dict[str, Any] = {"name": self.name}
        if self.labels:
            out["labels"] = dict(self.labels)
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        if self.node_selector:
            out["nodeSelector"] = dict(self.node_selector)
        if self.tolerations:
            out["tolerations"] = [dict(t) for t in self.tolerations]
        return out


@dataclass(frozen=True)
class Ready(_SetsStatus):
    """The workload passes this check; ``pod_set_updates`` are applied to its pods at start.
    ``status``: fields of :data:`STATUS_FIELDS` to set in the same write (None removes one)."""

    message: str = ""
    pod_set_updates: tuple[PodSetUpdate, ...] = ()
    status: Mapping[str, Any] = field(default_factory=dict)

    state = READY


@dataclass(frozen=True)
class Pending(_SetsStatus):
    """Not decided yet. ``recheck_after`` (seconds) asks the runner to evaluate again then.
    ``status``: as :class:`Ready`'s."""

    message: str = ""
    recheck_after: float | None = None
    pod_set_updates: tuple[PodSetUpdate, ...] = ()
    status: Mapping[str, Any] = field(default_factory=dict)

    state = PENDING


@dataclass(frozen=True)
class Retry:
    """Cannot pass now: Kueue evicts the workload, frees its quota and requeues it after ``after`` s."""

    message: str
    after: float | None = None

    state = RETRY

    def __post_init__(self) -> None:
        if self.after is not None and self.after < 0:
            raise ValueError(f"Retry.after must be >= 0, got {self.after}")


@dataclass(frozen=True)
class Rejected:
    """Will never pass: Kueue deactivates the workload until a user reactivates it."""

    message: str

    state = REJECTED


Verdict = Ready | Pending | Retry | Rejected
