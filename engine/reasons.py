"""Pending reasons that do not come from flavor assignment, spelled as Kueue spells them."""

MISCONFIGURED = "Misconfigured"
SUSPENDED = "Suspended"
WAITING_FOR_PREEMPTED = "WaitingForPreemptedWorkloads"
DEACTIVATED = "Deactivated"
PENDING_EVALUATION = "PendingEvaluation"
WAITING_FOR_PODS_READY = "WaitingForPodsReady"

# Messages of Kueue's ``ValidateResources`` (``pkg/workload/resources.go``): a Workload with a
# container that requests more than its limit stays pending, Misconfigured.
INVALID_RESOURCES = "resources validation failed"
REQUESTS_EXCEED_LIMITS = "requests must not exceed its limits"
