"""LeaseTiming: client-go's leader-election durations, kept in one place for every election."""

from __future__ import annotations

import pytest

from kadmit.controller.checks_service import LeaderElection as ChecksElection
from kadmit.controller.config import LeaderElection as ConfiguredElection
from kadmit.kube import LeaseTiming, default_identity


def test_defaults_are_client_go_s() -> None:
    timing = LeaseTiming()
    assert (timing.lease_duration, timing.renew_deadline, timing.retry_period) == (15.0, 10.0, 2.0)


@pytest.mark.parametrize("kind", [LeaseTiming, ChecksElection, ConfiguredElection])
@pytest.mark.parametrize(
    "durations",
    [
        {"lease_duration": 10.0, "renew_deadline": 10.0},  # renewing as long as the Lease holds
        {"renew_deadline": 2.0, "retry_period": 2.0},  # no second try before the deadline
        {"lease_duration": 5.0},  # a Lease shorter than the renew deadline
    ],
)
def test_every_election_refuses_durations_out_of_order(
    kind: type[LeaseTiming], durations: dict[str, float]
) -> None:
    with pytest.raises(ValueError, match="retry_period < renew_deadline < lease_duration"):
        kind(**durations)


def test_both_elections_are_timings_with_their_own_lease() -> None:
    checks = ChecksElection(lease_duration=4.0, renew_deadline=3.0, retry_period=0.5)
    assert isinstance(checks, LeaseTiming) and checks.name == "kadmit-checks"
    assert isinstance(ConfiguredElection(), LeaseTiming)


def test_each_candidate_gets_a_name_of_its_own() -> None:
    first, second = default_identity(), default_identity()
    assert first != second and first.rsplit("_", 1)[0] == second.rsplit("_", 1)[0]
