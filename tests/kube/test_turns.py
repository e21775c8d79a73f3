"""How a long-running worker hands the event loop over between its stretches of work."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from kadmit.kube.turns import TurnBudget, give_way


async def _served_after(hand_over: Callable[[], Awaitable[None]]) -> list[str]:
    """A worker runs stretches, handing the loop over with ``hand_over`` after each; during the
    first, something completes a future another task waits on (as a socket read or a timer
    does for a webhook request). What ran, in order."""
    loop = asyncio.get_running_loop()
    ran: list[str] = []
    arrived: asyncio.Future[None] = loop.create_future()

    async def request() -> None:
        await arrived
        ran.append("request served")

    async def worker() -> None:
        for stretch in range(3):
            ran.append(f"stretch {stretch}")
            if stretch == 0:
                loop.call_soon(arrived.set_result, None)
            await hand_over()

    await asyncio.gather(request(), worker())
    return ran


async def test_a_request_woken_during_a_stretch_is_served_before_the_next() -> None:
    assert await _served_after(give_way) == ["stretch 0", "request served", "stretch 1", "stretch 2"]


async def test_yielding_once_lets_the_worker_run_another_stretch_first() -> None:
    """Why give_way exists: with one ``sleep(0)`` the request waits a whole extra stretch."""
    assert await _served_after(lambda: asyncio.sleep(0)) == [
        "stretch 0",
        "stretch 1",
        "request served",
        "stretch 2",
    ]


async def test_a_spent_budget_gives_way() -> None:
    budget = TurnBudget(seconds=0.0)  # every call has held the loop long enough
    assert await _served_after(budget.spend) == ["stretch 0", "request served", "stretch 1", "stretch 2"]


async def test_an_unspent_budget_keeps_the_loop() -> None:
    budget = TurnBudget(seconds=3600.0)
    assert await _served_after(budget.spend) == ["stretch 0", "stretch 1", "stretch 2", "request served"]
