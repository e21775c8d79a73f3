"""RBAC enforced by the local API server, checked through HTTP, kubernetes-asyncio and kubectl.

Users are bearer tokens the cluster knows (``add_user``) or ServiceAccount tokens; what they may do
comes only from the Roles, ClusterRoles and bindings in the store, with kube-apiserver's bootstrap
policy (cluster-admin, admin/edit/view by aggregation, discovery, basic-user).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.rbac import Attributes, request_attributes, rule_allows

RBAC = "rbac.authorization.k8s.io"
kubectl_missing = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


def cluster_role(name: str, rules: list[Obj], labels: dict[str, str] | None = None) -> Obj:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": labels or {}},
        "rules": rules,
    }


def binding(kind: str, name: str, role_kind: str, role: str, subjects: list[Obj], namespace: str = "") -> Obj:
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role},
        "subjects": subjects,
    }


def user(name: str) -> Obj:
    return {"apiGroup": RBAC, "kind": "User", "name": name}


class Http:
    """Raw HTTP as one token, for exact status codes and bodies."""

    def __init__(self, cluster: LocalCluster, session: aiohttp.ClientSession) -> None:
        self.cluster = cluster
        self.session = session

    async def call(self, token: str | None, method: str, path: str, body: Any = None) -> tuple[int, Obj]:
        headers = {"Authorization": f"Bearer {token or self.cluster.token}"}
        async with self.session.request(method, self.cluster.url + path, json=body, headers=headers) as r:
            return r.status, await r.json(content_type=None)


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(https=True, token=True) as running:  # kubectl sends tokens over HTTPS only
        running.add_user("alice-token", "alice", ["team-a"])
        running.add_user("bob-token", "bob")
        yield running


@pytest.fixture
async def http(cluster: LocalCluster) -> AsyncIterator[Http]:
    assert cluster.ca_file is not None
    context = ssl.create_default_context(cafile=cluster.ca_file)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:
        yield Http(cluster, session)


async def create(http: Http, path: str, body: Obj) -> Obj:
    code, answer = await http.call(None, "POST", path, body)
    assert code == 201, answer
    return answer


def test_request_attributes_as_kube_apiserver_parses_them() -> None:
    cases = {
        ("GET", "/api/v1/namespaces/a/pods", ""): ("list", "", "pods", "", "a", ""),
        ("GET", "/api/v1/namespaces/a/pods", "watch=true"): ("watch", "", "pods", "", "a", ""),
        ("GET", "/api/v1/pods", "fieldSelector=metadata.name%3Dp"): ("list", "", "pods", "", "", "p"),
        ("GET", "/api/v1/namespaces/a/pods/p/log", ""): ("get", "", "pods", "log", "a", "p"),
        ("PUT", "/apis/batch/v1/namespaces/a/jobs/j/status", ""): (
            "update", "batch", "jobs", "status", "a", "j"),
        ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq", ""): (
            "patch", "kueue.x-k8s.io", "clusterqueues", "", "", "cq"),
        ("DELETE", "/api/v1/namespaces/a/configmaps", ""): (
            "deletecollection", "", "configmaps", "", "a", ""),
        ("GET", "/api/v1/namespaces/a", ""): ("get", "", "namespaces", "", "a", "a"),
        ("PUT", "/api/v1/namespaces/a/finalize", ""): ("update", "", "namespaces", "finalize", "a", "a"),
        ("POST", "/api/v1/namespaces/a/serviceaccounts/sa/token", ""): (
            "create", "", "serviceaccounts", "token", "a", "sa"),
    }  # fmt: skip
    for (method, path, query), expected in cases.items():
        params = dict(p.split("=", 1) for p in query.replace("%3D", "\0").split("&") if p)
        params = {k: v.replace("\0", "=") for k, v in params.items()}
        attrs = request_attributes(method, path, params)
        assert attrs.resource_request, path
        assert (
            attrs.verb,
            attrs.group,
            attrs.resource,
            attrs.subresource,
            attrs.namespace,
            attrs.name,
        ) == expected
    for method, path in (("GET", "/apis"), ("GET", "/apis/batch/v1"), ("GET", "/metrics"), ("POST", "/x")):
        attrs = request_attributes(method, path, {})
        assert not attrs.resource_request and attrs.verb == method.lower() and attrs.path == path


def test_rules_match_as_rbac_does() -> None:
    get_status = Attributes("get", True, "", "batch", "v1", "jobs", "status", "a", "j")
    assert rule_allows({"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"]}, get_status)
    assert rule_allows({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]}, get_status)
    assert not rule_allows({"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get"]}, get_status)
    named = {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["get"], "resourceNames": ["k"]}
    assert not rule_allows(named, get_status)
    metrics = Attributes("get", False, "/metrics/extra")
    assert rule_allows({"nonResourceURLs": ["/metrics/*"], "verbs": ["get"]}, metrics)
    assert not rule_allows({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}, metrics)


async def test_a_user_without_bindings_is_refused_with_kube_apiservers_message(http: Http) -> None:
    code, answer = await http.call("alice-token", "GET", "/api/v1/namespaces/default/configmaps")
    assert code == 403
    assert answer["reason"] == "Forbidden" and answer["code"] == 403
    assert answer["message"] == (
        'configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" '
        'in the namespace "default"'
    )
    code, answer = await http.call(
        "alice-token", "PATCH", "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin", {}
    )
    assert code == 403
    assert answer["message"] == (
        'clusterroles.rbac.authorization.k8s.io "admin" is forbidden: User "alice" cannot patch resource '
        '"clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope'
    )
    assert answer["details"] == {
        "name": "admin",
        "group": "rbac.authorization.k8s.io",
        "kind": "clusterroles",
    }
    # discovery and the self reviews are every authenticated user's (system:discovery, system:basic-user)
    assert (await http.call("alice-token", "GET", "/apis"))[0] == 200
    code, answer = await http.call("alice-token", "GET", "/metrics")
    assert code == 403 and answer["message"] == 'forbidden: User "alice" cannot get path "/metrics"'


async def test_the_audit_record_stays_bounded_by_folding_names_past_its_cap(
    http: Http, cluster: LocalCluster
) -> None:
    """Every Event, Pod and Workload has a name of its own: past ``max_named`` entries, a new
    request is counted without its object's name, so a long-running cluster's record stays bounded."""
    cluster.audit.clear()
    cluster.audit.max_named = 4
    for name in ("a", "b", "c", "d", "e", "f"):
        code, _ = await http.call("alice-token", "GET", f"/api/v1/namespaces/default/configmaps/{name}")
        assert code == 403
    code, _ = await http.call("alice-token", "GET", "/api/v1/namespaces/default/configmaps/a")
    assert code == 403
    counts = {(e.name, e.allowed): n for e, n in cluster.audit.counts.items() if e.username == "alice"}
    assert counts == {("a", False): 2, ("b", False): 1, ("c", False): 1, ("d", False): 1, ("", False): 2}
    assert len(cluster.audit.denied("alice")) == 5


async def test_roles_bindings_resource_names_and_subresources(http: Http, cluster: LocalCluster) -> None:
    role = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "Role",
        "metadata": {"name": "cm-reader", "namespace": "default"},
        "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["public"]},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]},
            {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["*"]},
        ],
    }
    await create(http, "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", role)
    await create(
        http,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        binding(
            "RoleBinding", "readers", "Role", "cm-reader", [{"kind": "Group", "name": "team-a"}], "default"
        ),
    )
    for name in ("public", "private"):
        await create(http, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": name}})
    assert (await http.call("alice-token", "GET", "/api/v1/namespaces/default/configmaps/public"))[0] == 200
    code, answer = await http.call("alice-token", "GET", "/api/v1/namespaces/default/configmaps/private")
    assert code == 403 and answer["message"].startswith(
        'configmaps "private" is forbidden: User "alice" cannot get'
    )
    assert (await http.call("alice-token", "GET", "/api/v1/namespaces/default/configmaps"))[0] == 200
    # the Role is in default: other namespaces and the cluster scope stay closed
    assert (await http.call("alice-token", "GET", "/api/v1/namespaces/kube-system/configmaps"))[0] == 403
    assert (await http.call("alice-token", "GET", "/api/v1/configmaps"))[0] == 403
    # a subresource rule does not open the object itself, and bob is not in team-a
    assert (await http.call("alice-token", "GET", "/api/v1/namespaces/default/pods"))[0] == 403
    assert (await http.call("bob-token", "GET", "/api/v1/namespaces/default/configmaps"))[0] == 403
    # every request, allowed or not, is in the audit record
    entries = cluster.audit.of("alice")
    assert any(e.resource == "configmaps" and e.name == "private" and not e.allowed for e in entries)
    assert any(e.resource == "configmaps" and e.name == "public" and e.allowed for e in entries)


async def test_a_remembered_allow_holds_for_other_names_and_goes_with_the_rule(http: Http) -> None:
    """An allow by a rule without resourceNames is remembered for every name; narrowing the rule
    to names, or taking the binding away, is seen at the next request."""
    path = "/apis/rbac.authorization.k8s.io/v1"
    role = cluster_role("cm-getter", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}])
    await create(http, f"{path}/clusterroles", role)
    await create(http, f"{path}/clusterrolebindings",
                 binding("ClusterRoleBinding", "getters", "ClusterRole", "cm-getter", [user("bob")]))
    configmaps = "/api/v1/namespaces/default/configmaps"
    for name in ("one", "two"):
        await create(http, configmaps, {"metadata": {"name": name}})
        assert (await http.call("bob-token", "GET", f"{configmaps}/{name}"))[0] == 200
    role["rules"][0]["resourceNames"] = ["one"]
    code, answer = await http.call(None, "PUT", f"{path}/clusterroles/cm-getter", role)
    assert code == 200, answer
    assert (await http.call("bob-token", "GET", "/api/v1/namespaces/default/configmaps/one"))[0] == 200
    assert (await http.call("bob-token", "GET", "/api/v1/namespaces/default/configmaps/two"))[0] == 403
    assert (await http.call(None, "DELETE", f"{path}/clusterrolebindings/getters"))[0] == 200
    assert (await http.call("bob-token", "GET", "/api/v1/namespaces/default/configmaps/one"))[0] == 403


async def test_a_binding_to_a_missing_role_says_so(http: Http) -> None:
    await create(
        http,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        binding("ClusterRoleBinding", "dangling", "ClusterRole", "nowhere", [user("bob")]),
    )
    code, answer = await http.call("bob-token", "GET", "/api/v1/nodes")
    assert code == 403
    assert answer["message"].endswith(
        'at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io "nowhere" not found'
    )


async def test_aggregation_fills_admin_edit_view_and_custom_aggregates(
    http: Http, cluster: LocalCluster
) -> None:
    code, view = await http.call(None, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/view")
    assert code == 200 and any("pods" in r.get("resources", []) for r in view["rules"])
    code, admin = await http.call(None, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin")
    # admin aggregates edit, which aggregates view
    assert all(rule in admin["rules"] for rule in view["rules"])
    widgets = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get", "list"]}
    label = {"rbac.authorization.k8s.io/aggregate-to-view": "true"}
    await create(
        http,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        cluster_role("widget-viewer", [widgets], label),
    )
    aggregate = cluster_role("team", [])
    aggregate["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {"team": "a"}}]}
    await create(http, "/apis/rbac.authorization.k8s.io/v1/clusterroles", aggregate)
    await create(
        http,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        cluster_role(
            "team-a-part", [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}], {"team": "a"}
        ),
    )
    await cluster.settled()
    for name in ("view", "edit", "admin"):
        code, role = await http.call(None, "GET", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}")
        assert widgets in role["rules"], name
    code, team = await http.call(None, "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/team")
    assert team["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]
    await create(
        http,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        binding("ClusterRoleBinding", "bob-team", "ClusterRole", "team", [user("bob")]),
    )
    assert (await http.call("bob-token", "GET", "/api/v1/nodes"))[0] == 200
    code, _ = await http.call(None, "DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterroles/team-a-part")
    await cluster.settled()
    assert (await http.call("bob-token", "GET", "/api/v1/nodes"))[0] == 403


async def test_subject_access_review_and_token_review(http: Http, cluster: LocalCluster) -> None:
    sa_token = cluster.service_account_token("default", "checker")
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "alice",
            "groups": ["team-a"],
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
        },
    }
    # the service account may not ask until it is an auth delegator
    code, answer = await http.call(
        sa_token, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review
    )
    assert code == 403
    await create(
        http,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        binding(
            "ClusterRoleBinding",
            "checker",
            "ClusterRole",
            "system:auth-delegator",
            [{"kind": "ServiceAccount", "name": "checker", "namespace": "default"}],
        ),
    )
    code, answer = await http.call(
        sa_token, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review
    )
    assert code == 201 and answer["status"] == {"allowed": False}
    await create(
        http,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        cluster_role("metrics", [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]),
    )
    await create(
        http,
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        binding(
            "ClusterRoleBinding", "metrics", "ClusterRole", "metrics", [{"kind": "Group", "name": "team-a"}]
        ),
    )
    code, answer = await http.call(
        sa_token, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review
    )
    assert answer["status"]["allowed"] is True
    assert (
        answer["status"]["reason"]
        == 'RBAC: allowed by ClusterRoleBinding "metrics" of ClusterRole "metrics" to Group "team-a"'
    )
    code, answer = await http.call(
        sa_token,
        "POST",
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {"spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}},
    )
    assert code == 422 and "at least one of user or group must be specified" in answer["message"]
    local = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "LocalSubjectAccessReview",
        "metadata": {"namespace": "default"},
        "spec": {
            "user": "bob",
            "resourceAttributes": {"namespace": "default", "verb": "list", "resource": "pods"},
        },
    }
    path = "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews"
    code, answer = await http.call(None, "POST", path, local)
    assert code == 201 and answer["status"] == {"allowed": False}
    local["spec"]["resourceAttributes"]["namespace"] = "elsewhere"
    code, answer = await http.call(None, "POST", path, local)
    assert code == 400 and "must match metadata.namespace" in answer["message"]
    token_review = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "alice-token"},
    }
    code, answer = await http.call(
        sa_token, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", token_review
    )
    assert code == 201 and answer["status"]["authenticated"] is True
    assert answer["status"]["user"] == {"username": "alice", "groups": ["team-a", "system:authenticated"]}
    token_review["spec"]["token"] = "not-a-token"
    code, answer = await http.call(
        sa_token, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", token_review
    )
    assert code == 201 and answer["status"]["authenticated"] is False and answer["status"]["error"]
    code, _ = await http.call(
        "bob-token", "POST", "/apis/authentication.k8s.io/v1/tokenreviews", token_review
    )
    assert code == 403


async def kubectl(kubeconfig: str, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "--kubeconfig", kubeconfig, *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@kubectl_missing
async def test_kubectl_auth_can_i_with_a_token_and_as_the_admin_impersonating(
    http: Http, cluster: LocalCluster
) -> None:
    await create(http, "/api/v1/namespaces", {"metadata": {"name": "team-a"}})
    await create(
        http,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings",
        binding(
            "RoleBinding", "editors", "ClusterRole", "edit", [{"kind": "Group", "name": "team-a"}], "team-a"
        ),
    )
    alice = cluster.kubeconfig_for("alice-token")
    admin = cluster.kubeconfig
    for config, extra in ((alice, []), (admin, ["--as", "alice", "--as-group", "team-a"])):
        code, out, err = await kubectl(config, "auth", "can-i", "create", "jobs", "-n", "team-a", *extra)
        assert (code, out.strip()) == (0, "yes"), err
        code, out, err = await kubectl(config, "auth", "can-i", "create", "jobs", "-n", "default", *extra)
        assert (code, out.strip()) == (1, "no"), err
        code, out, err = await kubectl(config, "auth", "can-i", "list", "roles", "-n", "team-a", *extra)
        assert (code, out.strip()) == (1, "no"), err  # edit does not include RBAC
    code, out, err = await kubectl(alice, "auth", "can-i", "--list", "-n", "team-a")
    assert code == 0 and "jobs.batch" in out, err
    # alice may not impersonate, and kubectl says why as the server put it
    code, out, err = await kubectl(alice, "get", "pods", "-n", "team-a", "--as", "bob")
    assert code == 1
    assert (
        'Error from server (Forbidden): users "bob" is forbidden: User "alice" cannot impersonate resource '
        '"users" in API group "" at the cluster scope'
    ) in err
    code, out, err = await kubectl(alice, "delete", "clusterrole", "admin")
    assert (
        code == 1
        and (
            'Error from server (Forbidden): clusterroles.rbac.authorization.k8s.io "admin" is forbidden: '
            'User "alice" cannot delete resource "clusterroles" in API group "rbac.authorization.k8s.io" '
            "at the cluster scope"
        )
        in err
    )
    code, out, err = await kubectl(admin, "auth", "can-i", "*", "*")
    assert (code, out.strip()) == (0, "yes"), err
    code, out, err = await kubectl(
        admin, "auth", "whoami", "--as", "system:serviceaccount:team-a:builder", "-o", "json"
    )
    assert code == 0, err
    info = json.loads(out)["status"]["userInfo"]
    assert info["username"] == "system:serviceaccount:team-a:builder"
    assert "system:serviceaccounts:team-a" in info["groups"]


async def test_owner_references_need_delete_and_block_owner_deletion_needs_finalizers(
    http: Http, cluster: LocalCluster
) -> None:
    await create(
        http,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        binding("RoleBinding", "alice-edits", "ClusterRole", "edit", [user("alice")], "default"),
    )
    owner = await create(http, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "owner"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    owned = {"metadata": {"name": "owned", "ownerReferences": [ref]}}
    code, _ = await http.call("alice-token", "POST", "/api/v1/namespaces/default/configmaps", owned)
    assert code == 201  # edit may delete ConfigMaps, so it may set an owner reference on one
    blocking = {"metadata": {"name": "blocking", "ownerReferences": [{**ref, "blockOwnerDeletion": True}]}}
    code, answer = await http.call("alice-token", "POST", "/api/v1/namespaces/default/configmaps", blocking)
    assert code == 403
    assert answer["message"] == (
        'configmaps "blocking" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a '
        "resource you can't set finalizers on: , <nil>"
    )
    assert any(e.subresource == "finalizers" and not e.allowed for e in cluster.audit.of("alice"))
