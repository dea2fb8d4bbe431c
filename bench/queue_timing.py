"""bench_queue.py's workloads and how it times them: a call at a time
(:func:`timed_calls`), and one call per message with its acknowledgement awaited in
the background (:class:`AckTimes`, :func:`send_windowed`)."""

from __future__ import annotations

import asyncio
import functools
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from rounds import Sample

BATCH = 1000
VALUE = b"x" * 100

BATCHED, SCAN, SINGLE = "batched produce (1,000/call)", "scan from the start", "one at a time"
SEND = "one call per message"
WORKLOADS = (BATCHED, SCAN, SINGLE, SEND)

Rows = dict[str, list[tuple[str, Callable[..., Sample]]]]
"""A peer's rows: per workload, (label, function of the round, and of the size for
BATCHED, SINGLE and SEND -> Sample)."""

SEND_CHUNK = 100
"""The asyncio rows of SEND: sends between two turns of the event loop."""
SEND_WINDOW = 10_000
"""The asyncio rows of SEND: most messages awaiting their acks at once."""
SAMPLE_EVERY = 20
"""SEND rows time the ack of every 20th message: a callback on every one would cost
the sending side as much again (measured: half the rate for ``Queue.send``)."""


def timed_calls(calls: int, call: Callable[[], Any]) -> Sample:
    """Run ``call`` ``calls`` times, timing each; messages = calls (callers fix it up)."""
    lat = []
    t_start = time.perf_counter()
    for _ in range(calls):
        t0 = time.perf_counter()
        call()
        lat.append(time.perf_counter() - t0)
    return Sample(calls, time.perf_counter() - t_start, latencies=lat)


class AckTimes:
    """For every SAMPLE_EVERY-th of ``n`` messages (index ``i // SAMPLE_EVERY``), when
    it was sent and when its acknowledgement arrived (``perf_counter`` seconds), and
    the errors those acks carried."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.sent = [0.0] * len(range(0, n, SAMPLE_EVERY))
        self.acked = [0.0] * len(self.sent)
        self.errors: list[BaseException] = []

    def on_ack(self, i: int, position: object, error: BaseException | None) -> None:
        """``Queue.send``'s callback for sample ``i`` (bound with functools.partial)."""
        self.acked[i] = time.perf_counter()
        if error is not None:
            self.errors.append(error)

    def on_done(self, i: int, future: asyncio.Future[Any]) -> None:
        """An asyncio future's done-callback for sample ``i``."""
        self.acked[i] = time.perf_counter()
        error = None if future.cancelled() else future.exception()
        if error is not None:
            self.errors.append(error)

    def sample(self, seconds: float) -> Sample:
        """The run's sample once every message is acknowledged.

        Raises:
            RuntimeError: a message failed or has no acknowledgement.
        """
        if self.errors:
            raise RuntimeError(f"{len(self.errors)} sends failed, the first: {self.errors[0]!r}")
        missing = self.acked.count(0.0)
        if missing:
            raise RuntimeError(f"{missing} of {len(self.acked)} messages were not acknowledged")
        lat = [a - s for s, a in zip(self.sent, self.acked, strict=True)]
        return Sample(self.n, seconds, latencies=lat)


async def send_windowed(n: int, send: Callable[[], Any], acks: AckTimes, awaited: bool) -> float:
    """Send ``n`` messages, one ``send()`` call each (its result awaited first when
    ``awaited``: a coroutine resolving to the ack's future), turning the loop every
    SEND_CHUNK sends and keeping at most SEND_WINDOW awaiting their acks; return the
    seconds until the last ack. Every ack is awaited (an error raises); the sampled
    ones are timed into ``acks``."""
    pending: deque[asyncio.Future[Any]] = deque()
    sent, on_done, perf, partial = acks.sent, acks.on_done, time.perf_counter, functools.partial
    t_start = perf()
    for first in range(0, n, SEND_CHUNK):
        chunk = []
        for i in range(first, min(n, first + SEND_CHUNK)):
            if i % SAMPLE_EVERY:
                future = await send() if awaited else send()
            else:
                sent[i // SAMPLE_EVERY] = perf()
                future = await send() if awaited else send()
                future.add_done_callback(partial(on_done, i // SAMPLE_EVERY))
            chunk.append(future)
        pending.append(asyncio.gather(*chunk))
        if len(pending) * SEND_CHUNK > SEND_WINDOW:
            await pending.popleft()
        else:
            await asyncio.sleep(0)  # the loop hands over the acks that came in
    await asyncio.gather(*pending)
    return perf() - t_start


# -- peers ---------------------------------------------------------------------------
# Each peer offers, per workload, rows as (label, function of the round -> Sample).
