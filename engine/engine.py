"""The engine: Kueue's objects in, scheduling decisions out. Pure, deterministic, no clock.

State is fed object by object (level-triggered upserts and deletes of API dicts) and every
decision is returned from :meth:`Engine.schedule`. A reservation is *assumed* the moment it is
decided; :meth:`Engine.forget` undoes it if the controller could not write it.

:class:`Engine` is put together from one class per idea, each in its module and each built on
the one before (single inheritance, so that mypyc can compile them, see ``setup.py``):
:mod:`kadmit.engine.store` (objects in; the cohort tree, queues and reservations kept in step),
:mod:`kadmit.engine.cycle` (the scheduling cycle: nominate, assign flavors, reserve or preempt),
:mod:`kadmit.engine.reporting` (decisions outside the admission loop: pending reasons, stop
policies, backoff, admission checks) and :mod:`kadmit.engine.status` (read-only views).
"""

from __future__ import annotations

from kadmit.engine.entry import Entry, WalkMemory
from kadmit.engine.reasons import (
    DEACTIVATED,
    MISCONFIGURED,
    PENDING_EVALUATION,
    SUSPENDED,
    WAITING_FOR_PODS_READY,
    WAITING_FOR_PREEMPTED,
)
from kadmit.engine.status import StatusViews, _Status


class Engine(StatusViews):
    """Kueue's admission semantics over an in-memory model of the cluster.

    ``fair_sharing`` stands for the Configuration's ``fairSharing`` block (with its
    ``preemptionStrategies``): admission order by the fair-sharing tournament and preemption by
    Dominant Resource Share. ``block_admission`` is ``waitForPodsReady.blockAdmission``.
    """


__all__ = [
    "DEACTIVATED",
    "MISCONFIGURED",
    "PENDING_EVALUATION",
    "SUSPENDED",
    "WAITING_FOR_PODS_READY",
    "WAITING_FOR_PREEMPTED",
    "Engine",
    "Entry",
    "WalkMemory",
    "_Status",
]
