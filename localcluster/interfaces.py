"""The seams inside the embedded API server.

The request handlers, the object store, the admission plugins (webhook calls, ResourceQuota)
and the add-ons that run beside the server (simulated controllers, fault injection) are built
separately; these types are the only things they share, so each side can change freely
behind them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from kadmit.localcluster.auth import ADMIN
from kadmit.localcluster.objects import Obj

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


@dataclass(frozen=True)
class AdmissionRequest:
    """One write as admission sees it, before it is persisted (the fields of an AdmissionReview)."""

    operation: Operation
    group: str  # the object's group, "" for the core group
    version: str
    kind: str
    resource: str  # plural, e.g. "jobs"
    subresource: str  # "" or e.g. "status"
    namespace: str | None  # None for cluster-scoped objects
    name: str
    object: Obj | None  # the new object (None on DELETE)
    old_object: Obj | None  # the stored object (None on CREATE)
    dry_run: bool = False
    user: Obj = field(default_factory=ADMIN.info)  # the caller's UserInfo (the admin when auth is off)
    options: Obj | None = None  # CreateOptions / UpdateOptions / DeleteOptions as sent


class AdmissionError(Exception):
    """A denial, or a failed webhook call under failurePolicy Fail.

    ``status`` is the complete ``metav1.Status`` the API server returns to the client.
    """

    def __init__(self, status: Obj) -> None:
        super().__init__(str(status.get("message", "admission denied")))
        self.status = status


@dataclass
class AdmissionResult:
    """What a mutating pass returns: the (possibly patched) object and warnings for the client."""

    object: Obj | None
    warnings: list[str] = field(default_factory=list)


class StoreView(Protocol):
    """Synchronous, in-memory reads (and status writes) of the store, for admission plugins.

    Reads return the stored dicts; callers must not mutate them.
    """

    def get(self, group: str, resource: str, namespace: str | None, name: str) -> Obj | None: ...

    def list(self, group: str, resource: str, namespace: str | None = None) -> list[Obj]: ...

    def write_status(self, group: str, resource: str, namespace: str | None, name: str, status: Obj) -> Obj:
        """Replace ``.status`` of a stored object, bump its resourceVersion, notify watchers."""
        ...


class AdmissionPlugin(Protocol):
    """An admission stage. Mutation runs before schema validation, validation after it."""

    async def mutate(self, request: AdmissionRequest) -> AdmissionResult: ...

    async def validate(self, request: AdmissionRequest) -> list[str]:
        """Return warnings; raise :class:`AdmissionError` to deny."""
        ...


@dataclass(frozen=True)
class Endpoint:
    """Where and how to reach a running API server."""

    url: str  # e.g. "http://127.0.0.1:43121"
    token: str | None = None  # the admin's bearer token, when the server asks for one
    ca_file: str | None = None  # PEM bundle that verifies the server, when it serves HTTPS


class ClusterAddon(Protocol):
    """Something that runs beside the API server and talks to it over HTTP, as a real controller does."""

    async def start(self, endpoint: Endpoint) -> None: ...

    async def stop(self) -> None: ...
