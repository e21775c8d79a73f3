"""A self-signed CA and the webhook's serving certificate, made with ``cryptography``.

Keys are EC P-256: generating one takes well under a millisecond (an RSA 2048 key takes tens
to hundreds, long enough to stall the event loop during a rotation), handshakes are cheaper,
and the Kubernetes API server's Go TLS stack verifies ECDSA chains as readily as RSA ones.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import cached_property

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

BACKDATE = dt.timedelta(minutes=5)
"""Certificates start a little in the past so clocks that lag ours still accept them."""


class AuthorityError(ValueError):
    """PEM data that is not a usable certificate or key."""


@dataclass(frozen=True)
class KeyPair:
    """A certificate (PEM) with its private key (PEM, PKCS#8, unencrypted)."""

    cert_pem: bytes
    key_pem: bytes

    @cached_property
    def certificate(self) -> x509.Certificate:
        try:
            return x509.load_pem_x509_certificate(self.cert_pem)
        except ValueError as exc:
            raise AuthorityError(f"cannot read certificate: {exc}") from None

    @cached_property
    def private_key(self) -> ec.EllipticCurvePrivateKey:
        try:
            key = serialization.load_pem_private_key(self.key_pem, password=None)
        except (ValueError, TypeError) as exc:
            raise AuthorityError(f"cannot read private key: {exc}") from None
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise AuthorityError(f"expected an EC private key, got {type(key).__name__}")
        return key

    @property
    def not_before(self) -> dt.datetime:
        return self.certificate.not_valid_before_utc

    @property
    def not_after(self) -> dt.datetime:
        return self.certificate.not_valid_after_utc

    def matches(self) -> bool:
        """Whether the key belongs to the certificate."""
        fmt = serialization.PublicFormat.SubjectPublicKeyInfo
        enc = serialization.Encoding.DER
        return bool(
            self.certificate.public_key().public_bytes(enc, fmt)
            == self.private_key.public_key().public_bytes(enc, fmt)
        )


def dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server may use for ``service`` in ``namespace``."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def _now(now: dt.datetime | None) -> dt.datetime:
    return now if now is not None else dt.datetime.now(dt.UTC)


def _private_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _key_id(key: ec.EllipticCurvePublicKey) -> x509.SubjectKeyIdentifier:
    return x509.SubjectKeyIdentifier.from_public_key(key)


def issue_ca(
    common_name: str = "kadmit-webhook-ca",
    validity: dt.timedelta = dt.timedelta(days=365),
    now: dt.datetime | None = None,
) -> KeyPair:
    """A new self-signed CA, valid from a little before ``now`` for ``validity``."""
    start = _now(now)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            # A unique serial in the subject keeps successive CAs distinguishable in a bundle.
            x509.NameAttribute(NameOID.SERIAL_NUMBER, format(x509.random_serial_number(), "x")),
        ]
    )
    cert = (
        _builder(name, name, key, start, start + validity, ca=True)
        .add_extension(_key_id(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _private_pem(key))


def issue_serving(
    ca: KeyPair,
    service: str,
    namespace: str,
    validity: dt.timedelta = dt.timedelta(days=90),
    now: dt.datetime | None = None,
) -> KeyPair:
    """A serving certificate for the Service's DNS names, signed by ``ca``; never outlives the CA."""
    start = _now(now)
    names = dns_names(service, namespace)
    key = ec.generate_private_key(ec.SECP256R1())
    not_after = min(start + validity, ca.not_after)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[2])])
    cert = (
        _builder(subject, ca.certificate.subject, key, start, not_after, ca=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
        .add_extension(_key_id(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.private_key.public_key()), critical=False
        )
        .sign(ca.private_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _private_pem(key))


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    start: dt.datetime,
    not_after: dt.datetime,
    *,
    ca: bool,
) -> x509.CertificateBuilder:
    """What a CA and a serving certificate share: a fresh serial, validity from a little before
    ``start``, and basic constraints and key usage (a CA signs certificates, a leaf only data)."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )


def served_names(pair: KeyPair) -> list[str]:
    try:
        san = pair.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return []
    return [str(n) for n in san.value.get_values_for_type(x509.DNSName)]


def signed_by(leaf: KeyPair, ca: KeyPair) -> bool:
    """Whether ``ca``'s key signed ``leaf``."""
    try:
        leaf.certificate.verify_directly_issued_by(ca.certificate)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def split_bundle(pem: bytes) -> list[bytes]:
    """The certificates of a PEM bundle, each as its own PEM block, in order."""
    try:
        certs = x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise AuthorityError(f"cannot read CA bundle: {exc}") from None
    return [c.public_bytes(serialization.Encoding.PEM) for c in certs]
