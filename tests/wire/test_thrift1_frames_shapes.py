"""scanner_get_block (hqueue.wire.thrift1_frames) against thriftpy2's own decoding of
the same reply: for random rows of every shape (message rows, several cells, short
keys' neighbours, values that hold the bytes a message row starts with), delivered
in random pieces, the block holds what :func:`rows_to_block` makes of the rows
thriftpy2 decodes.

The replies are encoded by thriftpy2 (the reference encoder, as HBase's gateway
writes them) and sent over a socket pair in pieces of random sizes: where a real
gateway's reply is cut by the network is not something a test can choose, and the
NumPy runs of message rows are cut exactly there."""

from __future__ import annotations

import socket
import threading
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from thriftpy2.protocol.cybin import TCyBinaryProtocol
from thriftpy2.thrift import TMessageType
from thriftpy2.transport.memory import TCyMemoryBuffer

from hqueue.message import COLUMN_PREFIX, ROWKEY
from hqueue.storage.reader import rows_to_block
from hqueue.wire.block import MessageBlock
from hqueue.wire.idl import hbase1
from hqueue.wire.thrift1_frames import encode_call, scanner_get_block

H = hbase1()
_CALL_BYTES = len(encode_call(H.Hbase, "scannerGetList", 7, 10))


def reply_bytes(rows: list[Any]) -> bytes:
    """Return the ``scannerGetList`` reply of ``rows`` as thriftpy2 writes it."""
    buf = TCyMemoryBuffer()
    proto = TCyBinaryProtocol(buf)
    proto.write_message_begin("scannerGetList", TMessageType.REPLY, 0)
    proto.write_struct(H.Hbase.scannerGetList_result(success=rows))
    proto.write_message_end()
    return bytes(buf.getvalue())


def message_row(seq: int, topic: bytes, value: bytes) -> Any:
    return H.TRowResult(
        row=ROWKEY.pack(0, 1_700_000_000_000, seq),
        columns={COLUMN_PREFIX + topic: H.TCell(value=value, timestamp=1_700_000_000_000)},
    )


# A value holding a whole encoded message row: the bytes the NumPy pass looks for,
# where no row starts.
_ROWS_AT = 8 + len("scannerGetList") + 4 + 8  # message header, list header
_DECOY = reply_bytes([message_row(1, b"t", b"v" * 5)])[_ROWS_AT:-1]

topics = st.binary(max_size=10)
values = st.one_of(
    st.binary(max_size=60),
    st.just(_DECOY),
    st.builds(lambda a, b: a + _DECOY + b, st.binary(max_size=8), st.binary(max_size=8)),
    st.binary(min_size=3000, max_size=3000),
)
cells = st.dictionaries(st.binary(max_size=12), values, min_size=0, max_size=3)


@st.composite
def row_lists(draw: st.DrawFn) -> list[Any]:
    out = []
    for seq in range(draw(st.integers(0, 60))):
        shape = draw(st.sampled_from(["message", "message", "message", "cells", "sorted"]))
        if shape == "message":
            out.append(message_row(seq, draw(topics), draw(values)))
            continue
        columns = {
            c: H.TCell(value=v, timestamp=draw(st.integers(0, 2**62)))
            for c, v in draw(cells).items()
        }
        row = H.TRowResult(row=ROWKEY.pack(0, 1_700_000_000_000, seq), columns=columns)
        if shape == "sorted":
            # An extra field any reader must skip (HBase's sortedColumns).
            row.sortedColumns = [H.TColumn(columnName=b"x:y", cell=H.TCell(value=b"z"))]
        out.append(row)
    return out


def served(reply: bytes, cuts: list[int], call: Any) -> Any:
    """Run ``call(sock)`` with the peer answering ``reply`` in pieces cut at ``cuts``."""
    ours, theirs = socket.socketpair()

    def answer() -> None:
        got = 0
        while got < _CALL_BYTES:
            got += len(theirs.recv(_CALL_BYTES - got))
        at = 0
        for cut in [*sorted(cuts), len(reply)]:
            if cut > at:
                theirs.sendall(reply[at:cut])
                at = cut

    peer = threading.Thread(target=answer)
    peer.start()
    try:
        return call(ours)
    finally:
        peer.join()
        ours.close()
        theirs.close()


def contents(block: MessageBlock) -> tuple[bytes, list[str], list[bytes]]:
    return block.rowkeys, block.topic_list(), block.value_list()


@settings(max_examples=300, deadline=None)
@given(
    rows=row_lists(),
    cuts=st.lists(st.integers(0, 1 << 20), max_size=6),
    max_bytes=st.sampled_from([None, 1, 100, 5000, 8 << 20]),
)
def test_the_block_is_what_thriftpy2_decodes(
    rows: list[Any], cuts: list[int], max_bytes: int | None
) -> None:
    reply = reply_bytes(rows)
    cuts = [c % (len(reply) + 1) for c in cuts]
    block = served(reply, cuts, lambda sock: scanner_get_block(sock, 7, 10, max_bytes))
    # The reference: thriftpy2 decodes the same bytes into TRowResult objects.
    result = H.Hbase.scannerGetList_result()
    proto = TCyBinaryProtocol(TCyMemoryBuffer(reply), decode_response=False)
    proto.read_message_begin()
    proto.read_struct(result)
    assert contents(block) == contents(rows_to_block(result.success, max_bytes))
    block.check()


def test_a_run_of_message_rows_spans_the_pieces() -> None:
    # 2,000 message rows arriving a few bytes at a time, then all at once.
    rows = [message_row(i, b"topic%d" % (i % 3), b"x" * (i % 50)) for i in range(2000)]
    reply = reply_bytes(rows)
    want = contents(rows_to_block(rows))
    for cuts in ([], list(range(0, len(reply), 997)), [len(reply) // 2]):
        block = served(reply, cuts, lambda sock: scanner_get_block(sock, 7, 10))
        assert contents(block) == want
