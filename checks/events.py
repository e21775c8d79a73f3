"""What the checks say in Events on the workloads they decide, as Kueue's check controllers say it.

``kubectl describe workload`` then tells a user when and why a check changed; the recording
itself is :class:`kadmit.kube.EventRecorder`'s (best effort: a failed write never fails the
evaluation).
"""

from __future__ import annotations

COMPONENT = "kadmit-checks"


def check_updated_message(name: str, old: str, new: str, message: str) -> str:
    """Kueue's ``AdmissionCheckUpdated`` text."""
    text = f"Admission check {name} updated state from {old} to {new}"
    return f"{text} with message: {message}" if message else text
