"""Identities: bearer tokens name users, and admission webhooks see who made each write.

Every write goes kubernetes-asyncio → LocalCluster → a real HTTPS webhook that records the
AdmissionReview, so the assertions are on ``request.userInfo`` as a webhook receives it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.objects import Obj
from tests.localcluster.conftest_admission import *  # noqa: F403
from tests.localcluster.conftest_admission import TLSMaterial, WebhookServer, allow

SA_NAME = "system:serviceaccount:kadmit-system:kadmit-controller-manager"
SA_GROUPS = ["system:serviceaccounts", "system:serviceaccounts:kadmit-system", "system:authenticated"]
ADMIN_INFO = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}
kubectl_missing = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


def recording_webhook(url: str, tls: TLSMaterial) -> Obj:
    """A validating webhook on every write to ConfigMaps, so each write's userInfo is recorded."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "record-users"},
        "webhooks": [
            {
                "name": "record.users.test",
                "clientConfig": {"url": url, "caBundle": tls.ca_bundle},
                "rules": [
                    {
                        "operations": ["CREATE", "UPDATE", "DELETE"],
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["configmaps"],
                    }
                ],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        ],
    }


def core_api(api: Any) -> Any:
    """Typed as Any: these tests send plain dicts, as the API accepts."""
    return client.CoreV1Api(api)


def registration_api(api: Any) -> Any:
    return client.AdmissionregistrationV1Api(api)


def auth_api(api: Any) -> Any:
    return client.AuthenticationV1Api(api)


@pytest.fixture
async def cluster(webhook_server: WebhookServer, tls: TLSMaterial) -> AsyncIterator[LocalCluster]:
    async with LocalCluster(token="admin-secret") as running:
        url = webhook_server.route("/record", allow())
        async with await running.api_client() as api:
            await registration_api(api).create_validating_webhook_configuration(recording_webhook(url, tls))
            await core_api(api).create_namespace({"metadata": {"name": "kadmit-system"}})
            await core_api(api).create_namespaced_service_account(
                "kadmit-system", {"metadata": {"name": "kadmit-controller-manager"}}
            )
            await client.RbacAuthorizationV1Api(api).create_namespaced_role_binding(
                "default",
                edit_in_default(
                    service_account("kadmit-system", "kadmit-controller-manager"),
                    {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"},
                ),
            )
        yield running


def edit_in_default(*subjects: Obj) -> Obj:
    """A RoleBinding of the built-in ``edit`` ClusterRole in ``default`` (RBAC is enforced)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "editors", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": list(subjects),
    }


def service_account(namespace: str, name: str) -> Obj:
    return {"kind": "ServiceAccount", "namespace": namespace, "name": name}


def users(webhook_server: WebhookServer) -> list[tuple[str, Obj]]:
    return [(r["request"]["operation"], r["request"]["userInfo"]) for r in webhook_server.called("/record")]


async def test_each_write_reaches_admission_as_its_callers_user(
    cluster: LocalCluster, webhook_server: WebhookServer
) -> None:
    sa_token = cluster.service_account_token("kadmit-system", "kadmit-controller-manager")
    cluster.add_user("alice-token", "alice", ["devs"])
    sa_uid = cluster.store.get("", "serviceaccounts", "kadmit-system", "kadmit-controller-manager")
    assert sa_uid is not None
    config_map = {"metadata": {"name": "settings"}, "data": {"a": "1"}}

    async with await cluster.api_client(sa_token) as api:
        core = core_api(api)
        await core.create_namespaced_config_map("default", config_map)
        await core.patch_namespaced_config_map("settings", "default", {"data": {"a": "2"}})
    async with await cluster.api_client("alice-token") as api:
        await core_api(api).replace_namespaced_config_map(
            "settings", "default", {"metadata": {"name": "settings"}, "data": {"a": "3"}}
        )
    async with await cluster.api_client() as api:  # the cluster's own kubeconfig: the admin
        await core_api(api).delete_namespaced_config_map("settings", "default")

    sa_info = {"username": SA_NAME, "uid": sa_uid["metadata"]["uid"], "groups": SA_GROUPS}
    alice = {"username": "alice", "groups": ["devs", "system:authenticated"]}
    assert users(webhook_server) == [
        ("CREATE", sa_info),
        ("UPDATE", sa_info),
        ("UPDATE", alice),
        ("DELETE", ADMIN_INFO),
    ]


async def test_unknown_or_missing_tokens_are_401_and_never_reach_admission(
    cluster: LocalCluster, webhook_server: WebhookServer
) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    url = f"{cluster.url}/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession() as session:
        for headers in ({"Authorization": "Bearer wrong"}, {}, {"Authorization": "Basic YWRtaW4="}):
            async with session.post(url, json=body, headers=headers) as response:
                assert response.status == 401, headers
                status = await response.json()
                assert (status["kind"], status["reason"], status["code"]) == ("Status", "Unauthorized", 401)
        async with session.get(f"{cluster.url}/readyz") as response:
            assert response.status == 200  # probes stay public
    assert users(webhook_server) == []


async def test_without_a_token_every_request_is_the_admin(
    webhook_server: WebhookServer, tls: TLSMaterial
) -> None:
    async with LocalCluster() as running:
        url = webhook_server.route("/record", allow())
        async with await running.api_client() as api:
            await registration_api(api).create_validating_webhook_configuration(recording_webhook(url, tls))
            await core_api(api).create_namespaced_config_map("default", {"metadata": {"name": "c"}})
            await client.RbacAuthorizationV1Api(api).create_namespaced_role_binding(
                "default", edit_in_default(service_account("default", "builder"))
            )
        # a known service-account token still names its user when auth is off
        sa = running.service_account_token("default", "builder")
        async with await running.api_client(sa) as api:
            await core_api(api).delete_namespaced_config_map("c", "default")
    [(op1, first), (op2, second)] = users(webhook_server)
    assert (op1, first) == ("CREATE", ADMIN_INFO)
    assert op2 == "DELETE" and second["username"] == "system:serviceaccount:default:builder"


async def test_self_subject_review_answers_who_the_caller_is(cluster: LocalCluster) -> None:
    token = cluster.service_account_token("kadmit-system", "kadmit-controller-manager")
    async with await cluster.api_client(token) as api:
        review = await auth_api(api).create_self_subject_review({})
    assert review.status.user_info.username == SA_NAME
    assert review.status.user_info.groups == SA_GROUPS
    async with await cluster.api_client() as api:
        groups = await client.ApisApi(api).get_api_versions()
        assert "authentication.k8s.io" in [g.name for g in groups.groups]
        resources = await auth_api(api).get_api_resources()
        [resource] = [r for r in resources.resources if r.name == "selfsubjectreviews"]
        assert (resource.kind, resource.verbs) == ("SelfSubjectReview", ["create"])
        assert not resource.namespaced


async def test_bad_identities_are_refused_with_a_clear_error(cluster: LocalCluster) -> None:
    with pytest.raises(ValueError, match="already authenticates system:admin"):
        cluster.add_user("admin-secret", "mallory")
    with pytest.raises(ValueError, match="without whitespace"):
        cluster.add_user("two words", "bob")
    with pytest.raises(ValueError, match="invalid service account namespace"):
        cluster.service_account_token("", "x")
    with pytest.raises(ValueError, match="invalid service account name"):
        cluster.service_account_token("default", "a:b")


async def kubectl(kubeconfig: str, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        kubeconfig,
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def read_yaml(path: str | Path) -> Obj:
    loaded: Obj = yaml.safe_load(Path(path).read_text())
    return loaded


def write_yaml(path: Path, doc: Obj) -> None:
    path.write_text(yaml.safe_dump(doc))


@kubectl_missing
async def test_https_kubeconfig_carries_token_and_ca_for_kubectl(tmp_path: Path) -> None:
    async with LocalCluster(https=True, token=True, kubeconfig=tmp_path / "kc") as running:
        config = read_yaml(running.kubeconfig)
        [entry] = config["clusters"]
        assert entry["cluster"]["certificate-authority-data"]
        assert config["users"][0]["user"] == {"token": running.token}
        code, out, err = await kubectl(running.kubeconfig, "get", "ns", "-o", "name")
        assert code == 0, err
        assert "namespace/default" in out.split()
        code, out, err = await kubectl(running.kubeconfig, "auth", "whoami", "-o", "json")
        assert code == 0, err
        assert json.loads(out)["status"]["userInfo"] == ADMIN_INFO
        sa_config = running.kubeconfig_for(running.service_account_token("default", "default"))
        code, out, err = await kubectl(sa_config, "auth", "whoami", "-o", "json")
        assert code == 0, err
        assert json.loads(out)["status"]["userInfo"]["username"] == "system:serviceaccount:default:default"
        stranger = tmp_path / "stranger"
        write_yaml(stranger, {**config, "users": [{"name": running.name, "user": {"token": "nope"}}]})
        code, out, err = await kubectl(str(stranger), "get", "ns")
        assert code == 1 and "Unauthorized" in err, err
