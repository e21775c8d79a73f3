"""The CA and serving certificates are what the API server's TLS client expects."""

from __future__ import annotations

import datetime as dt

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from kadmit.certs.authority import dns_names, issue_ca, issue_serving, served_names, signed_by, split_bundle


def test_serving_certificate_names_the_service_and_is_signed_by_the_ca() -> None:
    ca = issue_ca()
    serving = issue_serving(ca, "kadmit-webhook-service", "kadmit-system")
    assert served_names(serving) == [
        "kadmit-webhook-service",
        "kadmit-webhook-service.kadmit-system",
        "kadmit-webhook-service.kadmit-system.svc",
        "kadmit-webhook-service.kadmit-system.svc.cluster.local",
    ]
    assert signed_by(serving, ca)
    assert not signed_by(serving, issue_ca())
    assert serving.matches() and ca.matches()
    assert isinstance(serving.private_key, ec.EllipticCurvePrivateKey)
    basic = ca.certificate.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert basic.ca is True
    usage = serving.certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usage


def test_validity_windows_are_configurable_and_capped_by_the_ca() -> None:
    now = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    ca = issue_ca(validity=dt.timedelta(days=10), now=now)
    assert ca.not_after == now + dt.timedelta(days=10)
    assert ca.not_before < now
    serving = issue_serving(ca, "s", "n", validity=dt.timedelta(days=30), now=now)
    assert serving.not_after == ca.not_after
    short = issue_serving(ca, "s", "n", validity=dt.timedelta(days=2), now=now)
    assert short.not_after == now + dt.timedelta(days=2)


def test_successive_cas_are_distinguishable_in_a_bundle() -> None:
    first, second = issue_ca(), issue_ca()
    assert first.certificate.subject != second.certificate.subject
    assert split_bundle(first.cert_pem + second.cert_pem) == [first.cert_pem, second.cert_pem]
    assert dns_names("a", "b")[-1] == "a.b.svc.cluster.local"
