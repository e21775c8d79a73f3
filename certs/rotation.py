"""When to renew what: the certificate state that should be, computed from the state that is.

A pure function of (state, time), so every replica that reads the same Secret computes the
same answer, and a restart at any point simply recomputes.

Rotating a CA safely takes an overlap. The API server verifies the webhook with the caBundle in
the webhook configurations, and a new bundle reaches it some time after it is written. So:

1. when the CA nears expiry, a new CA is made and the bundle becomes *new + previous*; the
   serving certificate, still signed by the previous CA, stays;
2. once the bundle holding the new CA has been seen injected (in every webhook configuration
   kadmit owns) for ``propagation``, the serving certificate is re-issued from it, and the server
   swaps its context in place. Until the injection is seen, the old serving certificate stays,
   however long that takes: moving to a CA the API server does not trust would fail every
   admission request;
3. the previous CA leaves the bundle when it expires.

At every step, the certificate being served verifies against every bundle the API server may
still hold.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from kadmit.certs.authority import (
    AuthorityError,
    KeyPair,
    dns_names,
    issue_ca,
    issue_serving,
    served_names,
    signed_by,
    split_bundle,
)


@dataclass(frozen=True)
class RotationPolicy:
    """Validity and renew-before windows (all configurable)."""

    ca_validity: dt.timedelta = dt.timedelta(days=365)
    ca_renew_before: dt.timedelta = dt.timedelta(days=30)
    serving_validity: dt.timedelta = dt.timedelta(days=90)
    serving_renew_before: dt.timedelta = dt.timedelta(days=30)
    propagation: dt.timedelta = dt.timedelta(minutes=1)
    """How long a new CA is seen injected before the serving certificate moves to it."""

    def __post_init__(self) -> None:
        if self.ca_renew_before >= self.ca_validity:
            raise ValueError("ca_renew_before must be shorter than ca_validity")
        if self.serving_renew_before >= self.serving_validity:
            raise ValueError("serving_renew_before must be shorter than serving_validity")


@dataclass(frozen=True)
class CertificateState:
    """What the Secret holds: the signing CA, older CAs still trusted, and the serving pair."""

    ca: KeyPair | None = None
    previous_cas: tuple[bytes, ...] = ()
    serving: KeyPair | None = None
    notes: tuple[str, ...] = field(default=(), compare=False)
    """What :func:`plan` changed and why, for the log."""

    @property
    def bundle(self) -> bytes:
        """The caBundle: the current CA first, then the previous ones still valid."""
        return (self.ca.cert_pem if self.ca else b"") + b"".join(self.previous_cas)

    def trusted(self) -> list[KeyPair]:
        cas = [self.ca] if self.ca else []
        return cas + [KeyPair(pem, b"") for pem in self.previous_cas]


def _usable_ca(ca: KeyPair | None) -> KeyPair | None:
    try:
        return ca if ca is not None and ca.matches() else None
    except AuthorityError:
        return None


def _usable_serving(pair: KeyPair | None) -> KeyPair | None:
    try:
        return pair if pair is not None and pair.matches() else None
    except AuthorityError:
        return None


def plan(
    state: CertificateState, service: str, namespace: str, policy: RotationPolicy, now: dt.datetime,
    trusted_since: dt.datetime | None = None,
) -> CertificateState:
    """The state to store; ``state`` itself when nothing needs doing.

    ``trusted_since``: since when ``state.bundle`` has been seen injected (None: not seen yet).
    """
    notes: list[str] = []
    ca = _usable_ca(state.ca)
    previous = list(state.previous_cas)
    if state.ca is not None and ca is None:
        notes.append("the stored CA is unreadable or its key does not match")
        previous.insert(0, state.ca.cert_pem)
    if ca is None or ca.not_after - policy.ca_renew_before <= now:
        if ca is not None:
            notes.append(f"the CA expires at {ca.not_after.isoformat()}")
            previous.insert(0, ca.cert_pem)
        ca = issue_ca(validity=policy.ca_validity, now=now)
        notes.append("issued a new CA")
    kept: list[bytes] = []
    for pem in previous:
        try:
            cert = KeyPair(pem, b"").certificate
        except AuthorityError:
            notes.append("dropped an unreadable CA from the bundle")
            continue
        if cert.not_valid_after_utc <= now:
            notes.append(f"dropped a CA that expired at {cert.not_valid_after_utc.isoformat()}")
        elif pem not in kept and pem != ca.cert_pem:
            kept.append(pem)
    trusted = [ca] + [KeyPair(pem, b"") for pem in kept]

    serving = _usable_serving(state.serving)
    reason = _serving_reason(serving, ca, trusted, service, namespace, policy, now,
                             trusted_since if state.bundle == _bundle(ca, kept) else None)
    if reason:
        notes.append(reason)
        serving = issue_serving(ca, service, namespace, validity=policy.serving_validity, now=now)
    new = CertificateState(ca=ca, previous_cas=tuple(kept), serving=serving, notes=tuple(notes))
    if (
        new.ca is not None
        and state.ca is not None
        and new.ca.cert_pem == state.ca.cert_pem
        and new.ca.key_pem == state.ca.key_pem
        and new.previous_cas == state.previous_cas
        and new.serving == state.serving
    ):
        return state
    return new


def _serving_reason(
    serving: KeyPair | None,
    ca: KeyPair,
    trusted: list[KeyPair],
    service: str,
    namespace: str,
    policy: RotationPolicy,
    now: dt.datetime,
    trusted_since: dt.datetime | None,
) -> str:
    if serving is None:
        return "no usable serving certificate"
    if serving.not_after - policy.serving_renew_before <= now:
        return f"the serving certificate expires at {serving.not_after.isoformat()}"
    if served_names(serving) != dns_names(service, namespace):
        return "the serving certificate names other hosts"
    if signed_by(serving, ca):
        return ""
    if not any(signed_by(serving, other) for other in trusted[1:]):
        return "the serving certificate is not signed by a trusted CA"
    if trusted_since is not None and now - trusted_since >= policy.propagation:
        return "the new CA has been injected long enough to serve from it"
    return ""


def _bundle(ca: KeyPair, previous: list[bytes]) -> bytes:
    return ca.cert_pem + b"".join(previous)


def next_check(state: CertificateState, policy: RotationPolicy, now: dt.datetime,
               trusted_since: dt.datetime | None = None) -> dt.datetime:
    """The earliest moment :func:`plan` may change ``state`` (an injection seen later wakes the
    manager by its watch, not by time)."""
    if state.ca is None or state.serving is None:
        return now
    moments = [
        state.ca.not_after - policy.ca_renew_before,
        state.serving.not_after - policy.serving_renew_before,
    ]
    if not signed_by(state.serving, state.ca) and trusted_since is not None:
        moments.append(trusted_since + policy.propagation)
    for pem in state.previous_cas:
        try:
            moments.append(KeyPair(pem, b"").not_after)
        except AuthorityError:
            return now
    return max(now, min(moments))


def from_bundle(ca_bundle: bytes, ca_key: bytes | None, serving: KeyPair | None) -> CertificateState:
    """Rebuild the state from stored PEMs; the first certificate of the bundle is the signing CA."""
    try:
        pems = split_bundle(ca_bundle) if ca_bundle.strip() else []
    except AuthorityError:
        pems = []
    if not pems:
        return CertificateState(serving=serving)
    if ca_key:
        return CertificateState(ca=KeyPair(pems[0], ca_key), previous_cas=tuple(pems[1:]), serving=serving)
    # Adopted from elsewhere (e.g. ``kadmit certs``): no CA key, so every CA is a previous one.
    return CertificateState(previous_cas=tuple(pems), serving=serving)
