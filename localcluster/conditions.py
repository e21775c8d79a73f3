"""Status conditions, one rule for every kind the local cluster writes them on.

A condition is found by its ``type``. Setting one replaces it whole, and its
``lastTransitionTime`` moves only when its ``status`` flips, so a controller that writes the
same verdict twice leaves the object as it was (and its status compares equal). Empty reasons
and messages are left out, as Go's ``omitempty`` leaves them out of the JSON.
"""

from __future__ import annotations

from kadmit.localcluster.objects import Obj


def find(status: Obj, kind: str) -> Obj | None:
    """The condition of type ``kind`` in ``status``, or None."""
    return next((c for c in status.get("conditions") or [] if c.get("type") == kind), None)


def is_true(status: Obj, kind: str) -> bool:
    found = find(status, kind)
    return found is not None and found.get("status") == "True"


def set_condition(
    status: Obj,
    kind: str,
    value: str,
    reason: str,
    message: str,
    now: str,
    *,
    probed: bool = False,
    generation: int | None = None,
) -> None:
    """Set condition ``kind`` to ``value`` in ``status`` (which the caller owns; the list is copied).

    ``probed`` stamps ``lastProbeTime`` (Job and Pod conditions have one); ``generation`` is the
    ``observedGeneration`` of a ``metav1.Condition``.
    """
    optional = {
        "reason": reason,
        "message": message,
        "lastProbeTime": now if probed else None,
        "observedGeneration": generation,
    }
    condition: Obj = {"type": kind, "status": value}
    condition.update({field: given for field, given in optional.items() if given not in (None, "")})
    conditions = list(status.get("conditions") or [])
    for index, existing in enumerate(conditions):
        if existing.get("type") == kind:
            flipped = existing.get("status") != value
            condition["lastTransitionTime"] = now if flipped else existing.get("lastTransitionTime", now)
            conditions[index] = condition
            break
    else:
        condition["lastTransitionTime"] = now
        conditions.append(condition)
    status["conditions"] = conditions
