"""kadmit engine: Kueue's quota and gang admission, pure and deterministic (no I/O, no clock).

The controller keeps one :class:`Engine` in step with the API server and writes back what
:meth:`Engine.schedule` decides. Everything comes in as the dicts kubernetes-asyncio returns
(``kueue.x-k8s.io/v1beta1`` or ``v1beta2``); invalid objects raise :class:`InvalidObject`
naming the field path. Times are POSIX seconds passed in by the caller.

Objects in (idempotent, level-triggered)::

    engine = Engine()
    engine.upsert(obj)                      # dispatches on kind, or the typed methods:
    engine.upsert_resource_flavor(obj)      engine.delete_resource_flavor(name)
    engine.upsert_cluster_queue(obj)        engine.delete_cluster_queue(name)
    engine.upsert_cohort(obj)               engine.delete_cohort(name)
    engine.upsert_local_queue(obj)          engine.delete_local_queue(namespace, name)
    engine.upsert_priority_class(obj)       engine.delete_priority_class(name)
    engine.upsert_admission_check(obj)      engine.delete_admission_check(name)  # reads Active
    engine.upsert_namespace(obj)            engine.delete_namespace(name)  # for namespaceSelector
    engine.upsert_limit_range(obj)          engine.delete_limit_range(namespace, name)
    engine.upsert_runtime_class(obj)        engine.delete_runtime_class(name)
                                            # then feed the pending Workloads again
    engine.upsert_workload(obj)             engine.delete_workload(namespace, name)

A Workload whose ``status.admission`` is set and ``QuotaReserved=True`` (active, not Finished)
is charged to its ClusterQueue: that is how the engine is rebuilt after a restart.

Decisions out::

    decisions = engine.schedule(now)        # engine.decisions.Decisions
      .reservations  Reservation(workload, cluster_queue, admission, conditions, admission_checks,
                                 admitted, borrowing, replaced)   # admission = exact status.admission
                     # replaced: the Workload slice to finish (WorkloadSliceReplaced) once written
      .preemptions   Preemption(victim, preemptor, reason, message, conditions)
      .pending       Pending(workload, cluster_queue, reason, message, conditions)  # on change only
                     # .resource_requests(): its status.resourceRequests, made when asked
      .admitted      Admitted(workload, conditions)       # every applicable check is Ready
      .evictions     Eviction(workload, "AdmissionCheck", message, requeue_at, conditions)  # Retry
      .deactivations Deactivation(workload, message, conditions)                          # Rejected
      .requeues      Requeue(workload, reason, conditions)  # BackoffFinished, *QueueRestarted
      .cleared       ReservationCleared(workload, reason, message, conditions)
      .attempts_success / .attempts_inadmissible   # kueue_admission_attempts_total

A reservation is assumed in the engine the moment it is decided; if its status write fails
call ``engine.forget(namespace, name)``. Lifecycle calls: ``engine.set_check_states(ns, name,
states)`` (or upsert the Workload with its ``status.admissionChecks``), ``engine.release(ns,
name, now, requeue_at=None)`` once an evicted job has stopped (quota freed, workload queued
again, not before ``requeue_at``), ``engine.finish(ns, name)``. Queries: ``engine.status(ns,
name)``, ``engine.cluster_queue_active(name)``, ``engine.local_queue_active(ns, name)``,
``engine.cluster_queue_status(name)`` / ``engine.local_queue_status(ns, name)`` (the counters and
``flavorsReservation`` / ``flavorsUsage`` of their status), ``engine.usage(node_name)``,
``engine.weighted_share(name)``, ``engine.pending_workloads(cluster_queue)`` (the queue's order and
positions, for the Visibility API).

The one home of three conventions every package shares: time (:mod:`kadmit.engine.timestamps`:
``format_time``, ``format_micro_time``, ``parse_time``), quantities (:mod:`kadmit.engine.quantity`:
``to_milli``, ``to_nano``, ``resource_value``, ``parse_exact``) and label selectors
(``kadmit.engine.parse.label_selector(obj).matches(labels)``).

Backoff times: :mod:`kadmit.engine.backoff` (``backoff_seconds``, ``pods_ready_requeue_at``,
``check_retry_requeue_at``), all from the ``now`` the caller passes.

Fair sharing: ``Engine(fair_sharing=True, preemption_strategies=[...])`` (the Configuration's
``fairSharing`` block); ``engine.weighted_share(name)`` gives ``status.fairSharing.weightedShare``.
Other stop-policy decisions: ``.cleared`` (a stopped queue takes back an unadmitted reservation).
WaitForPodsReady's blockAdmission: ``Engine(block_admission=True)``; its
``requeuingStrategy.timestamp``: ``Engine(requeuing_timestamp="Creation")`` (default Eviction).
``Engine(max_rounds=1)``: one Kueue scheduling cycle per call (Kueue's table tests).
Admission Fair Sharing: ``Engine(admission_fair_sharing=AdmissionFairSharing(...))`` with
``engine.sample_admission_fair_sharing(now)`` at the configured interval. Not supported yet:
Topology-Aware Scheduling.

``COMPILED``: whether these modules run compiled by mypyc (a wheel built with
``KADMIT_COMPILE=1``, as the image is; see setup.py) or interpreted (an editable install).
"""

from importlib.machinery import EXTENSION_SUFFIXES

from kadmit import under_one_name

under_one_name(__name__)

from kadmit.engine import engine as _engine_module
from kadmit.engine.decisions import (
    Admitted,
    Deactivation,
    Decisions,
    Eviction,
    Pending,
    Preemption,
    Requeue,
    Reservation,
    ReservationCleared,
)
from kadmit.engine.engine import Engine
from kadmit.engine.errors import InvalidObject, UnsupportedConfiguration
from kadmit.engine.quantity import QuantityError, format_milli, to_milli
from kadmit.engine.status import PendingWorkload

COMPILED: bool = str(_engine_module.__file__).endswith(tuple(EXTENSION_SUFFIXES))

__all__ = [
    "COMPILED",
    "Admitted",
    "Deactivation",
    "Decisions",
    "Engine",
    "Eviction",
    "InvalidObject",
    "Pending",
    "PendingWorkload",
    "Preemption",
    "QuantityError",
    "Requeue",
    "Reservation",
    "ReservationCleared",
    "UnsupportedConfiguration",
    "format_milli",
    "to_milli",
]
