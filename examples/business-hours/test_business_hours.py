"""The plugin's tests: kadmit on a local cluster asks the plugin, at the time each test sets.

Run them here with ``pip install -e '.[test]' && python -m pytest``. One local cluster serves
the module, since starting one takes seconds; each test sets the clock it needs.
"""

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import pytest_asyncio
from kadmit_business_hours import BusinessHoursCheck

from kadmit.checks.testing import LocalKueue

MONDAY_10 = datetime(2026, 11, 23, 10, 0, tzinfo=UTC)
FRIDAY_20 = datetime(2026, 11, 27, 20, 0, tzinfo=UTC)
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kueue() -> AsyncIterator[LocalKueue]:
    async with LocalKueue(BusinessHoursCheck(small_pod_count=4)) as kueue:
        await kueue.cluster_queue("cq", cpu="32", checks=["business-hours"])
        yield kueue


async def test_big_jobs_start_in_business_hours(kueue: LocalKueue) -> None:
    kueue.clock = MONDAY_10.timestamp
    wl = await kueue.submit_job("big-on-monday", cpu="1", pods=8)
    check = await kueue.check_state(wl, "business-hours")
    assert (check["state"], check["message"]) == ("Ready", "within business hours")
    await kueue.admitted(wl)


async def test_big_jobs_wait_for_monday_morning(kueue: LocalKueue) -> None:
    kueue.clock = FRIDAY_20.timestamp
    wl = await kueue.submit_job("big-on-friday", cpu="1", pods=8)
    check = await kueue.check_state(wl, "business-hours")
    assert check["state"] == "Pending"
    assert check["message"] == "8 pods wait for business hours, from Mon 09:00 UTC"


async def test_small_jobs_may_start_any_time(kueue: LocalKueue) -> None:
    kueue.clock = FRIDAY_20.timestamp
    wl = await kueue.submit_job("small-on-friday", cpu="1", pods=4)
    assert (await kueue.check_state(wl, "business-hours"))["state"] == "Ready"
    await kueue.admitted(wl)
