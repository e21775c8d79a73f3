"""CRUD on built-in kinds through kubernetes-asyncio over real HTTP."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiException

from kadmit.localcluster.cluster import LocalCluster


def meta(name: str, **kw: Any) -> client.V1ObjectMeta:
    return client.V1ObjectMeta(name=name, **kw)


def job(name: str, **spec: Any) -> client.V1Job:
    template = client.V1PodTemplateSpec(
        spec=client.V1PodSpec(
            restart_policy="Never", containers=[client.V1Container(name="c", image="busybox:1")]
        )
    )
    return client.V1Job(metadata=meta(name), spec=client.V1JobSpec(template=template, **spec))


def reason(exc: ApiException) -> str:
    return str(json.loads(exc.body)["reason"])


async def test_create_get_list_update_delete_configmap(core: client.CoreV1Api) -> None:
    created = await core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=meta("a"), data={"k": "1"})
    )
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert created.metadata.namespace == "default"
    assert created.metadata.generation is None  # as upstream: ConfigMaps keep no generation
    got = await core.read_namespaced_config_map("a", "default")
    assert got.data == {"k": "1"} and got.metadata.resource_version == created.metadata.resource_version
    got.data = {"k": "2"}
    updated = await core.replace_namespaced_config_map("a", "default", got)
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
    listed = await core.list_namespaced_config_map("default")
    assert [c.metadata.name for c in listed.items] == ["a"]
    assert int(listed.metadata.resource_version) >= int(updated.metadata.resource_version)
    await core.delete_namespaced_config_map("a", "default")
    with pytest.raises(ApiException) as caught:
        await core.read_namespaced_config_map("a", "default")
    assert caught.value.status == 404 and reason(caught.value) == "NotFound"
    assert json.loads(caught.value.body)["message"] == 'configmaps "a" not found'


async def test_resource_versions_come_from_one_counter(core: client.CoreV1Api) -> None:
    a = await core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=meta("a")))
    b = await core.create_namespaced_secret("default", client.V1Secret(metadata=meta("b")))
    assert int(b.metadata.resource_version) == int(a.metadata.resource_version) + 1


async def test_already_exists_and_generate_name(core: client.CoreV1Api) -> None:
    await core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=meta("a")))
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=meta("a")))
    assert caught.value.status == 409 and reason(caught.value) == "AlreadyExists"
    generated = await core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(generate_name="gen-"))
    )
    assert generated.metadata.name.startswith("gen-") and len(generated.metadata.name) == 9


async def test_stale_update_and_patch_conflict(core: client.CoreV1Api) -> None:
    first = await core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=meta("a"), data={"k": "1"})
    )
    first.data = {"k": "2"}
    await core.replace_namespaced_config_map("a", "default", first)
    first.data = {"k": "3"}
    with pytest.raises(ApiException) as caught:
        await core.replace_namespaced_config_map("a", "default", first)
    assert caught.value.status == 409 and reason(caught.value) == "Conflict"
    stale = {"metadata": {"resourceVersion": first.metadata.resource_version}, "data": {"k": "4"}}
    with pytest.raises(ApiException) as caught:
        await core.patch_namespaced_config_map("a", "default", stale)
    assert caught.value.status == 409


async def test_namespace_must_exist(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_config_map("nowhere", client.V1ConfigMap(metadata=meta("a")))
    assert caught.value.status == 404
    assert json.loads(caught.value.body)["message"] == 'namespaces "nowhere" not found'


async def test_job_defaults_and_invalid_job(batch: client.BatchV1Api) -> None:
    created = await batch.create_namespaced_job("default", job("j"))
    assert created.spec.parallelism == 1 and created.spec.completions == 1
    assert created.spec.backoff_limit == 6 and created.spec.suspend is False
    uid = created.metadata.uid
    assert created.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    assert created.spec.template.metadata.labels["batch.kubernetes.io/job-name"] == "j"
    bad = job("bad")
    bad.spec.template.spec.restart_policy = "Always"
    with pytest.raises(ApiException) as caught:
        await batch.create_namespaced_job("default", bad)
    body = json.loads(caught.value.body)
    assert caught.value.status == 422 and body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "spec.template.spec.restartPolicy"


async def test_generation_bumps_only_on_spec_changes(batch: client.BatchV1Api) -> None:
    created = await batch.create_namespaced_job("default", job("j", suspend=True))
    assert created.metadata.generation == 1
    labelled = await batch.patch_namespaced_job("j", "default", {"metadata": {"labels": {"x": "y"}}})
    assert labelled.metadata.generation == 1
    resumed = await batch.patch_namespaced_job("j", "default", {"spec": {"suspend": False}})
    assert resumed.metadata.generation == 2
    status = await batch.patch_namespaced_job_status("j", "default", {"status": {"active": 1}})
    assert status.metadata.generation == 2 and status.status.active == 1


async def test_status_subresource_rules(batch: client.BatchV1Api) -> None:
    created = await batch.create_namespaced_job("default", job("j", suspend=True))
    # The main resource ignores .status ...
    ignored = await batch.patch_namespaced_job("j", "default", {"status": {"active": 3}})
    assert ignored.status.active is None
    # ... and /status ignores everything else.
    written = await batch.patch_namespaced_job_status(
        "j",
        "default",
        {"spec": {"suspend": False}, "metadata": {"labels": {"a": "b"}}, "status": {"active": 2}},
    )
    assert written.status.active == 2 and written.spec.suspend is True and not written.metadata.labels
    assert created.metadata.uid == written.metadata.uid


async def test_noop_update_keeps_resource_version(core: client.CoreV1Api) -> None:
    created = await core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=meta("a"), data={"k": "1"})
    )
    same = await core.patch_namespaced_config_map("a", "default", {"data": {"k": "1"}})
    assert same.metadata.resource_version == created.metadata.resource_version


async def test_label_and_field_selectors(core: client.CoreV1Api) -> None:
    for name, labels in (("a", {"app": "x", "tier": "web"}), ("b", {"app": "y"}), ("c", {})):
        await core.create_namespaced_config_map(
            "default", client.V1ConfigMap(metadata=meta(name, labels=labels))
        )

    async def names(**kw: Any) -> list[str]:
        return [c.metadata.name for c in (await core.list_namespaced_config_map("default", **kw)).items]

    assert await names(label_selector="app=x") == ["a"]
    assert await names(label_selector="app in (x,y)") == ["a", "b"]
    assert await names(label_selector="app,app!=x") == ["b"]
    assert await names(label_selector="!app") == ["c"]
    assert await names(field_selector="metadata.name=b") == ["b"]
    assert await names(field_selector="metadata.name!=b") == ["a", "c"]
    with pytest.raises(ApiException) as caught:
        await names(field_selector="spec.nodeName=x")
    assert caught.value.status == 400


async def test_pod_field_selectors(core: client.CoreV1Api) -> None:
    for name, node in (("p1", "n1"), ("p2", None)):
        pod = client.V1Pod(
            metadata=meta(name),
            spec=client.V1PodSpec(node_name=node, containers=[client.V1Container(name="c", image="busybox")]),
        )
        await core.create_namespaced_pod("default", pod)
    bound = await core.list_namespaced_pod("default", field_selector="spec.nodeName=n1")
    assert [p.metadata.name for p in bound.items] == ["p1"]
    pending = await core.list_pod_for_all_namespaces(field_selector="status.phase=Pending,spec.nodeName=")
    assert [p.metadata.name for p in pending.items] == ["p2"]


async def test_limit_and_continue(core: client.CoreV1Api) -> None:
    for i in range(5):
        await core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=meta(f"c{i}")))
    seen: list[str] = []
    token = None
    while True:
        page = await core.list_namespaced_config_map("default", limit=2, _continue=token)
        seen += [c.metadata.name for c in page.items]
        token = page.metadata._continue
        if not token:
            break
    assert seen == [f"c{i}" for i in range(5)]


async def test_dry_run_persists_nothing(core: client.CoreV1Api, cluster: LocalCluster) -> None:
    before = cluster.store.resource_version
    result = await core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=meta("a")), dry_run="All"
    )
    assert result.metadata.name == "a"
    assert cluster.store.get("", "configmaps", "default", "a") is None
    assert cluster.store.resource_version == before


async def test_bad_input_gets_status_errors(cluster: LocalCluster) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{cluster.url}/api/v1/namespaces/default/configmaps",
            data=b"{not json",
            headers={"Content-Type": "application/json"},
        ) as resp:
            body = await resp.json()
            assert resp.status == 400 and body["reason"] == "BadRequest"
        async with http.post(
            f"{cluster.url}/api/v1/namespaces/default/configmaps",
            json={"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}},
        ) as resp:
            assert resp.status == 400
        async with http.get(f"{cluster.url}/api/v1/nothings") as resp:
            assert resp.status == 404 and (await resp.json())["kind"] == "Status"
        async with http.patch(
            f"{cluster.url}/api/v1/namespaces/default/configmaps/kube",
            data=b"{}",
            headers={"Content-Type": "text/plain"},
        ) as resp:
            assert resp.status == 404
        async with http.post(
            f"{cluster.url}/api/v1/namespaces/default/configmaps", json={"metadata": {"name": "Not_Valid"}}
        ) as resp:
            body = await resp.json()
            assert resp.status == 422 and body["details"]["causes"][0]["field"] == "metadata.name"


async def test_unknown_fields_warn_or_fail(cluster: LocalCluster) -> None:
    import aiohttp

    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "bogus": 1}
    async with aiohttp.ClientSession() as http:
        url = f"{cluster.url}/api/v1/namespaces/default/configmaps"
        async with http.post(url + "?fieldValidation=Strict", json=body) as resp:
            assert resp.status == 400
            assert 'unknown field "bogus"' in (await resp.json())["message"]
        async with http.post(url, json=body) as resp:
            assert resp.status == 201
            assert (
                'unknown field \\"bogus\\"' in resp.headers["Warning"] or "bogus" in resp.headers["Warning"]
            )


async def test_discovery_documents(cluster: LocalCluster) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.get(f"{cluster.url}/apis/batch/v1") as resp:
            doc = await resp.json()
            jobs = next(r for r in doc["resources"] if r["name"] == "jobs")
            assert jobs["namespaced"] and jobs["kind"] == "Job"
            assert any(r["name"] == "jobs/status" for r in doc["resources"])
        accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        async with http.get(f"{cluster.url}/apis", headers={"Accept": accept}) as resp:
            assert resp.headers["Content-Type"].startswith("application/json;g=apidiscovery.k8s.io;v=v2")
            doc = await resp.json()
            groups = {item["metadata"]["name"] for item in doc["items"]}
            assert {"batch", "apiextensions.k8s.io", "coordination.k8s.io"} <= groups
        async with http.get(f"{cluster.url}/version") as resp:
            assert (await resp.json())["major"] == "1"
        async with http.get(f"{cluster.url}/readyz") as resp:
            assert resp.status == 200


async def test_malformed_protobuf_body_is_a_400(cluster: LocalCluster) -> None:
    import aiohttp

    headers = {"Content-Type": "application/vnd.kubernetes.protobuf"}
    url = f"{cluster.url}/api/v1/namespaces"
    async with aiohttp.ClientSession() as http, http.post(url, data=b"k8s\x00\n", headers=headers) as resp:
        body = await resp.json()
    assert resp.status == 400 and body["reason"] == "BadRequest" and body["kind"] == "Status"


async def test_pod_binding_and_eviction(core: client.CoreV1Api, cluster: LocalCluster) -> None:
    spec = client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")])
    pod = await core.create_namespaced_pod("default", client.V1Pod(metadata=meta("p"), spec=spec))
    binding = client.V1Binding(
        metadata=meta("p", uid=pod.metadata.uid), target=client.V1ObjectReference(kind="Node", name="n1")
    )
    resp = await core.create_namespaced_pod_binding("p", "default", binding, _preload_content=False)
    assert resp.status == 201
    bound = await core.read_namespaced_pod("p", "default")
    assert bound.spec.node_name == "n1"
    assert [(c.type, c.status) for c in bound.status.conditions] == [("PodScheduled", "True")]
    again = await core.create_namespaced_pod_binding("p", "default", binding, _preload_content=False)
    assert again.status == 409  # without preloading, kubernetes-asyncio hands back the raw response
    assert 'is already assigned to node "n1"' in (await again.json())["message"]
    eviction = client.V1Eviction(metadata=meta("p"))
    resp = await core.create_namespaced_pod_eviction("p", "default", eviction, _preload_content=False)
    assert resp.status == 201
    assert cluster.store.get("", "pods", "default", "p") is None


async def test_priority_class_resolves_pod_priority(core: client.CoreV1Api, api_client: Any) -> None:
    scheduling = client.SchedulingV1Api(api_client)
    await scheduling.create_priority_class(client.V1PriorityClass(metadata=meta("high"), value=1000))
    containers = [client.V1Container(name="c", image="busybox")]
    high = client.V1Pod(
        metadata=meta("high"), spec=client.V1PodSpec(containers=containers, priority_class_name="high")
    )
    assert (await core.create_namespaced_pod("default", high)).spec.priority == 1000
    plain = client.V1Pod(metadata=meta("plain"), spec=client.V1PodSpec(containers=containers))
    created = await core.create_namespaced_pod("default", plain)
    assert created.spec.priority == 0 and created.spec.preemption_policy == "PreemptLowerPriority"
    missing = client.V1Pod(
        metadata=meta("x"), spec=client.V1PodSpec(containers=containers, priority_class_name="nope")
    )
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_pod("default", missing)
    assert caught.value.status == 403
    assert "no PriorityClass with name nope was found" in json.loads(caught.value.body)["message"]


async def test_bad_query_parameters_are_400(cluster: LocalCluster) -> None:
    import aiohttp

    base = f"{cluster.url}/api/v1/namespaces"
    async with aiohttp.ClientSession() as http:
        for query in (
            "?limit=abc",
            "?limit=-1",
            "?watch=1&timeoutSeconds=soon",
            "?labelSelector=a%20in%20(",
            "?fieldSelector=spec.x%3Dy",
            "?continue=%%%",
        ):
            async with http.get(base + query) as resp:
                body = await resp.json()
                assert resp.status == 400 and body["reason"] == "BadRequest", (query, body)


async def test_wrongly_typed_fields_are_decoding_errors(
    cluster: LocalCluster, ext: client.ApiextensionsV1Api
) -> None:
    import aiohttp

    from tests.localcluster.test_crd import widget, widget_crd

    await ext.create_custom_resource_definition(widget_crd())
    cases = [
        ("/api/v1/namespaces", {"metadata": {"name": "n", "labels": ["a"]}}, "labels"),
        (
            "/api/v1/namespaces/default/pods",
            {"metadata": {"name": "p"}, "spec": {"containers": "busybox"}},
            "spec.containers",
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            {"metadata": {"name": "j"}, "spec": {"parallelism": "2"}},
            "spec.parallelism",
        ),
        (
            "/apis/example.com/v1/namespaces/default/widgets",
            dict(widget("w", size=1), metadata={"name": "w", "annotations": {"a": 1}}),
            "metadata.annotations.a",
        ),
    ]
    async with aiohttp.ClientSession() as http:
        for path, body, field in cases:
            async with http.post(cluster.url + path, json=body) as resp:
                status = await resp.json()
            assert resp.status == 400 and status["reason"] == "BadRequest", (path, status)
            assert "cannot be handled as a" in status["message"] and field in status["message"], status
    assert cluster.store.count("", "pods") == 0
