"""The server's TLS context, reloaded in place when the certificate rotates.

aiohttp keeps the :class:`ssl.SSLContext` it was given, and OpenSSL reads the context's
certificate at each handshake, so calling ``load_cert_chain`` on that same object switches new
connections to the new certificate while open ones finish on the old: no restart, no dropped
request. The pair is checked before loading because OpenSSL installs the certificate before it
notices a key that does not match, which would leave the context serving a broken pair.
"""

from __future__ import annotations

import hashlib
import os
import ssl
import tempfile

from cryptography import x509
from cryptography.hazmat.primitives import serialization


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

    def __init__(self) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
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
