"""The protobuf body decoder: real kubectl bodies, hand-encoded edge cases, and over HTTP."""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kadmit.localcluster import protobuf
from kadmit.localcluster.cluster import LocalCluster
from kadmit.localcluster.errors import ApiError
from kadmit.localcluster.protobuf import UnsupportedProtobuf, decode_body, decode_object

# Bodies kubectl 1.32.4 posted to a LocalCluster, captured from ``cluster.requests`` after
# ``kubectl create namespace team-a``, ``create quota q --hard=pods=2,cpu=1,requests.memory=1Gi
# -n team-a``, ``create secret generic s --from-literal=k=v -n team-a``, ``create service
# clusterip svc --tcp=80:8080 -n team-a`` and ``create job hello --image=busybox -n team-a --
# echo hi``.
KUBECTL_NAMESPACE = (
    b'k8s\x00\n\x0f\n\x02v1\x12\tNamespace\x12\x1e\n\x16\n\x06team-a\x12\x00\x1a\x00"\x00*\x002\x008'
    b'\x00B\x00\x12\x00\x1a\x02\n\x00\x1a\x00"\x00'
)
KUBECTL_QUOTA = (
    b'k8s\x00\n\x13\n\x02v1\x12\rResourceQuota\x12P\n\x17\n\x01q\x12\x00\x1a\x06team-a"\x00*\x002\x00'
    b"8\x00B\x00\x123\n\n\n\x03cpu\x12\x03\n\x011\n\x0b\n\x04pods\x12\x03\n\x012\n\x18\n\x0frequests.me"
    b'mory\x12\x05\n\x031Gi\x1a\x00\x1a\x00"\x00'
)
KUBECTL_SECRET = (
    b'k8s\x00\n\x0c\n\x02v1\x12\x06Secret\x12#\n\x17\n\x01s\x12\x00\x1a\x06team-a"\x00*\x002\x008\x00B'
    b'\x00\x12\x06\n\x01k\x12\x01v\x1a\x00\x1a\x00"\x00'
)
KUBECTL_SERVICE = (
    b'k8s\x00\n\r\n\x02v1\x12\x07Service\x12o\n%\n\x03svc\x12\x00\x1a\x06team-a"\x00*\x002\x008\x00B'
    b'\x00Z\n\n\x03app\x12\x03svc\x12B\n\x1b\n\x0780-8080\x12\x03TCP\x18P"\x07\x08\x00\x10\x90?\x1a\x00('
    b'\x00\x12\n\n\x03app\x12\x03svc\x1a\x00"\tClusterIP:\x00B\x00R\x00Z\x00`\x00h\x00\x1a\x02\n\x00\x1a'
    b'\x00"\x00'
)
KUBECTL_JOB = (
    b'k8s\x00\n\x0f\n\x08batch/v1\x12\x03Job\x12\x90\x01\n\x1b\n\x05hello\x12\x00\x1a\x06team-a"\x00*'
    b'\x002\x008\x00B\x00\x12g2e\n\x10\n\x00\x12\x00\x1a\x00"\x00*\x002\x008\x00B\x00\x12Q\x12.\n\x05h'
    b"ello\x12\x07busybox\x1a\x04echo\x1a\x02hi*\x00B\x00j\x00r\x00\x80\x01\x00\x88\x01\x00\x90\x01\x00"
    b"\xa2\x01\x00\x1a\x05Never2\x00B\x00J\x00R\x00X\x00`\x00h\x00\x82\x01\x00\x8a\x01\x00\x9a\x01\x00"
    b'\xc2\x01\x00\x1a\x08 \x00(\x000\x00:\x00\x1a\x00"\x00'
)


# -- a tiny encoder for the cases kubectl does not produce -------------------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative numbers as Go writes them: ten bytes, two's complement
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def num(field: int, value: int) -> bytes:
    return varint(field << 3) + varint(value)


def blob(field: int, payload: bytes) -> bytes:
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def text(field: int, value: str) -> bytes:
    return blob(field, value.encode())


def msg(field: int, *parts: bytes) -> bytes:
    return blob(field, b"".join(parts))


def entry(field: int, key: str, value: bytes) -> bytes:
    """A map entry; ``value`` is the encoded field 2 (or b"" for an entry without one)."""
    return msg(field, text(1, key), value)


def envelope(api_version: str, kind: str, *parts: bytes) -> bytes:
    return (
        b"k8s\x00"
        + msg(1, text(1, api_version), text(2, kind))
        + blob(2, b"".join(parts))
        + text(3, "")
        + text(4, "")
    )


def meta(name: str, *extra: bytes) -> bytes:
    """ObjectMeta as gogo writes it: every string present even when empty, an empty Time."""
    return msg(1, text(1, name), text(2, ""), text(3, ""), num(7, 0), msg(8), *extra)


# -- real kubectl bodies -------------------------------------------------------------------------


def test_kubectl_namespace_quota_secret_service() -> None:
    assert decode_object(KUBECTL_NAMESPACE) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-a"},
        "spec": {},
        "status": {},
    }
    quota = decode_object(KUBECTL_QUOTA)
    assert quota["metadata"] == {"name": "q", "namespace": "team-a"}
    assert quota["spec"] == {"hard": {"cpu": "1", "pods": "2", "requests.memory": "1Gi"}}
    secret = decode_object(KUBECTL_SECRET)
    assert secret["data"] == {"k": "dg=="}  # bytes are base64 in JSON
    assert "type" not in secret and "immutable" not in secret
    service = decode_object(KUBECTL_SERVICE)
    assert service["spec"] == {
        "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
        "selector": {"app": "svc"},
        "type": "ClusterIP",
    }
    assert service["metadata"]["labels"] == {"app": "svc"}


def test_kubectl_job_has_only_what_its_json_would_have() -> None:
    assert decode_object(KUBECTL_JOB) == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "hello", "namespace": "team-a"},
        "spec": {
            "template": {
                "metadata": {},
                "spec": {
                    "containers": [
                        {"name": "hello", "image": "busybox", "command": ["echo", "hi"], "resources": {}}
                    ],
                    "restartPolicy": "Never",
                },
            }
        },
        "status": {},
    }


# -- zero values, pointers, special types --------------------------------------------------------


def job_with(*spec: bytes, pod: tuple[bytes, ...] = (), container: tuple[bytes, ...] = ()) -> dict[str, Any]:
    template = msg(6, msg(2, msg(2, text(1, "c"), text(2, "busybox"), *container), *pod))
    return decode_object(envelope("batch/v1", "Job", meta("j"), msg(2, *spec, template)))


def test_pointer_fields_keep_zero_and_value_fields_drop_it() -> None:
    job = job_with(
        num(7, 0),  # backoffLimit: *int32
        num(10, 0),  # suspend: *bool
        num(1, 0),  # parallelism: *int32
        num(8, 0),  # ttlSecondsAfterFinished: *int32
        pod=(num(4, 0), num(11, 0), num(21, 0), text(19, "")),  # grace *int64, hostNetwork, automount *bool
        container=(msg(6, text(1, ""), num(2, 0), num(3, 8080)), num(16, 0), text(13, "")),
    )
    spec = job["spec"]
    assert spec["backoffLimit"] == 0 and spec["suspend"] is False and spec["parallelism"] == 0
    assert spec["ttlSecondsAfterFinished"] == 0
    pod = spec["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 0 and pod["automountServiceAccountToken"] is False
    assert "hostNetwork" not in pod and "schedulerName" not in pod
    [container] = pod["containers"]
    assert container["ports"] == [{"containerPort": 8080}]
    assert "stdin" not in container and "terminationMessagePath" not in container


def test_negative_numbers_packed_repeats_and_security_context() -> None:
    rule = msg(1, text(1, "FailJob"), msg(2, text(2, "In"), blob(3, varint(1) + varint(42)), num(3, 7)))
    job = job_with(
        num(3, -5),  # activeDeadlineSeconds (int64): ten-byte varint
        msg(11, rule),  # podFailurePolicy, exit codes packed then one unpacked
        pod=(msg(14, num(2, 0), num(3, 1), num(4, 1000), num(4, 2000)),),  # runAsUser 0, nonRoot, groups
        container=(msg(15, num(7, 0), msg(1, text(2, "ALL"))),),  # allowPrivilegeEscalation false
    )
    assert job["spec"]["activeDeadlineSeconds"] == -5
    assert job["spec"]["podFailurePolicy"] == {
        "rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1, 42, 7]}}]
    }
    pod = job["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsUser": 0,
        "runAsNonRoot": True,
        "supplementalGroups": [1000, 2000],
    }
    assert pod["containers"][0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
    }


def test_volumes_probes_and_inline_structs() -> None:
    volumes = (
        msg(1, text(1, "scratch"), msg(2, msg(2, text(1, ""), msg(2, text(1, "1Gi"))))),  # emptyDir
        msg(1, text(1, "cfg"), msg(2, msg(19, msg(1, text(1, "settings")), num(3, 0o644)))),  # configMap
        msg(1, text(1, "tmp"), msg(2, msg(2))),  # emptyDir: {} is meaningful, so it stays
        msg(1, text(1, "data"), msg(2, msg(10, text(1, "claim"), num(2, 0)))),  # persistentVolumeClaim
        msg(1, text(1, "san"), msg(2, msg(17, text(1, "wwn-1"), num(2, 0)))),  # fc: lun is *int32
    )
    probe = msg(
        11, msg(1, msg(2, text(1, "/ready"), msg(2, num(1, 1), num(2, 0), text(3, "http")))), num(4, 5)
    )
    env = msg(7, text(1, "KEY"), msg(3, msg(4, msg(1, text(1, "creds")), text(2, "token"), num(3, 0))))
    pod = job_with(pod=volumes, container=(probe, env))["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "cfg", "configMap": {"name": "settings", "defaultMode": 0o644}},
        {"name": "tmp", "emptyDir": {}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "claim"}},
        {"name": "san", "fc": {"targetWWNs": ["wwn-1"], "lun": 0}},
    ]
    container = pod["containers"][0]
    assert container["readinessProbe"] == {"httpGet": {"path": "/ready", "port": "http"}, "periodSeconds": 5}
    assert container["env"] == [
        {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token", "optional": False}}}
    ]


def test_metadata_maps_owner_references_times_and_managed_fields() -> None:
    owner = msg(13, text(5, "batch/v1"), text(1, "Job"), text(3, "j"), text(4, "u-1"), num(6, 1), num(7, 0))
    managed = msg(17, text(1, "kubectl"), msg(4, num(1, 1_700_000_000)), msg(7, text(1, '{"f:data":{}}')))
    body = envelope(
        "v1",
        "ConfigMap",
        meta(
            "cm",
            entry(11, "team", text(2, "")),  # an empty label value is a value
            entry(12, "note", b""),  # an entry without its value field: the empty string
            owner,
            text(14, "example.com/keep"),
            managed,
        ),
        num(4, 0),  # immutable: *bool
        entry(2, "a", text(2, "b")),
        entry(3, "bin", blob(2, b"\x00\xff")),
    )
    cm = decode_object(body)
    assert cm["metadata"] == {
        "name": "cm",
        "labels": {"team": ""},
        "annotations": {"note": ""},
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "j",
                "uid": "u-1",
                "controller": True,
                "blockOwnerDeletion": False,
            }
        ],
        "finalizers": ["example.com/keep"],
        "managedFields": [{"manager": "kubectl", "time": "2023-11-14T22:13:20Z", "fieldsV1": {"f:data": {}}}],
    }
    assert cm["immutable"] is False and cm["data"] == {"a": "b"} and cm["binaryData"] == {"bin": "AP8="}
    dated = decode_object(envelope("v1", "Namespace", meta("n", msg(9, num(1, 86400), num(2, 5)))))
    assert dated["metadata"]["deletionTimestamp"] == "1970-01-02T00:00:00Z"


def test_quota_scope_selector_and_delete_options() -> None:
    requirement = msg(1, text(1, "PriorityClass"), text(2, "In"), text(3, "high"))
    quota = decode_object(
        envelope("v1", "ResourceQuota", meta("q"), msg(2, text(2, "NotTerminating"), msg(3, requirement)))
    )
    assert quota["spec"] == {
        "scopes": ["NotTerminating"],
        "scopeSelector": {
            "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
        },
    }
    options = decode_object(envelope("batch/v1", "DeleteOptions", num(1, 0), text(4, "Foreground")))
    assert options == {
        "apiVersion": "batch/v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": 0,
        "propagationPolicy": "Foreground",
    }
    eviction = decode_object(envelope("policy/v1", "Eviction", meta("p"), msg(2, num(1, 0))))
    assert eviction["deleteOptions"] == {"gracePeriodSeconds": 0} and eviction["metadata"] == {"name": "p"}


# -- what is skipped, refused and rejected -------------------------------------------------------


def test_unknown_field_is_skipped_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    protobuf.reset_unknown_fields_log()
    body = envelope("v1", "Namespace", meta("n", text(99, "from the future")), msg(2, num(50, 1)))
    with caplog.at_level(logging.WARNING, logger="kadmit.localcluster.protobuf"):
        assert decode_object(body)["metadata"] == {"name": "n"}
        decode_object(body)
    logged = [r.getMessage() for r in caplog.records]
    assert logged == [
        "skipping unknown protobuf field 99 of meta.ObjectMeta (a newer client?)",
        "skipping unknown protobuf field 50 of core.NamespaceSpec (a newer client?)",
    ]


def test_unknown_volume_source_and_unknown_kind_are_415() -> None:
    volume = msg(1, text(1, "v"), msg(2, msg(99, text(1, "x"))))
    with pytest.raises(UnsupportedProtobuf, match=r"field 99 of core.VolumeSource \(a volume source\)"):
        job_with(pod=(volume,))
    with pytest.raises(ApiError) as refused:
        decode_body(envelope("networking.k8s.io/v1", "Ingress", meta("i")))
    assert refused.value.code == 415
    message = refused.value.status["message"]
    assert message.startswith("protobuf bodies are supported for ClusterRole, ")
    assert message.endswith("only, not networking.k8s.io/v1 Ingress; send JSON")
    assert "Job, Namespace, Pod" in message
    gzipped = envelope("v1", "Namespace", meta("n"))[:-4] + text(3, "gzip") + text(4, "")
    with pytest.raises(UnsupportedProtobuf, match="contentEncoding 'gzip'"):
        decode_object(gzipped)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b'{"kind": "Namespace"}', "does not start with the magic bytes"),
        (b"k8s\x00\n", "varint runs past the end"),
        (b"k8s\x00" + msg(1, text(1, "v1")), "names no apiVersion and kind"),
        (b"k8s\x00\x0b", "wire type 3"),
        (b"k8s\x00\x02\x00", "field number is 0"),
        (b"k8s\x00\x08" + b"\xff" * 11, "longer than 10 bytes"),
        (b"k8s\x00\x12\x05ab", "field 2 runs past the end"),
        (
            envelope("v1", "Namespace", msg(1, blob(1, b"\xff\xfe"))),
            "meta.ObjectMeta.name is not valid UTF-8",
        ),
        (envelope("v1", "Namespace", msg(1, num(11, 3))), "meta.ObjectMeta.labels has wire type 0"),
        (
            envelope("v1", "Namespace", meta("n", msg(8, num(1, 1 << 62)))),
            "creationTimestamp is out of range",
        ),
    ],
)
def test_malformed_bytes_are_400(body: bytes, why: str) -> None:
    with pytest.raises(ApiError) as rejected:
        decode_body(body)
    assert rejected.value.code == 400 and rejected.value.status["reason"] == "BadRequest"
    assert rejected.value.status["message"].startswith("the request body is not valid protobuf: ")
    assert why in rejected.value.status["message"]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.sampled_from([KUBECTL_JOB, KUBECTL_SERVICE, KUBECTL_QUOTA]))
def test_any_bytes_give_a_status_error_or_an_object(noise: bytes, real: bytes) -> None:
    """Garbage, or a real body with a stretch overwritten, never escapes as another exception."""
    for body in (b"k8s\x00" + noise, real[: len(real) // 2] + noise + real[len(real) // 2 + len(noise) :]):
        try:
            decoded = decode_body(body)
        except ApiError as exc:
            assert exc.code in (400, 415)
        else:
            assert isinstance(decoded, dict) and "kind" in decoded


# -- over HTTP ----------------------------------------------------------------------------------

PROTOBUF_HEADERS = {
    "Content-Type": "application/vnd.kubernetes.protobuf",
    "Accept": "application/vnd.kubernetes.protobuf, */*",
}


async def test_http_create_answers_json_and_errors_are_status(cluster: LocalCluster) -> None:
    async with aiohttp.ClientSession(headers=PROTOBUF_HEADERS) as http:
        async with http.post(f"{cluster.url}/api/v1/namespaces", data=KUBECTL_NAMESPACE) as resp:
            assert resp.status == 201 and resp.headers["Content-Type"] == "application/json"
            created = await resp.json()
        assert created["metadata"]["name"] == "team-a" and created["status"] == {"phase": "Active"}
        async with http.post(f"{cluster.url}/apis/batch/v1/namespaces/team-a/jobs", data=KUBECTL_JOB) as resp:
            assert resp.status == 201
            job = await resp.json()
        assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["echo", "hi"]
        assert job["spec"]["backoffLimit"] == 6  # the server's defaulting ran on the decoded body
        async with http.post(f"{cluster.url}/api/v1/namespaces", data=b"k8s\x00\x12\x05ab") as resp:
            assert resp.status == 400 and resp.headers["Content-Type"] == "application/json"
            assert (await resp.json())["reason"] == "BadRequest"
        ingress = envelope("networking.k8s.io/v1", "Ingress", meta("i"))
        async with http.post(f"{cluster.url}/api/v1/namespaces", data=ingress) as resp:
            assert resp.status == 415 and (await resp.json())["reason"] == "UnsupportedMediaType"
        url = f"{cluster.url}/apis/batch/v1/namespaces/team-a/jobs/hello"
        options = envelope("batch/v1", "DeleteOptions", text(4, "Orphan"))
        async with http.delete(url, data=options) as resp:
            assert resp.status == 202  # the decoded propagationPolicy: Orphan holds it for the GC
            assert (await resp.json())["metadata"]["finalizers"] == ["orphan"]
