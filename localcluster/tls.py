"""A throw-away CA and serving certificate for the API server's HTTPS mode (``cryptography``)."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class ServingCert:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes


_KEY_USAGES = (
    "digital_signature",
    "content_commitment",
    "key_encipherment",
    "data_encipherment",
    "key_agreement",
    "key_cert_sign",
    "crl_sign",
    "encipher_only",
    "decipher_only",
)


def _key_usage(*allowed: str) -> x509.KeyUsage:
    """A KeyUsage that allows exactly ``allowed`` (``cryptography`` wants all nine flags named)."""
    if not set(allowed) <= set(_KEY_USAGES):
        raise ValueError(f"unknown key usages: {sorted(set(allowed) - set(_KEY_USAGES))}")
    return x509.KeyUsage(**{usage: usage in allowed for usage in _KEY_USAGES})


def _authority(
    common_name: str, now: datetime.datetime, days: int
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A self-signed CA: its key and certificate."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage("digital_signature", "key_cert_sign", "crl_sign"), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return ca_key, ca_cert


def make_serving_cert(hosts: list[str], days: int = 365) -> ServingCert:
    """A new CA and a certificate for ``hosts`` (DNS names or IP addresses) signed by it."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, ca_cert = _authority("kadmit-local-ca", now, days)
    ca_name = ca_cert.subject
    key = ec.generate_private_key(ec.SECP256R1())
    authority_key_id = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kadmit-local-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        # Strict verifiers (OpenSSL's X509_STRICT, Python 3.13's default) want the key identifiers.
        .add_extension(authority_key_id, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return _pem(ca_cert, cert, key)


def _pem(ca_cert: x509.Certificate, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> ServingCert:
    return ServingCert(
        ca_pem=ca_cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )


def make_client_cert(common_name: str, days: int = 365) -> ServingCert:
    """A new CA and a client certificate for ``common_name`` signed by it (the front proxy's)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, ca_cert = _authority("kadmit-local-front-proxy-ca", now, days)
    ca_name = ca_cert.subject
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(_key_usage("digital_signature", "key_encipherment"), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return _pem(ca_cert, cert, key)


def server_context(cert: ServingCert, directory: Path) -> ssl.SSLContext:
    """An SSL context for aiohttp; the PEM files are written to ``directory`` (ssl needs paths)."""
    cert_file, key_file = directory / "apiserver.crt", directory / "apiserver.key"
    cert_file.write_bytes(cert.cert_pem)
    key_file.write_bytes(cert.key_pem)
    key_file.chmod(0o600)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    return context
