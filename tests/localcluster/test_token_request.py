"""The TokenRequest API (``serviceaccounts/<name>/token``): through kubectl as a user runs
``kubectl create token``, and over HTTP for the answers kubectl does not show."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.timestamps import parse_time

TOKEN_PATH = "/api/v1/namespaces/default/serviceaccounts/{name}/token"
kubectl_missing = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[LocalCluster]:
    async with LocalCluster(https=True, token=True, kubeconfig=tmp_path / "kubeconfig") as running:
        yield running


async def kubectl(cluster: LocalCluster, *args: str, token: str | None = None) -> tuple[int, str, str]:
    credentials = ["--token", token] if token else []
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", cluster.kubeconfig, *credentials, *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def call(cluster: LocalCluster, method: str, path: str, body: Any = None) -> tuple[int, Obj]:
    headers = {"Authorization": f"Bearer {cluster.token}"}
    async with aiohttp.ClientSession(headers=headers) as session, session.request(
        method, cluster.url + path, json=body, ssl=False
    ) as answer:
        return answer.status, await answer.json()


@kubectl_missing
async def test_kubectl_create_token_authenticates_as_the_service_account(cluster: LocalCluster) -> None:
    code, _, err = await kubectl(cluster, "create", "serviceaccount", "bot")
    assert code == 0, err
    code, token, err = await kubectl(cluster, "create", "token", "bot", "--duration=20m", "--audience=x")
    assert code == 0 and token.strip(), err
    code, out, err = await kubectl(cluster, "auth", "whoami", "-o", "json", token=token.strip())
    assert code == 0, err
    account = cluster.store.get("", "serviceaccounts", "default", "bot")
    assert account is not None
    assert json.loads(out)["status"]["userInfo"] == {
        "username": "system:serviceaccount:default:bot",
        "uid": account["metadata"]["uid"],
        "groups": ["system:serviceaccounts", "system:serviceaccounts:default", "system:authenticated"],
    }


@kubectl_missing
@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["nobody"], 'error: failed to create token: serviceaccounts "nobody" not found'),
        (["default", "--duration", "5m"],
         'error: failed to create token: TokenRequest.authentication.k8s.io "default" is invalid: '
         "spec.expirationSeconds: Invalid value: 300: may not specify a duration less than 10 minutes"),
        (["default", "--bound-object-kind", "Pod", "--bound-object-name", "gone"],
         'error: failed to create token: pods "gone" not found'),
    ],
    ids=["no-such-account", "too-short", "bound-to-nothing"],
)
async def test_kubectl_create_token_refusals(cluster: LocalCluster, args: list[str], error: str) -> None:
    code, out, err = await kubectl(cluster, "create", "token", *args)
    assert (code, out, err.strip()) == (1, "", error)


async def test_the_answer_is_the_request_completed_with_token_and_expiry(cluster: LocalCluster) -> None:
    code, answer = await call(cluster, "POST", TOKEN_PATH.format(name="default"), {})
    assert code == 201, answer
    assert answer["kind"] == "TokenRequest" and answer["apiVersion"] == "authentication.k8s.io/v1"
    assert answer["metadata"]["name"] == "default" and answer["metadata"]["namespace"] == "default"
    assert answer["spec"] == {"expirationSeconds": 3600,
                              "audiences": ["https://kubernetes.default.svc.cluster.local"]}
    created = parse_time(answer["metadata"]["creationTimestamp"])
    assert parse_time(answer["status"]["expirationTimestamp"]) - created == timedelta(hours=1)
    assert cluster.auth.authenticate(f"Bearer {answer['status']['token']}") is not None


@pytest.mark.parametrize(
    ("name", "body", "code", "message"),
    [
        ("default", {"metadata": {"name": "other"}}, 422,
         'TokenRequest.authentication.k8s.io "default" is invalid: metadata.name: Invalid value: "other": '
         "must match the service account name if specified"),
        ("default", {"spec": {"expirationSeconds": (1 << 32) + 1}}, 422,
         'TokenRequest.authentication.k8s.io "default" is invalid: spec.expirationSeconds: Invalid value: '
         "4294967297: may not specify a duration larger than 2^32 seconds"),
        ("default", {"spec": {"boundObjectRef": {"kind": "ConfigMap", "apiVersion": "v1", "name": "c"}}}, 400,
         "cannot bind token for object of type v1, Kind=ConfigMap"),
        ("default", {"kind": "SelfSubjectReview"}, 400,
         "the kind in the data (SelfSubjectReview) does not match the expected kind (TokenRequest)"),
    ],
    ids=["name-differs", "too-long", "unbindable-kind", "wrong-kind"],
)
async def test_refusals_as_kube_apiserver_words_them(
    cluster: LocalCluster, name: str, body: Obj, code: int, message: str
) -> None:
    got, status = await call(cluster, "POST", TOKEN_PATH.format(name=name), body)
    assert (got, status["kind"], status["message"]) == (code, "Status", message)


async def test_a_token_bound_to_a_recreated_object_is_refused(cluster: LocalCluster) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
    code, created = await call(cluster, "POST", "/api/v1/namespaces/default/secrets", secret)
    assert code == 201
    ref = {"kind": "Secret", "apiVersion": "v1", "name": "s", "uid": created["metadata"]["uid"]}
    path = TOKEN_PATH.format(name="default")
    code, _ = await call(cluster, "POST", path, {"spec": {"boundObjectRef": ref}})
    assert code == 201
    code, status = await call(cluster, "POST", path, {"spec": {"boundObjectRef": {**ref, "uid": "another"}}})
    assert code == 409 and "does not match the UID in record" in status["message"]


async def test_only_post_and_discovery_says_so(cluster: LocalCluster) -> None:
    code, status = await call(cluster, "GET", TOKEN_PATH.format(name="default"))
    assert (code, status["reason"]) == (405, "MethodNotAllowed")
    code, listing = await call(cluster, "GET", "/api/v1")
    [entry] = [r for r in listing["resources"] if r["name"] == "serviceaccounts/token"]
    assert (entry["group"], entry["version"], entry["kind"], entry["verbs"]) == (
        "authentication.k8s.io", "v1", "TokenRequest", ["create"])
