"""Pending reasons that do not come from flavor assignment, spelled as Kueue spells them."""

MISCONFIGURED = "Misconfigured"
SUSPENDED = "Suspended"
WAITING_FOR_PREEMPTED = "WaitingForPreemptedWorkloads"
DEACTIVATED = "Deactivated"
PENDING_EVALUATION = "PendingEvaluation"
WAITING_FOR_PODS_READY = "WaitingForPodsReady"
