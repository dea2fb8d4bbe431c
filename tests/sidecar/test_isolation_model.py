"""The redelivery isolation (:class:`hqueue.sidecar.isolation.Isolation`) against a
small model.

The isolation keeps counts; the model below keeps the messages themselves (their ids:
which are suspects, which the next push carries, which one is to be dead-lettered),
each rule of the isolation's docstring written once, over lists. Hypothesis drives
both with the same random pushes and answers, and every push must agree: how many
messages it carries, whether it is a dead-letter push, the redeliveries it reports,
and the wait it earns. Two properties besides: a subscriber failing on poison
messages gets exactly those dead-lettered, each after more than ``max_redeliveries``
failed pushes; and without a limit nothing is ever isolated.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from hqueue.sidecar.isolation import Isolation


class Model:
    """The isolation's rules over message ids: messages ``head``, ``head + 1``, ...
    are not accepted yet."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.head = 0
        self.failures = 0
        """failed pushes in a row of message ``head``"""
        self.suspects: list[int] = []
        """the messages that failed more than the limit, not accepted yet"""
        self.probe: list[int] = []
        """the suspects the next push carries"""
        self.dead: int | None = None
        """the message whose next push is its dead-letter push"""

    def push(self, buffered: int, batch: int) -> tuple[list[int], bool]:
        """Return the ids the next push carries, and whether it is a dead letter."""
        if self.suspects:
            ids = list(self.probe)
        else:
            ids = list(range(self.head, self.head + min(batch, buffered)))
        return ids, ids == [self.dead]

    def answer(self, ids: list[int], accepted: int, dead: bool) -> bool:
        """Take the answer accepting the first ``accepted`` of ``ids``; return whether
        an isolation started."""
        taken, left = ids[:accepted], ids[accepted:]
        self.head += accepted
        self.suspects = [i for i in self.suspects if i not in taken]
        if not left:
            # Accepted whole: every suspect left at once; no dead letter pending.
            self.dead = None
            self.probe = list(self.suspects)
            self.failures = self._over() if self.suspects else 0
            return False
        if taken:
            # The new head failed once; a suspect head counts as failed too often.
            self.failures = self._over() + 1 if self.suspects else 1
        else:
            self.failures += 1
        if self.limit is None or dead:
            return False
        if self.suspects:
            self.probe = left[: (len(left) + 1) // 2]
            if len(left) == 1:
                self.dead = left[0]
            return False
        if self.failures > self.limit:
            self.suspects = list(left)
            self.probe = left[: (len(left) + 1) // 2]
            self.dead = left[0] if len(left) == 1 else None
            return True
        return False

    def backoff_round(self, dead: bool) -> int:
        return 1 if self.suspects and not dead else self.failures

    def _over(self) -> int:
        return (self.limit or 0) + 1


class IsolationMachine(RuleBasedStateMachine):
    """The isolation and the model, pushed and answered alike."""

    @initialize(limit=st.none() | st.integers(0, 4), batch=st.integers(1, 8))
    def start(self, limit: int | None, batch: int) -> None:
        self.isolation = Isolation(limit)
        self.model = Model(limit)
        self.batch = batch
        self.buffered = 0
        """messages buffered from the model's head on"""

    @rule(count=st.integers(1, 6))
    def read(self, count: int) -> None:
        self.buffered += count

    @precondition(lambda self: self.buffered > 0)
    @rule(data=st.data())
    def push(self, data: st.DataObject) -> None:
        ids, dead = self.model.push(self.buffered, self.batch)
        count = min(self.isolation.push_size(self.batch), self.buffered)
        assert count == len(ids), (count, ids)
        assert self.isolation.dead_letter(count) == dead
        # What a push reports as its redeliveries.
        assert self.isolation.failures == self.model.failures
        if dead:
            assert count == 1 and ids[0] in self.model.suspects
        if self.model.suspects:
            assert set(ids) <= set(self.model.suspects)  # a probe carries suspects only
        accepted = data.draw(st.sampled_from([0, count]) | st.integers(0, count), "accepted")
        started = self.isolation.answered(count, accepted, dead)
        assert started == self.model.answer(ids, accepted, dead)
        if started:
            assert self.model.limit is not None and self.model.failures > self.model.limit
        if accepted < count:
            assert self.isolation.backoff_round(dead) == self.model.backoff_round(dead)
        self.buffered -= accepted

    @invariant()
    def agree(self) -> None:
        if not hasattr(self, "model"):
            return
        assert self.isolation.failures == self.model.failures
        assert self.isolation.suspects == len(self.model.suspects)
        assert self.isolation.isolating == bool(self.model.suspects)
        if self.model.limit is None:
            assert not self.isolation.isolating


TestIsolationModel = IsolationMachine.TestCase
TestIsolationModel.settings = settings(max_examples=300, stateful_step_count=60, deadline=None)


@settings(max_examples=200, deadline=None)
@given(
    limit=st.integers(0, 4),
    batch=st.integers(1, 8),
    total=st.integers(1, 40),
    poison=st.sets(st.integers(0, 39), max_size=6),
)
def test_a_subscriber_failing_on_poison_gets_exactly_the_poison_dead_lettered(
    limit: int, batch: int, total: int, poison: set[int]
) -> None:
    """A subscriber that takes every message but the poisoned ones (it fails at the
    first, accepting those before it) and dead-letters whatever it is asked to."""
    poison = {p for p in poison if p < total}
    isolation = Isolation(limit)
    head = 0
    dead_lettered: list[int] = []
    for _ in range(10_000):
        if head == total:
            break
        count = min(isolation.push_size(batch), total - head)
        dead = isolation.dead_letter(count)
        if dead:
            assert isolation.failures > limit  # its redeliveries, as the push says
            dead_lettered.append(head)
            accepted = 1
        else:
            ids = range(head, head + count)
            accepted = next((n for n, i in enumerate(ids) if i in poison), count)
        isolation.answered(count, accepted, dead)
        head += accepted
    assert head == total, "delivery did not get past the poison"
    assert dead_lettered == sorted(poison)
    assert not isolation.isolating and isolation.failures == 0


@given(batch=st.integers(1, 8), answers=st.lists(st.integers(0, 8), max_size=50))
def test_without_a_limit_nothing_is_isolated(batch: int, answers: list[int]) -> None:
    isolation = Isolation(None)
    for accepted in answers:
        count = isolation.push_size(batch)
        assert count == batch and not isolation.dead_letter(count)
        assert not isolation.answered(count, min(accepted, count), False)
        assert not isolation.isolating
