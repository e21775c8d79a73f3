"""The server's TLS context, reloaded in place when the certificate rotates.

aiohttp keeps the :class:`ssl.SSLContext` it was given, and OpenSSL reads the context's
certificate at each handshake, so calling ``load_cert_chain`` on that same object switches new
connections to the new certificate while open ones finish on the old: no restart, no dropped
request. The pair is checked before loading because OpenSSL installs the certificate before it
notices a key that does not match, which would leave the context serving a broken pair.

:class:`TLSOptions` is Kueue's ``tls`` configuration block (``minVersion``, ``cipherSuites``), which
Kueue applies to its webhook, metrics and visibility servers alike; every HTTPS context kadmit
serves is made here so that all three get it.
"""

from __future__ import annotations

import hashlib
import os
import ssl
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization

# Go's crypto/tls cipher suites by the names Kueue's configuration takes (those of tls.CipherSuites()
# and tls.InsecureCipherSuites(), which k8s.io/component-base accepts, plus its two legacy CHACHA20
# names), as OpenSSL names them for SSLContext.set_ciphers. None: a TLS 1.3 suite, which neither Go
# nor Python lets a server choose (every TLS 1.3 suite stays on, as in Kueue).
_GO_SECURE_SUITES: Mapping[str, str | None] = {
    "TLS_AES_128_GCM_SHA256": None,
    "TLS_AES_256_GCM_SHA384": None,
    "TLS_CHACHA20_POLY1305_SHA256": None,
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
# Go's InsecureCipherSuites(): accepted by Kueue when named, never on by default.
_GO_INSECURE_SUITES: Mapping[str, str] = {
    "TLS_RSA_WITH_RC4_128_SHA": "RC4-SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": "ECDHE-ECDSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": "ECDHE-RSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
}
GO_CIPHER_SUITES: Mapping[str, str | None] = {**_GO_SECURE_SUITES, **_GO_INSECURE_SUITES}
SECURE_CIPHER_SUITES = tuple(sorted(_GO_SECURE_SUITES))  # component-base's PreferredTLSCipherNames


def unavailable_suites(names: Iterable[str]) -> list[str]:
    """The TLS 1.2 suites among ``names`` this Python's OpenSSL cannot offer (OpenSSL 3 builds
    usually lack RC4 and 3DES), so that the configuration can say so instead of serving less."""
    missing = []
    for name in names:
        openssl_name = GO_CIPHER_SUITES[name]
        if openssl_name is None:
            continue
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(openssl_name)
        except ssl.SSLError:
            missing.append(name)
    return missing


@dataclass(frozen=True)
class TLSOptions:
    """Kueue's ``tls`` block, for every HTTPS server kadmit runs; the defaults are those kadmit
    served with before it read the block (and what Kueue does without it): TLS 1.2 and up, with
    OpenSSL's default suites."""

    min_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2
    cipher_suites: tuple[str, ...] = ()  # Go's names (keys of GO_CIPHER_SUITES); (): the defaults

    def apply(self, context: ssl.SSLContext) -> None:
        """Restrict ``context`` to these versions and suites, as Go's tls.Config would be."""
        context.minimum_version = self.min_version
        if not self.cipher_suites:
            return
        tls12 = [name for name in (GO_CIPHER_SUITES[s] for s in self.cipher_suites) if name is not None]
        if tls12:
            # OpenSSL drops a name it lacks as long as one remains; set_ciphers leaves TLS 1.3 alone.
            context.set_ciphers(":".join(dict.fromkeys(tls12)))
        else:
            # Only TLS 1.3 suites listed: Go then has no suite to agree on with a TLS 1.2 client,
            # and OpenSSL cannot be given an empty TLS 1.2 list; refusing TLS 1.2 is the same.
            context.minimum_version = ssl.TLSVersion.TLSv1_3


class CertificateError(ValueError):
    """A certificate/key pair that cannot be served; the old pair stays in place."""


def _public_bytes(key: object) -> bytes:
    public_bytes = getattr(key, "public_bytes", None)
    if public_bytes is None:
        raise CertificateError("unsupported key type")
    data: bytes = public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return data


def check_pair(cert_pem: bytes, key_pem: bytes) -> x509.Certificate:
    """Parse both and make sure the key belongs to the (first) certificate."""
    try:
        chain = x509.load_pem_x509_certificates(cert_pem)
    except ValueError as exc:
        raise CertificateError(f"cannot read certificate: {exc}") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise CertificateError(f"cannot read private key: {exc}") from None
    leaf = chain[0]
    if _public_bytes(leaf.public_key()) != _public_bytes(key.public_key()):
        raise CertificateError("the private key does not match the certificate")
    return leaf


class ServingTLS:
    """Owns the one SSLContext the HTTPS site uses, and swaps its certificate on demand."""

    def __init__(self, options: TLSOptions | None = None) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        (options or TLSOptions()).apply(self.context)
        self.fingerprint: str | None = None  # sha256 of the served leaf, None until loaded
        self.not_after: float | None = None

    @property
    def loaded(self) -> bool:
        return self.fingerprint is not None

    def load(self, cert_pem: bytes, key_pem: bytes) -> bool:
        """Serve this pair from the next handshake on; returns False when it is already served."""
        leaf = check_pair(cert_pem, key_pem)
        fingerprint = hashlib.sha256(leaf.public_bytes(serialization.Encoding.DER)).hexdigest()
        if fingerprint == self.fingerprint:
            return False
        # load_cert_chain only reads files; a private directory keeps the key from other users.
        with tempfile.TemporaryDirectory(prefix="kadmit-tls-") as directory:
            cert_path = os.path.join(directory, "tls.crt")
            key_path = os.path.join(directory, "tls.key")
            for path, data in ((cert_path, cert_pem), (key_path, key_pem)):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
            try:
                self.context.load_cert_chain(cert_path, key_path)
            except ssl.SSLError as exc:
                raise CertificateError(f"OpenSSL refused the pair: {exc}") from None
        self.fingerprint = fingerprint
        self.not_after = leaf.not_valid_after_utc.timestamp()
        return True
