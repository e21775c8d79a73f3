"""The ``workload.codeflare.dev/v1beta2`` AppWrapper webhooks (Kueue's ``BaseWebhook`` for AppWrapper).

Mutating (``/mutate-workload-codeflare-dev-v1beta2-appwrapper``, CREATE) and validating
(``/validate-workload-codeflare-dev-v1beta2-appwrapper``, CREATE and UPDATE) are Kueue's generic
job webhooks: default the LocalQueue and priority class, suspend a managed AppWrapper, hand a
MultiKueue one to MultiKueue, Kueue's shared label rules, and kadmit's start guard. The components
an AppWrapper creates are owned by it, so they are not managed on their own.
"""

from __future__ import annotations

from kadmit.webhook.fielderrors import FieldError
from kadmit.webhook.jobs import (
    JobWebhooks,
    validate_admission_gates,
    validate_managed_create,
    validate_managed_update,
)
from kadmit.workload import Obj

APPWRAPPER_KIND = frozenset({("workload.codeflare.dev", "v1beta2", "AppWrapper")})
APPWRAPPER_CONTROLLER = "workload.codeflare.dev/appwrapper-controller"


class AppWrapperWebhooks(JobWebhooks):
    kind = "AppWrapper"
    integration = ("workload.codeflare.dev", "AppWrapper")
    kinds = APPWRAPPER_KIND
    mutate_path = "/mutate-workload-codeflare-dev-v1beta2-appwrapper"
    validate_path = "/validate-workload-codeflare-dev-v1beta2-appwrapper"
    mutating_name = "mappwrapper.kb.io"
    default_managed_by = APPWRAPPER_CONTROLLER

    def field_errors(self, job: Obj, old: Obj | None, default_queue_exists: bool) -> list[FieldError]:
        errors = validate_managed_create(job)
        if old is not None:
            errors += validate_managed_update(old, job, default_queue_exists)
            errors += validate_admission_gates(old, job)
        return errors
