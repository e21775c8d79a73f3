"""When kadmit is down: the Jobs it manages are refused (failurePolicy Fail, so none runs
unadmitted), and everything its webhooks do not select is created as usual — Jobs in the
namespaces the webhooks' namespaceSelector leaves out (kube-system, kadmit-system), and every kind
it has no webhook for."""

from __future__ import annotations

import pytest

from kadmit.kube import ApiError
from kadmit.kube.resources import JOBS, NAMESPACES
from tests.e2e.conftest import WebhookEnv
from tests.e2e.helpers import apply_small_setup, job


async def test_a_kadmit_outage_blocks_only_what_kadmit_manages(kadmit: WebhookEnv) -> None:
    kube = kadmit.kube
    await apply_small_setup(kube)
    assert kadmit.app is not None
    await kadmit.app.stop()  # kadmit is down; its webhook configurations stay
    kadmit.app = None

    with pytest.raises(ApiError) as refused:
        await kube.create(JOBS, job("queued", queue="small"))
    assert refused.value.status == 500
    assert 'failed calling webhook "mjob.kb.io"' in refused.value.message

    system_job = job("cluster-maintenance", queue="small")
    system_job["metadata"]["namespace"] = "kube-system"
    system_job["spec"]["suspend"] = False
    created = await kube.create(JOBS, system_job)
    assert created["spec"]["suspend"] is False  # no webhook was called

    namespace = await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}
    )
    assert namespace["metadata"]["name"] == "x"
