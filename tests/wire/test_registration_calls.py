"""The registration calls of ``thrift/sidecar.thrift`` as typed values
(:mod:`hqueue.wire.sidecar_calls`) and their error through the one table of
:mod:`hqueue.wire.errors`, both ways."""

from __future__ import annotations

import pytest

from hqueue.errors import InvalidMessageError, SubscriberRunningError
from hqueue.wire.errors import from_sidecar_exception, to_sidecar_exception
from hqueue.wire.idl import sidecar
from hqueue.wire.sidecar_calls import SubscriberLease, SubscriberRegistration

Sidecar = sidecar()


def test_a_registration_crosses_the_wire_and_a_bare_one_leaves_out_its_options() -> None:
    full = SubscriberRegistration("s", "10.0.0.7:7000", (0, 3), ("a", "b"), "earliest", 5_000)
    assert SubscriberRegistration.from_thrift(full.to_thrift()) == full
    bare = SubscriberRegistration("s", "10.0.0.7:7000")
    sent = bare.to_thrift()
    # Absent, not empty: "every partition", "every topic", the sidecar's defaults.
    assert (sent.partitions, sent.topics, sent.start, sent.leaseMs) == (None, None, None, None)
    assert SubscriberRegistration.from_thrift(sent) == bare


@pytest.mark.parametrize("missing", ["subscription", "address"])
def test_a_registration_without_its_name_or_address_is_invalid(missing: str) -> None:
    fields = {"subscription": "s", "address": "10.0.0.7:7000", missing: None}
    with pytest.raises(InvalidMessageError, match="needs its subscription and address") as bad:
        SubscriberRegistration.from_thrift(Sidecar.TSubscriberRegistration(**fields))
    assert bad.value.index == -1


def test_a_lease_crosses_the_wire() -> None:
    lease = SubscriberLease("sc-a", 10_000, (0, 1, 2), True)
    assert SubscriberLease.from_thrift(lease.to_thrift()) == lease


def test_a_running_subscriber_crosses_the_wire_both_ways_with_its_address() -> None:
    error = SubscriberRunningError("another runs at 10.0.0.8:7000", "10.0.0.8:7000")
    sent = to_sidecar_exception(error)
    assert isinstance(sent, Sidecar.TSubscriberRunning)
    back = from_sidecar_exception(sent)
    assert isinstance(back, SubscriberRunningError)
    assert (str(back), back.address) == ("another runs at 10.0.0.8:7000", "10.0.0.8:7000")
    unknown = from_sidecar_exception(Sidecar.TSubscriberRunning(message="taken"))
    assert isinstance(unknown, SubscriberRunningError) and unknown.address is None
