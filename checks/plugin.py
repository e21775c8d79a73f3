"""The check plugin: a small class with a controller name and an ``evaluate`` coroutine.

Everything else (watches, which workloads to look at, conflicts, retries, timers, the
AdmissionCheck's ``Active`` condition unless the plugin says more) is the runner's. A minimal
plugin::

    class BusinessHours(AdmissionCheckPlugin[None]):
        controller_name = "example.com/business-hours"

        async def evaluate(self, workload, context):
            if 9 <= context.now.hour < 17:
                return Ready()
            return Pending("outside business hours", recheck_after=600)
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypeVar

from kadmit.checks.events import COMPONENT
from kadmit.checks.verdict import Verdict
from kadmit.kube import Client, EventRecorder, Obj, Resource
from kadmit.kube.informer import IndexFunc, Informer

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

P = TypeVar("P")


def plugin_settings(configuration: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """A plugin's own block of the Configuration: ``admissionChecks.settings.<name>`` (``{}`` if none).

    ``name`` is the plugin's entry-point name; kadmit has already checked that the block is an object.
    """
    block = (configuration.get("admissionChecks") or {}).get("settings") or {}
    settings = block.get(name) or {}
    return settings if isinstance(settings, Mapping) else {}


class ParametersError(ValueError):
    """The object ``AdmissionCheck.spec.parameters`` names is missing or malformed."""


class ClusterView:
    """Read access to the watched objects, plus the API for the writes a plugin must make itself
    and ``events`` to tell users about them (``kubectl describe``)."""

    def __init__(self, watches: dict[Resource, Informer], api: Client,
                 requeue: Callable[[str, str, float], None] | None = None,
                 events: EventRecorder | None = None) -> None:
        self._watches = watches
        self.api = api
        self._requeue = requeue
        self.events = events or EventRecorder(api, COMPONENT)

    def requeue(self, namespace: str, name: str, after: float = 0.0) -> None:
        """Evaluate the workload again in ``after`` seconds, for changes no watch shows (another service)."""
        if self._requeue is None:
            raise RuntimeError("this cluster view belongs to no runner")
        self._requeue(namespace, name, after)

    def list(self, kind: Resource, namespace: str | None = None) -> list[Obj]:
        return self._watch(kind).list(namespace)

    def get(self, kind: Resource, namespace: str | None, name: str) -> Obj | None:
        return self._watch(kind).get(namespace, name)

    def add_index(self, kind: Resource, name: str, fn: IndexFunc) -> None:
        """Keep the watched objects of ``kind`` findable by the values ``fn`` returns (e.g.
        ``kadmit.kube.objects.reference_uids``), instead of scanning :meth:`list` per event."""
        self._watch(kind).add_index(name, fn)

    def by_index(self, kind: Resource, name: str, value: str) -> builtins.list[Obj]:
        """The watched objects of ``kind`` whose index ``name`` has ``value``."""
        return self._watch(kind).by_index(name, value)

    def _watch(self, kind: Resource) -> Informer:
        try:
            return self._watches[kind]
        except KeyError:
            raise KeyError(f"{kind} is not watched: declare it in the plugin's `watches`") from None


@dataclass(frozen=True)
class ActiveCondition:
    """The AdmissionCheck's ``Active`` condition as a plugin judges it."""

    active: bool
    reason: str
    message: str


@dataclass(frozen=True)
class ActiveContext(Generic[P]):
    """What a plugin may know when it judges whether one of its AdmissionChecks is active."""

    check_name: str
    parameters: P | None  # parsed, when ``problem`` is None
    problem: str | None  # why ``spec.parameters`` cannot be resolved or parsed, if it cannot
    now: datetime
    cluster: ClusterView


@dataclass(frozen=True)
class CheckContext(Generic[P]):
    """What a plugin may know when it evaluates one check of one workload."""

    check_name: str  # the AdmissionCheck's name
    admission_check: Obj  # the AdmissionCheck object
    state: Obj | None  # the workload's current entry for this check, if any
    parameters: P | None  # parsed from the object spec.parameters references, if the plugin has a type
    now: datetime  # timezone-aware UTC
    cluster: ClusterView

    @property
    def current_state(self) -> str:
        return str((self.state or {}).get("state") or "Pending")

    @property
    def retry_count(self) -> int:
        return int((self.state or {}).get("retryCount") or 0)


class AdmissionCheckPlugin(Generic[P]):
    """Subclass, set ``controller_name``, implement :meth:`evaluate`.

    Optional class attributes:

    * ``parameters_kind`` and :meth:`parse_parameters`: the cluster-scoped kind that
      ``AdmissionCheck.spec.parameters`` must reference; the runner resolves and parses it,
      keeps the AdmissionCheck ``Active=False`` (reason ``BadParametersRef``) while it cannot,
      and re-evaluates the workloads when the object changes.
    * ``watches``: other kinds the verdict depends on; a change of such an object re-evaluates
      the workloads :meth:`affected` names (by default: those in the object's namespace, or
      all for a cluster-scoped object).
    * ``reevaluate_ready``: also evaluate checks already ``Ready`` (a Ready check's verdict is
      otherwise final until Kueue resets it to Pending on eviction).
    * ``namespaced_watches``: kinds from ``watches`` to watch in one namespace only (the
      plugin's own, e.g. where its Secrets live), so it needs no cluster-wide read access.
    * ``state_events``: the runner records an ``AdmissionCheckUpdated`` Event on each change of
      the check's state, as Kueue's ProvisioningRequest controller does; False for a plugin that
      tells users itself (Kueue's MultiKueue records its own ``MultiKueue`` Events instead).

    Optional coroutines: :meth:`start` and :meth:`stop` bracket each time the runner runs (one
    term of leadership, when the runner is leader-gated); :meth:`active_condition` decides the
    AdmissionCheck's ``Active`` condition instead of the runner's parameters-only rule.

    A plugin that takes settings overrides :meth:`from_configuration`, which receives the
    Configuration file kadmit runs with.
    """

    controller_name: ClassVar[str]
    parameters_kind: ClassVar[Resource | None] = None
    watches: tuple[Resource, ...] = ()  # instances may set their own (from their configuration)
    reevaluate_ready: ClassVar[bool] = False
    state_events: ClassVar[bool] = True
    namespaced_watches: Mapping[Resource, str] = MappingProxyType({})  # instances may set their own

    @classmethod
    def from_configuration(
        cls, configuration: Mapping[str, Any], registry: CollectorRegistry | None = None
    ) -> Self:
        """The plugin for kadmit's Kueue ``Configuration`` document (``{}`` when there is no file).

        ``registry`` is where the plugin's own metrics belong (kadmit's ``/metrics``). The default
        ignores both and calls the class with no arguments; raise ``ValueError`` with the field's
        path for a setting the plugin refuses, and kadmit stops at start with that message.
        """
        return cls()

    async def start(self, cluster: ClusterView) -> None:
        """The runner is synced and about to evaluate: begin background work (connections, loops)."""

    async def stop(self) -> None:
        """The runner stopped (shutdown, or leadership lost): end background work and write nothing more."""

    async def active_condition(
        self, admission_check: Obj, context: ActiveContext[P]
    ) -> ActiveCondition | None:
        """The AdmissionCheck's ``Active`` condition; None keeps the runner's rule (parameters only).

        Called again whenever the parameters object or an object of a kind in ``watches`` changes.
        """
        return None

    async def evaluate(self, workload: Obj, context: CheckContext[P]) -> Verdict:
        raise NotImplementedError

    async def release(self, workload: Obj, cluster: ClusterView) -> None:
        """The workload lost its reservation, was evicted, finished or was deleted: drop what you hold."""

    def parse_parameters(self, obj: Obj) -> P:
        """Turn the parameters object into the plugin's typed parameters; raise ParametersError if bad."""
        raise NotImplementedError(f"{type(self).__name__} declares parameters_kind but no parse_parameters")

    def affected(self, kind: Resource, obj: Obj, cluster: ClusterView) -> Iterable[tuple[str, str]] | None:
        """Workloads ``(namespace, name)`` to re-evaluate after ``obj`` changed; None for the default."""
        return None


AnyPlugin = AdmissionCheckPlugin[Any]

