"""Rotation walks through the overlap so the served certificate always verifies."""

from __future__ import annotations

import datetime as dt

import pytest

from kadmit.certs.authority import KeyPair, issue_ca, issue_serving, signed_by
from kadmit.certs.rotation import CertificateState, RotationPolicy, from_bundle, next_check, plan

T0 = dt.datetime(2031, 3, 1, tzinfo=dt.UTC)
POLICY = RotationPolicy(
    ca_validity=dt.timedelta(days=10),
    ca_renew_before=dt.timedelta(days=3),
    serving_validity=dt.timedelta(days=4),
    serving_renew_before=dt.timedelta(days=1),
    propagation=dt.timedelta(minutes=2),
)
SVC, NS = "kadmit-webhook-service", "kadmit-system"


def verifies(state: CertificateState, bundle: bytes) -> bool:
    assert state.serving is not None
    cas = [KeyPair(pem, b"") for pem in _split(bundle)]
    return any(signed_by(state.serving, ca) for ca in cas)


def _split(bundle: bytes) -> list[bytes]:
    from kadmit.certs.authority import split_bundle

    return split_bundle(bundle)


def test_empty_state_gets_a_ca_and_serving_certificate() -> None:
    state = plan(CertificateState(), SVC, NS, POLICY, T0)
    assert state.ca is not None and state.serving is not None
    assert signed_by(state.serving, state.ca)
    assert state.bundle == state.ca.cert_pem
    assert "issued a new CA" in state.notes
    assert plan(state, SVC, NS, POLICY, T0 + dt.timedelta(hours=1)) is state


def test_serving_certificate_renews_before_expiry_under_the_same_ca() -> None:
    state = plan(CertificateState(), SVC, NS, POLICY, T0)
    assert next_check(state, POLICY, T0) == T0 + dt.timedelta(days=3)
    later = plan(state, SVC, NS, POLICY, T0 + dt.timedelta(days=3))
    assert later.ca == state.ca
    assert later.serving != state.serving
    assert later.bundle == state.bundle


def test_a_full_ca_rotation_never_serves_an_unverifiable_certificate() -> None:
    """Walk time forward; at each step the served cert verifies with the old bundle and the new one."""
    state = plan(CertificateState(), SVC, NS, POLICY, T0)
    now = T0
    seen_cas = {state.ca.cert_pem if state.ca else b""}
    overlap_seen = False
    applied_bundle = state.bundle  # what the API server holds: the bundle of the previous step
    injected = {state.bundle: now}  # when each bundle was seen injected
    for _ in range(40):
        now = next_check(state, POLICY, now, injected.get(state.bundle))
        new = plan(state, SVC, NS, POLICY, now, injected.get(state.bundle))
        assert new.serving is not None and new.ca is not None
        # The certificate served after this step verifies with the bundle the API server still
        # holds and with the one about to be injected.
        assert verifies(new, applied_bundle), new.notes
        assert verifies(new, new.bundle)
        if new.previous_cas:
            overlap_seen = True
            assert new.bundle.startswith(new.ca.cert_pem)
        seen_cas.add(new.ca.cert_pem)
        applied_bundle = new.bundle
        injected.setdefault(new.bundle, now)
        state = new
        now += dt.timedelta(seconds=1)
        if now > T0 + dt.timedelta(days=25):
            break
    assert len(seen_cas) >= 3  # rotated the CA at least twice
    assert overlap_seen


def test_ca_rotation_keeps_the_old_serving_cert_until_propagation() -> None:
    first = plan(CertificateState(), SVC, NS, POLICY, T0)
    assert first.ca is not None
    due = first.ca.not_after - POLICY.ca_renew_before
    state = plan(first, SVC, NS, POLICY, due - dt.timedelta(hours=1))  # a fresh serving cert
    assert state.ca == first.ca and state.ca is not None
    rotated = plan(state, SVC, NS, POLICY, due)
    assert rotated.ca != state.ca
    assert rotated.previous_cas == (state.ca.cert_pem,)
    assert rotated.serving == state.serving  # still signed by the previous CA
    assert next_check(rotated, POLICY, due, trusted_since=due) == due + POLICY.propagation
    switched = plan(rotated, SVC, NS, POLICY, due + POLICY.propagation, trusted_since=due)
    assert switched.serving is not None and rotated.ca is not None
    assert signed_by(switched.serving, rotated.ca)
    assert switched.previous_cas == (state.ca.cert_pem,)  # kept until it expires
    gone = plan(switched, SVC, NS, POLICY, state.ca.not_after)
    assert gone.previous_cas == ()


def test_the_serving_certificate_never_moves_to_a_ca_not_seen_injected() -> None:
    """Injection fails during a CA rotation: the old serving certificate stays, however long."""
    first = plan(CertificateState(), SVC, NS, POLICY, T0)
    assert first.ca is not None
    due = first.ca.not_after - POLICY.ca_renew_before
    rotated = plan(first, SVC, NS, POLICY, due)
    for later in (due + POLICY.propagation, due + 100 * POLICY.propagation):
        assert plan(rotated, SVC, NS, POLICY, later) is rotated  # not injected: nothing moves
    seen = due + 50 * POLICY.propagation  # the first successful injection
    assert plan(rotated, SVC, NS, POLICY, seen + POLICY.propagation / 2, trusted_since=seen) is rotated
    switched = plan(rotated, SVC, NS, POLICY, seen + POLICY.propagation, trusted_since=seen)
    assert switched.serving is not None and signed_by(switched.serving, rotated.ca)  # type: ignore[arg-type]


def test_wrong_names_or_a_broken_key_are_repaired() -> None:
    ca = issue_ca(now=T0)
    wrong = issue_serving(ca, "other", NS, now=T0)
    state = plan(CertificateState(ca=ca, serving=wrong), SVC, NS, POLICY, T0)
    assert "the serving certificate names other hosts" in state.notes
    broken = CertificateState(ca=KeyPair(ca.cert_pem, issue_ca().key_pem), serving=state.serving)
    repaired = plan(broken, SVC, NS, POLICY, T0)
    assert repaired.ca is not None and repaired.ca.cert_pem != ca.cert_pem
    assert ca.cert_pem in repaired.previous_cas


def test_adopting_files_without_the_ca_key() -> None:
    ca = issue_ca(now=T0)
    serving = issue_serving(ca, SVC, NS, now=T0)
    adopted = from_bundle(ca.cert_pem, None, serving)
    assert adopted.ca is None and adopted.previous_cas == (ca.cert_pem,)
    state = plan(adopted, SVC, NS, POLICY, T0)
    assert state.ca is not None and state.previous_cas == (ca.cert_pem,)
    assert state.serving == serving  # keeps serving until the new CA has propagated
    assert from_bundle(state.bundle, state.ca.key_pem, state.serving) == state


def test_policy_windows_are_checked() -> None:
    with pytest.raises(ValueError, match="ca_renew_before"):
        RotationPolicy(ca_validity=dt.timedelta(days=1), ca_renew_before=dt.timedelta(days=2))
