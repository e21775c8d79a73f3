"""LimitRanges end to end: API defaulting, validation, and the LimitRanger plugin before ResourceQuota.

Through kubernetes-asyncio and kubectl against a LocalCluster with its default admission plugins.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiException

from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.interfaces import AdmissionError
from kadmit.localcluster.limitranges import GoQuantity, LimitRanger, aggregate
from kadmit.localcluster.objects import Obj
from kadmit.localcluster.store import Store
from tests.localcluster.conftest_admission import review_request
from tests.localcluster.test_kubectl import Kubectl

NS = "default"


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(bookmark_interval=0.2) as running:
        yield running


@pytest.fixture
async def core(cluster: LocalCluster) -> AsyncIterator[client.CoreV1Api]:
    api = await cluster.api_client()
    async with api:
        yield client.CoreV1Api(api)


def limit_range(name: str, *items: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"limits": list(items)},
    }


def container(name: str = "main", requests: Obj | None = None, limits: Obj | None = None) -> Obj:
    resources: Obj = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": "busybox", "resources": resources}


def pod(name: str, *containers: Obj, init: list[Obj] | None = None) -> Obj:
    spec: Obj = {"containers": list(containers) or [container()]}
    if init:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


async def create_pod(core: client.CoreV1Api, body: Obj) -> Obj:
    created: Obj = core.api_client.sanitize_for_serialization(await core.create_namespaced_pod(NS, body))
    return created


async def refusal(core: client.CoreV1Api, body: Obj) -> Obj:
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_pod(NS, body)
    status: Obj = json.loads(caught.value.body)
    assert caught.value.status == status["code"]
    return status


CONTAINER_LIMITS = {
    "type": "Container",
    "max": {"cpu": "1", "memory": "1Gi"},
    "min": {"cpu": "100m"},
    "default": {"cpu": "500m", "memory": "256Mi"},
    "defaultRequest": {"cpu": "200m", "memory": "128Mi"},
    "maxLimitRequestRatio": {"cpu": "4"},
}


# -- Go's Quantity as messages print it ------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "amount", "kept", "fmt"),
    [
        # As seen in real servers' messages (a Node's hugepages, an HPA, a webhook's claim size).
        ("8Gi", "value:8589934592, scale:0", "", "BinarySI"),
        ("0", "value:0, scale:0", "0", "DecimalSI"),
        ("1Gi", "value:1073741824, scale:0", "1Gi", "BinarySI"),
        ("500m", "value:500, scale:-3", "500m", "DecimalSI"),
        # Not canonical: Go keeps no string; finer than milli: rounded up by SetDefaults_ResourceList.
        ("1000m", "value:1000, scale:-3", "", "DecimalSI"),
        ("0.5", "value:5, scale:-1", "", "DecimalSI"),
        ("100u", "value:1, scale:-3", "", "DecimalSI"),
        (2, "value:2, scale:0", "2", "DecimalSI"),
    ],
)
def test_quantities_print_as_go_prints_a_quantity(raw: object, amount: str, kept: str, fmt: str) -> None:
    no_dec = "d:resource.infDecAmount{Dec:(*inf.Dec)(nil)}"
    assert GoQuantity.parse(raw).go_syntax() == (
        f'resource.Quantity{{i:resource.int64Amount{{{amount}}}, {no_dec}, s:"{kept}", Format:"{fmt}"}}'
    )


def test_string_is_the_kept_text_or_the_canonical_form() -> None:
    assert [str(GoQuantity.parse(raw)) for raw in ("1000m", "0.5", "100u", "1.5Gi", "2Gi")] == [
        "1",
        "500m",
        "1m",
        "1536Mi",
        "2Gi",
    ]


def test_aggregate_prints_one_error_bare_and_several_bracketed_once_each() -> None:
    assert aggregate(["a"]) == "a"
    assert aggregate(["a", "b", "a"]) == "[a, b]"
    assert aggregate(["a", "a"]) == "a"


# -- API defaulting and validation --------------------------------------------------------------


async def test_container_items_are_defaulted_from_max_then_default_then_min(core: client.CoreV1Api) -> None:
    body = limit_range(
        "defaults",
        {
            "type": "Container",
            "max": {"cpu": "2", "memory": "1Gi"},
            "min": {"cpu": "100m", "ephemeral-storage": "1Gi"},
        },
        {"type": "Pod", "max": {"cpu": "4"}},
    )
    created = core.api_client.sanitize_for_serialization(await core.create_namespaced_limit_range(NS, body))
    container_item, pod_item = created["spec"]["limits"]
    assert container_item["default"] == {"cpu": "2", "memory": "1Gi"}
    # max wins over min for cpu (default is filled first, then the request from it).
    assert container_item["defaultRequest"] == {"cpu": "2", "memory": "1Gi", "ephemeral-storage": "1Gi"}
    assert "default" not in pod_item and "defaultRequest" not in pod_item

    body = limit_range("defaults", {"type": "Container", "default": {"cpu": "300m"}})
    body["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    replaced = core.api_client.sanitize_for_serialization(
        await core.replace_namespaced_limit_range("defaults", NS, body)
    )
    assert replaced["spec"]["limits"] == [
        {"type": "Container", "default": {"cpu": "300m"}, "defaultRequest": {"cpu": "300m"}}
    ]


async def invalid(core: client.CoreV1Api, *items: Obj) -> Obj:
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_limit_range(NS, limit_range("bad", *items))
    status: Obj = json.loads(caught.value.body)
    assert caught.value.status == 422 and status["reason"] == "Invalid"
    return status


def go(raw: str) -> str:
    return GoQuantity.parse(raw).go_syntax()


async def test_defaults_outside_min_and_max_are_invalid_with_kubernetes_messages(
    core: client.CoreV1Api,
) -> None:
    status = await invalid(core, {"type": "Container", "max": {"cpu": "1"}, "default": {"cpu": "2"}})
    # default cpu 2 is also the defaulted defaultRequest: both break the ordering.
    assert [(c["field"], c["message"]) for c in status["details"]["causes"]] == [
        (
            "spec.limits[0].defaultRequest[cpu]",
            f"Invalid value: {go('2')}: default request value 2 is greater than max value 1",
        ),
        (
            "spec.limits[0].default[cpu]",
            f"Invalid value: {go('1')}: default value 2 is greater than max value 1",
        ),
    ]
    assert status["message"].startswith('LimitRange "bad" is invalid: [spec.limits[0].defaultRequest[cpu]: ')

    status = await invalid(core, {"type": "Container", "min": {"memory": "1Gi"}, "max": {"memory": "512Mi"}})
    messages = [c["message"] for c in status["details"]["causes"]]
    assert f"Invalid value: {go('1Gi')}: min value 1Gi is greater than max value 512Mi" in messages

    status = await invalid(
        core, {"type": "Container", "defaultRequest": {"cpu": "50m"}, "min": {"cpu": "100m"}}
    )
    assert status["message"] == (
        'LimitRange "bad" is invalid: spec.limits[0].defaultRequest[cpu]: '
        f"Invalid value: {go('50m')}: min value 100m is greater than default request value 50m"
    )


async def test_ratio_type_and_pod_defaults_are_checked(core: client.CoreV1Api) -> None:
    status = await invalid(core, {"type": "Container", "maxLimitRequestRatio": {"cpu": "0.5"}})
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "field": "spec.limits[0].maxLimitRequestRatio[cpu]",
            "message": f"Invalid value: {go('0.5')}: ratio 500m is less than 1",
        }
    ]
    status = await invalid(
        core, {"type": "Pod", "min": {"cpu": "1"}, "max": {"cpu": "2"}, "maxLimitRequestRatio": {"cpu": "3"}}
    )
    assert status["details"]["causes"][0]["message"] == (
        f"Invalid value: {go('3')}: ratio 3 is greater than max/min = 2.000000"
    )

    status = await invalid(
        core,
        {"type": "Pod", "default": {"cpu": "1"}, "defaultRequest": {"cpu": "1"}},
        {"type": "Node"},
        {"type": "Pod"},
    )
    assert [(c["reason"], c["field"], c["message"]) for c in status["details"]["causes"]] == [
        (
            "FieldValueForbidden",
            "spec.limits[0].default",
            "Forbidden: may not be specified when `type` is 'Pod'",
        ),
        (
            "FieldValueForbidden",
            "spec.limits[0].defaultRequest",
            "Forbidden: may not be specified when `type` is 'Pod'",
        ),
        (
            "FieldValueInvalid",
            "spec.limits[1].type",
            'Invalid value: "Node": must be a standard limit type or fully qualified',
        ),
        ("FieldValueDuplicate", "spec.limits[2].type", 'Duplicate value: "Pod"'),
    ]

    status = await invalid(core, {"type": "PersistentVolumeClaim", "max": {"cpu": "1"}})
    assert [c["message"] for c in status["details"]["causes"]] == [
        "Required value: either minimum or maximum storage value is required, but neither was provided"
    ]
    status = await invalid(core, {"type": "Pod", "max": {"foo": "1"}})
    assert [c["message"] for c in status["details"]["causes"]] == [
        'Invalid value: "foo": must be a standard resource type or fully qualified',
        'Invalid value: "foo": must be a standard resource for containers',
    ]
    status = await invalid(core, {"type": "Container", "max": {"pods": "1"}})
    assert (
        status["details"]["causes"][0]["message"]
        == 'Invalid value: "pods": must be a standard resource for containers'
    )


# -- the LimitRanger plugin --------------------------------------------------------------------


async def test_a_pod_without_resources_gets_the_defaults_and_the_annotation(core: client.CoreV1Api) -> None:
    await core.create_namespaced_limit_range(NS, limit_range("limits", CONTAINER_LIMITS))
    created = await create_pod(core, pod("bare"))
    assert created["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "500m", "memory": "256Mi"},
        "requests": {"cpu": "200m", "memory": "128Mi"},
    }
    assert created["metadata"]["annotations"] == {
        "kubernetes.io/limit-ranger": (
            "LimitRanger plugin set: cpu, memory request for container main; "
            "cpu, memory limit for container main"
        )
    }
    assert created["status"]["qosClass"] == "Burstable"  # computed from the defaulted resources

    # A stated limit is the request (API defaulting, before admission), not defaultRequest.
    created = await create_pod(core, pod("limited", container(limits={"cpu": "800m", "memory": "512Mi"})))
    assert created["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "800m", "memory": "512Mi"},
        "requests": {"cpu": "800m", "memory": "512Mi"},
    }
    assert "annotations" not in created["metadata"]
    assert created["status"]["qosClass"] == "Guaranteed"


GUARANTEED = {"cpu": "1", "memory": "1Gi"}


@pytest.mark.parametrize(
    ("containers", "init", "qos"),
    [
        # Only cpu and memory count, and only amounts above zero.
        ([container(requests={"nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "1"})], None, "BestEffort"),
        ([container(requests={"cpu": "0"})], None, "BestEffort"),
        # Amounts are compared, not their spellings.
        ([container(requests={"cpu": "1000m", "memory": "1024Mi"}, limits=GUARANTEED)], None, "Guaranteed"),
        ([container("a", limits=GUARANTEED), container("b", limits=GUARANTEED)], None, "Guaranteed"),
        # Every container, init containers too, must limit both cpu and memory.
        ([container(limits=GUARANTEED)], [container("setup", requests={"cpu": "1"})], "Burstable"),
        ([container(limits={"cpu": "1"})], None, "Burstable"),
        # The sums decide: requests below the limits in one container make the pod Burstable.
        ([container("a", limits=GUARANTEED), container("b", requests={"cpu": "500m"}, limits=GUARANTEED)],
         None, "Burstable"),
    ],
)
async def test_the_qos_class_is_kubernetes_compute_pod_qos(
    core: client.CoreV1Api, containers: list[Obj], init: list[Obj] | None, qos: str
) -> None:
    created = await create_pod(core, pod("qos", *containers, init=init))
    assert created["status"]["qosClass"] == qos


async def test_a_default_limit_below_the_stated_request_makes_the_pod_invalid(core: client.CoreV1Api) -> None:
    # LimitRanger gives the limit before the pod is validated, and a request may not exceed it.
    await core.create_namespaced_limit_range(NS, limit_range("limits", CONTAINER_LIMITS))
    status = await refusal(core, pod("greedy", container(requests={"cpu": "800m", "memory": "2"})))
    assert status["code"] == 422 and status["reason"] == "Invalid"
    assert status["message"] == (
        'Pod "greedy" is invalid: spec.containers[0].resources.requests[cpu]: '
        'Invalid value: "800m": must be less than or equal to cpu limit of 500m'
    )
    # Stated together, the same: no LimitRange needed.
    stated = container(requests={"cpu": "2"}, limits={"cpu": "1"})
    job_pod = pod("stated", stated)
    job_pod["metadata"]["namespace"] = "default"
    with pytest.raises(ApiException) as caught:
        await core.create_namespaced_pod("default", job_pod)
    assert "must be less than or equal to cpu limit of 1" in json.loads(caught.value.body)["message"]


async def test_init_containers_are_defaulted_too(core: client.CoreV1Api) -> None:
    item = {"type": "Container", "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "200m"}}
    await core.create_namespaced_limit_range(NS, limit_range("cpu", item))
    created = await create_pod(core, pod("init", init=[container("setup")]))
    assert created["spec"]["initContainers"][0]["resources"] == {
        "limits": {"cpu": "500m"},
        "requests": {"cpu": "200m"},
    }
    assert created["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu request for container main; cpu limit for container main; "
        "cpu request for init container setup; cpu limit for init container setup"
    )


async def test_container_constraints_refuse_with_the_kubernetes_messages(core: client.CoreV1Api) -> None:
    await core.create_namespaced_limit_range(NS, limit_range("limits", CONTAINER_LIMITS))
    status = await refusal(core, pod("big", container(limits={"cpu": "2"})))
    assert status["code"] == 403 and status["reason"] == "Forbidden"
    assert (
        status["message"] == 'pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 2'
    )
    assert status["details"] == {"name": "big", "kind": "pods"}

    status = await refusal(core, pod("small", container(requests={"cpu": "50m"})))
    assert status["message"] == (
        'pods "small" is forbidden: [minimum cpu usage per Container is 100m, but request is 50m, '
        "cpu max limit to request ratio per Container is 4, but provided ratio is 10.000000]"
    )

    status = await refusal(core, pod("zero", container(requests={"cpu": "0"}, limits={"cpu": "500m"})))
    assert status["message"] == (
        'pods "zero" is forbidden: [minimum cpu usage per Container is 100m, but request is 0, '
        "cpu max limit to request ratio per Container is 4, but no request is specified or request is 0]"
    )

    await core.create_namespaced_limit_range(
        NS, limit_range("memory", {"type": "Container", "max": {"memory": "2Gi"}})
    )
    # Names its generated name, as the real plugin validates after name generation.
    body = pod("", container(limits={"memory": "3Gi"}))
    body["metadata"] = {"generateName": "gen-", "namespace": NS}
    status = await refusal(core, body)
    assert status["message"].startswith('pods "gen-')
    assert status["message"].endswith(
        '" is forbidden: maximum memory usage per Container is 1Gi, but limit is 3Gi'
    )


async def test_pod_constraints_apply_to_the_sum_of_the_containers(core: client.CoreV1Api) -> None:
    item = {"type": "Container", "default": {"cpu": "500m", "memory": "64Mi"}}
    await core.create_namespaced_limit_range(NS, limit_range("defaults", item))
    await core.create_namespaced_limit_range(
        NS, limit_range("pods", {"type": "Pod", "max": {"cpu": "1"}, "min": {"memory": "100Mi"}})
    )
    await create_pod(core, pod("pair", container("a"), container("b")))  # 2 x 500m = 1, 2 x 64Mi
    status = await refusal(core, pod("trio", container("a"), container("b"), container("c")))
    assert status["message"] == 'pods "trio" is forbidden: maximum cpu usage per Pod is 1, but limit is 1500m'
    status = await refusal(core, pod("solo"))
    assert (
        status["message"]
        == 'pods "solo" is forbidden: minimum memory usage per Pod is 100Mi, but request is 64Mi'
    )
    # An init container counts as the larger of itself and what runs beside it; errors come min first.
    status = await refusal(core, pod("init", container("a"), init=[container("setup", limits={"cpu": "2"})]))
    assert status["message"] == (
        'pods "init" is forbidden: [minimum memory usage per Pod is 100Mi, but request is 64Mi, '
        "maximum cpu usage per Pod is 1, but limit is 2]"
    )


async def test_several_limit_ranges_all_apply_in_name_order(core: client.CoreV1Api) -> None:
    first = {"type": "Container", "default": {"cpu": "300m"}, "defaultRequest": {"cpu": "100m"}}
    second = {"type": "Container", "default": {"cpu": "1", "memory": "64Mi"}}
    await core.create_namespaced_limit_range(
        NS, limit_range("b-more", second, {"type": "Pod", "max": {"memory": "100Mi"}})
    )
    await core.create_namespaced_limit_range(NS, limit_range("a-defaults", first))
    created = await create_pod(core, pod("one"))
    assert created["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "300m", "memory": "64Mi"},
        "requests": {"cpu": "100m", "memory": "64Mi"},
    }
    # Each LimitRange that sets something rewrites the annotation, as the plugin does.
    assert created["metadata"]["annotations"]["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: memory request for container main; memory limit for container main"
    )
    status = await refusal(core, pod("two", container("a"), container("b")))
    assert (
        status["message"]
        == 'pods "two" is forbidden: maximum memory usage per Pod is 100Mi, but limit is 128Mi'
    )


async def test_resource_quota_charges_the_defaulted_requests(
    core: client.CoreV1Api, cluster: LocalCluster
) -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "compute", "namespace": NS},
        "spec": {"hard": {"requests.cpu": "1"}},
    }
    await core.create_namespaced_resource_quota(NS, quota)
    status = await refusal(core, pod("unspecified"))
    assert (
        status["message"]
        == 'pods "unspecified" is forbidden: failed quota: compute: must specify requests.cpu for: main'
    )

    item = {"type": "Container", "defaultRequest": {"cpu": "400m"}}
    await core.create_namespaced_limit_range(NS, limit_range("requests", item))
    await create_pod(core, pod("p1"))
    await create_pod(core, pod("p2"))
    status = await refusal(core, pod("p3"))
    assert status["message"] == (
        'pods "p3" is forbidden: exceeded quota: compute, requested: requests.cpu=400m, '
        "used: requests.cpu=800m, limited: requests.cpu=1"
    )
    stored = await core.read_namespaced_resource_quota("compute", NS)
    assert stored.status.used == {"requests.cpu": "800m"}


async def test_claims_are_held_to_persistent_volume_claim_items() -> None:
    """The local cluster serves no PersistentVolumeClaims; the plugin is asked directly, as the core would."""
    store = Store()
    plugin = LimitRanger(store)
    item = {"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "10Gi"}}
    store.create("", "limitranges", limit_range("storage", item))

    def claim(name: str, size: str) -> Obj:
        spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": NS},
            "spec": spec,
        }

    assert await plugin.validate(review_request("persistentvolumeclaims", claim("fits", "5Gi"))) == []
    for name, size, why in (
        ("huge", "20Gi", "maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi"),
        ("tiny", "500Mi", "minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"),
    ):
        with pytest.raises(AdmissionError) as denied:
            await plugin.validate(review_request("persistentvolumeclaims", claim(name, size)))
        assert denied.value.status["message"] == f'persistentvolumeclaims "{name}" is forbidden: {why}'
    # A claim that grows past the max on UPDATE is refused too; one being deleted is let be.
    grown = review_request("persistentvolumeclaims", claim("fits", "20Gi"), old=claim("fits", "5Gi"))
    with pytest.raises(AdmissionError):
        await plugin.validate(grown)
    leaving = claim("fits", "5Gi")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert await plugin.validate(replace(grown, old_object=leaving)) == []
    # Pods are left alone on UPDATE: their containers cannot change.
    assert (await plugin.mutate(review_request("pods", pod("p"), old=pod("p")))).object == pod("p")


# -- kubectl ----------------------------------------------------------------------------------

LIMIT_RANGE_YAML = """\
apiVersion: v1
kind: LimitRange
metadata: {name: cpu-mem, namespace: default}
spec:
  limits:
  - type: Container
    max: {cpu: "1", memory: 1Gi}
    defaultRequest: {cpu: 250m}
"""
BAD_YAML = """\
apiVersion: v1
kind: LimitRange
metadata: {name: bad, namespace: default}
spec:
  limits:
  - {type: PersistentVolumeClaim, min: {storage: 2Gi}, max: {storage: 1Gi}}
"""
POD_YAML = """\
apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  containers:
  - name: main
    image: busybox
    resources: %s
"""


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kubectl_shows_defaults_and_refusals(cluster: LocalCluster, tmp_path: Path) -> None:
    kubectl = Kubectl(cluster, tmp_path / "kube-cache")
    manifest = tmp_path / "limitrange.yaml"
    manifest.write_text(LIMIT_RANGE_YAML)
    await kubectl("create", "-f", str(manifest))
    _, out, _ = await kubectl("get", "limitrange", "cpu-mem", "-o", "yaml")
    (item,) = yaml.safe_load(out)["spec"]["limits"]
    assert item["default"] == {"cpu": "1", "memory": "1Gi"}
    assert item["defaultRequest"] == {"cpu": "250m", "memory": "1Gi"}

    bare = tmp_path / "bare.yaml"
    bare.write_text(POD_YAML % ("bare", "{}"))
    await kubectl("create", "-f", str(bare))
    _, out, _ = await kubectl("get", "pod", "bare", "-o", "json")
    assert json.loads(out)["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "1", "memory": "1Gi"},
        "requests": {"cpu": "250m", "memory": "1Gi"},
    }

    big = tmp_path / "big.yaml"
    big.write_text(POD_YAML % ("big", "{limits: {cpu: 1500m}}"))
    code, _, err = await kubectl("create", "-f", str(big), check=False)
    assert code == 1
    assert err.strip() == (
        f'Error from server (Forbidden): error when creating "{big}": '
        'pods "big" is forbidden: maximum cpu usage per Container is 1, but limit is 1500m'
    )

    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_YAML)
    code, _, err = await kubectl("create", "-f", str(bad), check=False)
    assert code == 1
    assert err.strip() == (
        f'The LimitRange "bad" is invalid: spec.limits[0].min[storage]: Invalid value: {go("2Gi")}: '
        "min value 2Gi is greater than max value 1Gi"
    )
