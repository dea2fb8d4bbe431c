"""The producer's retry policy (hqueue.client.put_retry): the errors it names as
retried, one rule per case, and its pacing on a clock of the test's own."""

from __future__ import annotations

import pytest

from hqueue.client.put_retry import RetryPolicy, default_attempt_timeout
from hqueue.errors import (
    AuthorizationError,
    ConnectionLostError,
    HQueueError,
    InvalidArgumentError,
    InvalidMessageError,
    NoQueueError,
    NotOwnerError,
    OutOfOrderSequenceError,
    StorageError,
    UnavailableError,
)
from hqueue.storage.sidecars import SidecarUnreachableError


class Clock:
    """A monotonic clock that moves only when the policy sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def policy(put_timeout: float = 3.0, clock: Clock | None = None) -> RetryPolicy:
    clock = clock or Clock()
    return RetryPolicy(put_timeout, clock=clock, sleep=clock.sleep)


def out_of_order(first: int, expected: int) -> OutOfOrderSequenceError:
    return OutOfOrderSequenceError("refused", 0, 7, first, expected)


def test_the_policy_names_what_it_retries() -> None:
    assert (NotOwnerError, UnavailableError, OutOfOrderSequenceError) == RetryPolicy.RETRIED
    assert (ConnectionLostError, StorageError) == RetryPolicy.LOOKUP_ERRORS


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        (NotOwnerError("moved", 0, "127.0.0.1:1"), True),
        (UnavailableError("cannot write now"), True),
        (SidecarUnreachableError("silent"), True),
        (out_of_order(first=9, expected=4), True),  # a gap: sent under a new producer id
        (out_of_order(first=2, expected=4), False),  # repeats a batch no longer kept
        (InvalidMessageError("message 0: bad topic", 0), False),
        (NoQueueError("no queue 'q'"), False),
        (AuthorizationError("denied"), False),
        (ConnectionLostError("lost"), False),  # a look-up error (LOOKUP_ERRORS), not an answer
        (HQueueError("anything else"), False),
    ],
)
def test_what_an_attempt_is_retried_after(error: HQueueError, retried: bool) -> None:
    assert policy().retries(error) is retried


def test_timeouts_are_checked_at_once_naming_the_argument() -> None:
    with pytest.raises(InvalidArgumentError, match="'put_timeout' must be > 0"):
        RetryPolicy(0)
    with pytest.raises(InvalidArgumentError, match="'attempt_timeout' must be > 0 and at most"):
        RetryPolicy(2, 3)
    with pytest.raises(InvalidArgumentError, match="'backoff_start'"):
        RetryPolicy(2, backoff_start=2, backoff_max=1)
    assert RetryPolicy(30).attempt_timeout == default_attempt_timeout(30) == 5.0
    assert RetryPolicy(3).attempt_timeout == 1.0


def test_the_backoff_doubles_to_its_cap_then_the_put_fails_naming_the_last_reason() -> None:
    clock = Clock()
    retrying = policy(put_timeout=3.0, clock=clock).start("q", 0)
    retrying.failed("sidecar a: cannot write now", 2)
    with pytest.raises(UnavailableError) as failure:
        for _ in range(20):
            retrying.pause(unowned=False, unwritten=3, count=5)
    assert clock.slept == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0]  # 2.55 s; 1 s more would pass 3 s
    assert str(failure.value) == (
        "put to queue 'q' partition 2 not acknowledged within 3 s (3 of 5 messages "
        "unwritten): sidecar a: cannot write now"
    )


def test_while_nobody_owns_the_partitions_left_it_waits_briefly_and_does_not_back_off() -> None:
    clock = Clock()
    retrying = policy(put_timeout=3.0, clock=clock).start("q", 4)
    for _ in range(3):
        retrying.pause(unowned=True, unwritten=1, count=1)
    retrying.pause(unowned=False, unwritten=1, count=1)
    assert clock.slept == [0.05, 0.05, 0.05, 0.05]
    retrying.failed("the queue's metadata could not be read: down")  # keeps the partition
    with pytest.raises(UnavailableError, match=r"partition 4 .*: the queue's metadata could not"):
        for _ in range(100):
            retrying.pause(unowned=True, unwritten=1, count=1)


def test_an_attempt_waits_at_most_what_is_left_of_the_put_and_at_least_the_first_pause() -> None:
    clock = Clock()
    retrying = policy(put_timeout=3.0, clock=clock).start("q", 0)
    assert retrying.attempt_timeout() == 1.0
    clock.now += 2.5
    assert retrying.attempt_timeout() == pytest.approx(0.5)
    clock.now += 10
    assert retrying.attempt_timeout() == 0.05


def test_unowned_owners_are_read_from_the_store_every_retry_for_a_second_then_less_often() -> None:
    clock = Clock()
    retrying = policy(put_timeout=30.0, clock=clock).start("q", 0)
    assert retrying.look_due() and retrying.look_due()  # the first second: every retry
    clock.now += 2.0
    assert retrying.look_due()  # next one 0.5 s (a quarter of the time waited) later
    clock.now += 0.25
    assert not retrying.look_due()
    clock.now += 0.25
    assert retrying.look_due()
    clock.now += 20.0
    assert retrying.look_due()  # at most 1 s apart
    clock.now += 0.75
    assert not retrying.look_due()
    clock.now += 0.25
    assert retrying.look_due()
