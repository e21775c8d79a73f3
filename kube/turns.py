"""Long stretches of work hand the event loop back every few milliseconds.

Everything kadmit does shares one event loop with its webhook server, and the API server waits
on the webhook for every Workload write. A loop that works through a burst in one turn — a watch
chunk of hundreds of events, a relist of 50,000 objects — makes every request that arrives
meanwhile wait for the whole burst: on bench/scalability.py, an informer's turns took up to 37 ms,
and the webhook's p99 round trip was 40 ms. A :class:`TurnBudget` lets such a loop ask, between
two items, whether it has held the loop long enough, and yield if so.

Yielding once is not enough. A request that arrived during a stretch needs a few turns of the
loop to be served (its bytes are read, which wakes its handler's task; a timer fires, which
completes a future, which wakes a task), and a worker that yields once and is ready again at
once runs a whole stretch before each of those turns: bench/engine.py's probe waited three
scheduler calls (p99 14.6 ms). :func:`give_way` yields for a few turns instead (p99 7.2 ms).
"""

from __future__ import annotations

import asyncio
import time

TURN_SECONDS = 0.010
"""How long one stretch of work may hold the event loop before it yields: a webhook request
waits a few such turns (its bytes arrive, its handler runs, its answer is written).

The stretches are the informers' (a watch chunk, a relist), and an informer is the input of
everything else: with 2 ms, an informer that yields gives way for a few turns to the scheduler
and every write worker, got about a fifth of the loop under load, and on Kueue's large-scale
test (bench/scalability.py) kadmit saw each Finished 11 to 36 s after the bench had it.
Deciding on that stale view cost work: quota looked held, so heads were tried and parked again
and victims that had finished were preempted. With 10 ms the view stays within about 30 ms,
kadmit's CPU per admission fell by about a quarter (2.23 and 2.69 ms against 1.76 and 1.93),
and the webhook's round trip under the same load did not get slower (p99 21.6 against 17.3 ms
with webhooks on, in baseline)."""


GIVE_WAY_TURNS = 3
"""Turns of the loop a worker lets pass between two stretches: enough for a request that arrived
meanwhile to go from its socket to its handler's task (or from a timer to its task)."""


async def give_way(turns: int = GIVE_WAY_TURNS) -> None:
    """Hand the loop over for ``turns`` turns: what others have ready, and what that wakes, runs
    before the caller's next stretch. Costs a few microseconds when nothing else is ready."""
    for _ in range(turns):
        await asyncio.sleep(0)


class TurnBudget:
    """``await budget.spend()`` between items of a long loop: yields once ``seconds`` passed since
    the last yield (or since the budget was made)."""

    __slots__ = ("_since", "seconds")

    def __init__(self, seconds: float = TURN_SECONDS) -> None:
        self.seconds = seconds
        self._since = time.perf_counter()

    async def spend(self) -> None:
        now = time.perf_counter()
        if now - self._since >= self.seconds:
            await give_way()
            self._since = time.perf_counter()
