"""kadmit's one Kubernetes I/O layer; it imports nothing else of kadmit's.

* :class:`Client` — REST calls on plain dicts over kubernetes-asyncio, each with a deadline;
* :class:`ApiError` and its subclasses — the one error hierarchy (``exc.not_found``, ``.conflict``,
  ``.gone``, ``.already_exists``, ``.retryable``, ``.retry_after``; :class:`ApiUnreachable` when
  nothing answered);
* :class:`Resource` and the resources kadmit talks to — the one way to name a kind;
* :class:`Informer` / :class:`Informers` — list+watch caches with 410 relists, bookmarks,
  reconnect backoff and indexers, shared per resource;
* :class:`WorkQueue` / :class:`Workers` / :class:`KeyedReconciler` — de-duplicating, rate-limited
  work queues and the workers over them (controller-runtime's semantics);
* :func:`update` / :func:`update_status` / :func:`update_unless_gone` — read-modify-write with
  conflict retries; :func:`replaced_by` and :func:`without_finalizer` make their ``mutate``;
* :class:`LeaderElector` — one leader at a time on a Lease; :class:`EventRecorder` — Events;
* :mod:`kadmit.kube.lifecycle` — the one ``async with`` over ``start``/``stop`` (a failed start is
  undone) and the one way to stop a child process (SIGTERM, then SIGKILL).
"""

from kadmit import under_one_name

under_one_name(__name__)

from kadmit.kube.client import Client, KubeConfigError
from kadmit.kube.errors import (
    AlreadyExists,
    ApiError,
    ApiUnreachable,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TooManyRequests,
    Unauthorized,
)
from kadmit.kube.events import NORMAL, WARNING, EventRecorder
from kadmit.kube.informer import ADDED, DELETED, MODIFIED, Handler, Informer, Informers, InformerStopped
from kadmit.kube.leader import LeaderElector, LeaseTiming, default_identity
from kadmit.kube.objects import Obj, copy_object, merge_patch
from kadmit.kube.resources import Resource
from kadmit.kube.workers import KeyedReconciler, Workers, cancel_all
from kadmit.kube.workqueue import ShutDown, WorkQueue
from kadmit.kube.writes import replaced_by, update, update_status, update_unless_gone, without_finalizer

__all__ = [
    "ADDED",
    "DELETED",
    "MODIFIED",
    "NORMAL",
    "WARNING",
    "AlreadyExists",
    "ApiError",
    "ApiUnreachable",
    "BadRequest",
    "Client",
    "Conflict",
    "EventRecorder",
    "Forbidden",
    "Gone",
    "Handler",
    "Informer",
    "InformerStopped",
    "Informers",
    "Invalid",
    "KeyedReconciler",
    "KubeConfigError",
    "LeaderElector",
    "LeaseTiming",
    "NotFound",
    "Obj",
    "Resource",
    "ServerError",
    "ShutDown",
    "TooManyRequests",
    "Unauthorized",
    "WorkQueue",
    "Workers",
    "cancel_all",
    "copy_object",
    "default_identity",
    "merge_patch",
    "replaced_by",
    "update",
    "update_status",
    "update_unless_gone",
    "without_finalizer",
]
