"""Table-level checks of the standalone's Thrift1 and Thrift2 gateways (issue 25,
hqueue/standalone/access.py): DDL needs an admin, a queue's table is written by
sidecars and admins only and read by whoever may consume the queue, the metadata
table is open to every authenticated principal; a refusal is the IDL's IOError /
TIOError whose message begins "not authorized:", and nothing was done.

The handlers are called with the calling thread's connection authenticated as a
principal, as the server's authentication handshake leaves it (the handshake itself
is the transport's tests' business: tests/wire); without one, the caller is
ANONYMOUS, as on a server without authentication, and may do everything."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TypeVar

import pytest

from hqueue.security.principal import ANONYMOUS, DENIED, Principal
from hqueue.standalone.access import TableAccess
from hqueue.standalone.engine.cursors import ScannerRegistry
from hqueue.standalone.engine.schema import FamilyOptions
from hqueue.standalone.engine.store import Store
from hqueue.standalone.thrift1 import HbaseHandler
from hqueue.standalone.thrift2 import THBaseHandler
from hqueue.wire import rpc_connection, rpc_server
from hqueue.wire.rpc_connection import ConnectionState
from tests.standalone.conftest import H2, Hbase, cv

T = TypeVar("T")

PREFIX = "inst"
ORDERS = b"inst_orders"  # the table of queue "orders"
AUDIT = b"inst_audit"  # the table of queue "audit"
METADATA = b"inst_hqueue_metadata"
FOREIGN = b"other_thing"  # outside the installation's prefix

ADMIN = Principal("root", admin=True)
SIDECAR = Principal("sidecar-1", sidecar=True)
READER = Principal("reader", consume=("ord*",))
PRODUCER = Principal("producer", produce=("*",))
NOBODY = Principal("nobody")


def as_principal(principal: Principal, call: Callable[[], T]) -> T:
    """Return ``call()`` run as a call on a connection that authenticated as
    ``principal``."""
    with rpc_connection.bind(ConnectionState("127.0.0.1:1", principal=principal)):
        return call()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "store", map_size=256 << 20)
    for table in (ORDERS, AUDIT, METADATA, FOREIGN):
        s.create_table(table, {b"cf": FamilyOptions()})
    yield s
    s.close()


@pytest.fixture
def thrift1(store: Store) -> HbaseHandler:
    return HbaseHandler(store, ScannerRegistry(), ("localhost", 9090), TableAccess(PREFIX))


@pytest.fixture
def thrift2(store: Store) -> THBaseHandler:
    return THBaseHandler(store, ("localhost", 9091), ScannerRegistry(), TableAccess(PREFIX))


def put1(handler: HbaseHandler, table: bytes, row: bytes = b"r", value: bytes = b"v") -> None:
    handler.mutateRow(table, row, [Hbase.Mutation(column=b"cf:q", value=value)], None)


def put2(handler: THBaseHandler, table: bytes, row: bytes = b"r", value: bytes = b"v") -> None:
    handler.put(table, H2.TPut(row=row, columnValues=[cv(b"cf:q", value)]))


def denied1(principal: Principal, call: Callable[[], object]) -> str:
    with pytest.raises(Hbase.IOError) as caught:
        as_principal(principal, call)
    message: str = caught.value.message
    assert message.startswith(DENIED), message
    return message


def denied2(principal: Principal, call: Callable[[], object]) -> str:
    with pytest.raises(H2.TIOError) as caught:
        as_principal(principal, call)
    message: str = caught.value.message
    assert message.startswith(DENIED), message
    return message


def test_which_tables_are_queues() -> None:
    access = TableAccess(PREFIX)
    assert access.queue_of(ORDERS) == "orders"
    assert access.queue_of(METADATA) is None
    assert access.queue_of(FOREIGN) is None
    assert access.queue_of(b"inst_") is None
    bare = TableAccess("")
    assert bare.queue_of(b"orders") == "orders"
    assert bare.queue_of(b"hqueue_metadata") is None
    assert TableAccess("", metadata_table="meta").queue_of(b"meta") is None
    # A queue of a namespace: the prefix is on the qualifier (ns:{prefix}_{queue}).
    assert access.queue_of(b"markets:inst_trades") == "markets:trades"
    assert access.queue_of(b"markets:trades") is None
    assert access.queue_of(b"default:inst_orders") == "orders"
    assert bare.queue_of(b"markets:trades") == "markets:trades"


def test_environment_prefix_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HQUEUE_TABLE_PREFIX", PREFIX)
    assert TableAccess().queue_of(ORDERS) == "orders"
    assert TableAccess("").queue_of(ORDERS) == "inst_orders"


# ------------------------------------------------------------------ Thrift1


def test_thrift1_ddl_needs_an_admin(thrift1: HbaseHandler, store: Store) -> None:
    family = [Hbase.ColumnDescriptor(name=b"cf:")]
    for principal in (SIDECAR, READER, PRODUCER, NOBODY):
        message = denied1(principal, lambda: thrift1.createTable(b"inst_new", family))
        assert f"principal {principal.name!r}" in message and "admin" in message
        denied1(principal, lambda: thrift1.deleteTable(ORDERS))
        denied1(principal, lambda: thrift1.disableTable(ORDERS))
        denied1(principal, lambda: thrift1.enableTable(ORDERS))
        denied1(principal, lambda: thrift1.majorCompact(ORDERS))
    assert b"inst_new" not in store.table_names() and ORDERS in store.table_names()
    assert store.describe(ORDERS).enabled
    as_principal(ADMIN, lambda: thrift1.createTable(b"inst_new", family))
    as_principal(ADMIN, lambda: thrift1.disableTable(b"inst_new"))
    as_principal(ADMIN, lambda: thrift1.deleteTable(b"inst_new"))
    # Describing tables is not DDL.
    assert ORDERS in as_principal(NOBODY, thrift1.getTableNames)
    assert as_principal(NOBODY, lambda: thrift1.getColumnDescriptors(ORDERS))


def test_thrift1_queue_tables_are_written_by_sidecars_and_admins(
    thrift1: HbaseHandler, store: Store
) -> None:
    writes: list[Callable[[], object]] = [
        lambda: put1(thrift1, ORDERS, value=b"forged"),
        lambda: thrift1.mutateRowsTs(
            ORDERS,
            [Hbase.BatchMutation(row=b"r", mutations=[Hbase.Mutation(column=b"cf:q")])],
            5,
            None,
        ),
        lambda: thrift1.atomicIncrement(ORDERS, b"n", b"cf:n", 1),
        lambda: thrift1.deleteAllRow(ORDERS, b"r", None),
        lambda: thrift1.deleteAll(ORDERS, b"r", b"cf:q", None),
        lambda: thrift1.increment(Hbase.TIncrement(table=ORDERS, row=b"n", column=b"cf:n")),
        lambda: thrift1.incrementRows(
            [
                Hbase.TIncrement(table=METADATA, row=b"n", column=b"cf:n", ammount=1),
                Hbase.TIncrement(table=ORDERS, row=b"n", column=b"cf:n", ammount=1),
            ]
        ),
        lambda: thrift1.append(
            Hbase.TAppend(table=ORDERS, row=b"r", columns=[b"cf:q"], values=[b"x"])
        ),
        lambda: thrift1.checkAndPut(
            ORDERS, b"r", b"cf:q", None, Hbase.Mutation(column=b"cf:q", value=b"x"), None
        ),
    ]
    for principal in (READER, PRODUCER, NOBODY):
        for write in writes:
            message = denied1(principal, write)
            assert "only a sidecar or an admin" in message and "'orders'" in message
    # Nothing was written, not even the metadata half of incrementRows.
    assert store.get_rows(ORDERS, [b"r", b"n"], None, None) == []
    assert store.get_rows(METADATA, [b"n"], None, None) == []
    as_principal(SIDECAR, lambda: put1(thrift1, ORDERS))
    as_principal(ADMIN, lambda: put1(thrift1, ORDERS, b"r2"))
    assert [row for row, _ in store.get_rows(ORDERS, [b"r", b"r2"], None, None)] == [b"r", b"r2"]


def test_thrift1_queue_tables_are_read_by_consumers(thrift1: HbaseHandler) -> None:
    as_principal(SIDECAR, lambda: put1(thrift1, ORDERS))
    as_principal(SIDECAR, lambda: put1(thrift1, AUDIT))
    for principal in (READER, SIDECAR, ADMIN):
        assert as_principal(principal, lambda: thrift1.getRow(ORDERS, b"r", None))
        assert as_principal(principal, lambda: thrift1.get(ORDERS, b"r", b"cf:q", None))
    reads: list[Callable[[], object]] = [
        lambda: thrift1.getRow(AUDIT, b"r", None),
        lambda: thrift1.get(AUDIT, b"r", b"cf:q", None),
        lambda: thrift1.getRowsWithColumnsTs(AUDIT, [b"r"], [b"cf:q"], 10**15, None),
        lambda: thrift1.scannerOpen(AUDIT, b"", [], None),
        lambda: thrift1.scannerOpenWithScan(AUDIT, Hbase.TScan(), None),
        lambda: thrift1.scannerOpenWithPrefix(AUDIT, b"r", [], None),
    ]
    for read in reads:
        message = denied1(READER, read)
        assert "may not read or subscribe to queue 'audit'" in message
        denied1(PRODUCER, read)  # produce is not consume


def test_thrift1_scanners_serve_only_who_may_read_their_table(thrift1: HbaseHandler) -> None:
    as_principal(SIDECAR, lambda: put1(thrift1, AUDIT))
    audit = as_principal(SIDECAR, lambda: thrift1.scannerOpen(AUDIT, b"", [], None))
    mine = as_principal(READER, lambda: thrift1.scannerOpen(ORDERS, b"", [], None))
    assert as_principal(READER, lambda: thrift1.scannerGetList(mine, 10)) is not None
    # Scanner ids are small integers: guessing another's is no way in.
    denied1(READER, lambda: thrift1.scannerGetList(audit, 10))
    denied1(READER, lambda: thrift1.scannerGet(audit))
    denied1(READER, lambda: thrift1.scannerClose(audit))
    as_principal(READER, lambda: thrift1.scannerClose(mine))
    rows = as_principal(SIDECAR, lambda: thrift1.scannerGetList(audit, 10))
    assert rows is not None
    as_principal(SIDECAR, lambda: thrift1.scannerClose(audit))


def test_the_metadata_table_is_open_to_every_principal(
    thrift1: HbaseHandler, thrift2: THBaseHandler
) -> None:
    as_principal(NOBODY, partial(put1, thrift1, METADATA))
    assert as_principal(NOBODY, partial(thrift1.getRow, METADATA, b"r", None))
    as_principal(NOBODY, partial(put2, thrift2, METADATA, b"r2"))
    got = as_principal(NOBODY, partial(thrift2.get, METADATA, H2.TGet(row=b"r2")))
    assert got.row == b"r2"


def test_tables_outside_the_prefix_are_for_admins_and_sidecars_only(
    thrift1: HbaseHandler, thrift2: THBaseHandler
) -> None:
    """Else a client choosing another table prefix would escape the queue rights."""
    for call in (
        partial(put1, thrift1, FOREIGN),
        partial(thrift1.getRow, FOREIGN, b"r", None),
    ):
        assert "outside this installation's table prefix" in denied1(NOBODY, call)
    for call in (
        partial(put2, thrift2, FOREIGN, b"r2"),
        partial(thrift2.get, FOREIGN, H2.TGet(row=b"r2")),
    ):
        assert "outside this installation's table prefix" in denied2(NOBODY, call)
    as_principal(SIDECAR, partial(put1, thrift1, FOREIGN))
    assert as_principal(SIDECAR, partial(thrift1.getRow, FOREIGN, b"r", None))
    assert TableAccess("").is_foreign(b"anything") is False  # no prefix: all are queues


def test_without_authentication_everything_is_allowed(
    thrift1: HbaseHandler, thrift2: THBaseHandler
) -> None:
    assert rpc_server.current_principal() is ANONYMOUS
    put1(thrift1, ORDERS)
    assert thrift1.getRow(ORDERS, b"r", None)
    scanner = thrift1.scannerOpen(ORDERS, b"", [], None)
    thrift1.scannerClose(scanner)
    thrift1.createTable(b"inst_x", [Hbase.ColumnDescriptor(name=b"cf:")])
    put2(thrift2, b"inst_x")
    thrift2.disableTable(H2.TTableName(qualifier=b"inst_x"))
    thrift2.deleteTable(H2.TTableName(qualifier=b"inst_x"))


# ------------------------------------------------------------------ Thrift2


def test_thrift2_ddl_needs_an_admin(thrift2: THBaseHandler, store: Store) -> None:
    name = H2.TTableName(qualifier=ORDERS)
    desc = H2.TTableDescriptor(
        tableName=H2.TTableName(qualifier=b"inst_new"),
        columns=[H2.TColumnFamilyDescriptor(name=b"cf")],
    )
    calls: list[Callable[[], object]] = [
        lambda: thrift2.createTable(desc, None),
        lambda: thrift2.deleteTable(name),
        lambda: thrift2.truncateTable(name, True),
        lambda: thrift2.disableTable(name),
        lambda: thrift2.enableTable(name),
        lambda: thrift2.addColumnFamily(name, H2.TColumnFamilyDescriptor(name=b"x")),
        lambda: thrift2.deleteColumnFamily(name, b"cf"),
        lambda: thrift2.modifyColumnFamily(name, H2.TColumnFamilyDescriptor(name=b"cf")),
        lambda: thrift2.modifyTable(desc),
        lambda: thrift2.createNamespace(H2.TNamespaceDescriptor(name="ns")),
        lambda: thrift2.deleteNamespace("default"),
    ]
    for call in calls:
        message = denied2(SIDECAR, call)
        assert "needs an admin principal" in message
    assert b"inst_new" not in store.table_names()
    assert store.describe(ORDERS).enabled and list(store.describe(ORDERS).families) == [b"cf"]
    assert as_principal(NOBODY, lambda: thrift2.tableExists(name))
    as_principal(ADMIN, lambda: thrift2.createTable(desc, None))
    assert b"inst_new" in store.table_names()


def test_thrift2_writes_and_reads(thrift2: THBaseHandler, store: Store) -> None:
    row = H2.TRowMutations(
        row=b"r", mutations=[H2.TMutation(put=H2.TPut(row=b"r", columnValues=[cv(b"cf:q", b"x")]))]
    )
    writes: list[Callable[[], object]] = [
        lambda: put2(thrift2, ORDERS),
        lambda: thrift2.putMultiple(ORDERS, [H2.TPut(row=b"r", columnValues=[cv(b"cf:q", b"x")])]),
        lambda: thrift2.deleteSingle(ORDERS, H2.TDelete(row=b"r")),
        lambda: thrift2.deleteMultiple(ORDERS, [H2.TDelete(row=b"r")]),
        lambda: thrift2.mutateRow(ORDERS, row),
        lambda: thrift2.checkAndPut(
            ORDERS, b"r", b"cf", b"q", None, H2.TPut(row=b"r", columnValues=[cv(b"cf:q", b"x")])
        ),
        lambda: thrift2.checkAndMutate(
            ORDERS, b"r", b"cf", b"q", H2.TCompareOperator.EQUAL, None, row
        ),
        lambda: thrift2.increment(
            ORDERS,
            H2.TIncrement(row=b"n", columns=[H2.TColumnIncrement(family=b"cf", qualifier=b"n")]),
        ),
        lambda: thrift2.append(ORDERS, H2.TAppend(row=b"r", columns=[cv(b"cf:q", b"x")])),
    ]
    for write in writes:
        assert "only a sidecar or an admin" in denied2(PRODUCER, write)
    assert store.get_rows(ORDERS, [b"r", b"n"], None, None) == []
    as_principal(SIDECAR, lambda: put2(thrift2, ORDERS))
    as_principal(SIDECAR, lambda: put2(thrift2, AUDIT))

    got = as_principal(READER, lambda: thrift2.get(ORDERS, H2.TGet(row=b"r")))
    assert got.row == b"r"
    reads: list[Callable[[], object]] = [
        lambda: thrift2.get(AUDIT, H2.TGet(row=b"r")),
        lambda: thrift2.getMultiple(AUDIT, [H2.TGet(row=b"r")]),
        lambda: thrift2.exists(AUDIT, H2.TGet(row=b"r")),
        lambda: thrift2.existsAll(AUDIT, [H2.TGet(row=b"r")]),
        lambda: thrift2.openScanner(AUDIT, H2.TScan()),
        lambda: thrift2.getScannerResults(AUDIT, H2.TScan(), 10),
    ]
    for read in reads:
        assert "queue 'audit'" in denied2(READER, read)

    audit = as_principal(SIDECAR, lambda: thrift2.openScanner(AUDIT, H2.TScan()))
    mine = as_principal(READER, lambda: thrift2.openScanner(ORDERS, H2.TScan()))
    assert [r.row for r in as_principal(READER, lambda: thrift2.getScannerRows(mine, 10))] == [b"r"]
    denied2(READER, lambda: thrift2.getScannerRows(audit, 10))
    denied2(READER, lambda: thrift2.closeScanner(audit))
    # An unknown id is still not an error to close, nor a refusal.
    as_principal(READER, lambda: thrift2.closeScanner(987654))
    assert [r.row for r in as_principal(SIDECAR, lambda: thrift2.getScannerRows(audit, 10))] == [
        b"r"
    ]


# ------------------------------------------------------------- end to end


@pytest.mark.server  # starts a server of its own
def test_end_to_end_through_the_authentication_handshake(tmp_path: Path) -> None:
    """The principal the handlers see is the one the connection's token named: a real
    in-process server with signed tokens, happybase over the transport's connection."""
    from hqueue.security.config import ClientSecurity
    from hqueue.security.credentials import server_security
    from hqueue.security.tokens import Claims, generate_keys, load_private_key, mint
    from hqueue.standalone.server import StandaloneConfig, StandaloneServer
    from hqueue.wire.connect import HappybaseConnection, thrift_client

    private, public = tmp_path / "k.pem", tmp_path / "k.pub"
    generate_keys(private, public)
    key = load_private_key(private)

    def token(claims: Claims) -> ClientSecurity:
        return ClientSecurity(token=mint(key, claims))

    config = StandaloneConfig(
        data_dir=tmp_path / "data",
        port=0,
        thrift2_port=0,
        sidecar=False,
        security=server_security(auth_public_keys=[public]),
    )
    with StandaloneServer(config) as server:
        assert server.thrift1 is not None and server.thrift2 is not None
        host, port1, port2 = "127.0.0.1", server.thrift1.port, server.thrift2.port

        def happybase_as(security: ClientSecurity) -> HappybaseConnection:
            # table_prefix "": the standalone's checks see the queue's own name.
            return HappybaseConnection(
                host, port1, security=security, gateway=False, timeout=10_000
            )

        admin = happybase_as(token(Claims("root", admin=True)))
        admin.create_table("orders", {"cf": {}})
        admin.create_table("audit", {"cf": {}})
        sidecar = happybase_as(token(Claims("sc", sidecar=True)))
        sidecar.table("orders").put(b"r", {b"cf:q": b"v"})
        sidecar.table("audit").put(b"r", {b"cf:q": b"secret"})

        reader = happybase_as(token(Claims("reader", consume=("orders",))))
        assert reader.table("orders").row(b"r") == {b"cf:q": b"v"}
        assert [row for row, _ in reader.table("orders").scan()] == [b"r"]
        # happybase leaves the message as bytes (it decodes no responses).
        with pytest.raises(Hbase.IOError) as caught:
            reader.table("audit").row(b"r")
        assert caught.value.message.startswith(DENIED.encode())
        with pytest.raises(Hbase.IOError) as caught:
            list(reader.table("audit").scan())
        assert b"may not read or subscribe to queue 'audit'" in caught.value.message
        with pytest.raises(Hbase.IOError) as caught:
            reader.table("orders").put(b"forged", {b"cf:q": b"x"})
        assert b"only a sidecar or an admin" in caught.value.message
        with pytest.raises(Hbase.IOError) as caught:
            reader.delete_table("orders", disable=True)
        assert b"needs an admin principal" in caught.value.message
        assert reader.table("orders").row(b"forged") == {}
        assert set(admin.tables()) == {b"orders", b"audit"}

        thrift2 = thrift_client(
            H2.THBaseService, host, port2, timeout_ms=10_000, security=token(Claims("reader2"))
        )
        try:
            with pytest.raises(H2.TIOError) as caught2:
                thrift2.deleteTable(H2.TTableName(qualifier=b"orders"))
            assert caught2.value.message.startswith(DENIED + "principal 'reader2'")
        finally:
            thrift2.close()
        for connection in (admin, sidecar, reader):
            connection.close()


@pytest.mark.server  # starts a server of its own
def test_the_servers_table_prefix_decides_which_tables_are_queues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``StandaloneConfig.table_prefix``, not the environment, is what its gateways'
    checks go by: the metadata table under that prefix is open to a reader, its
    queues' tables follow the queue rights, and a table outside it is refused."""
    from hqueue.security.config import ClientSecurity
    from hqueue.security.credentials import server_security
    from hqueue.security.tokens import Claims, generate_keys, load_private_key, mint
    from hqueue.standalone.server import StandaloneConfig, StandaloneServer
    from hqueue.wire.connect import HappybaseConnection

    monkeypatch.delenv("HQUEUE_TABLE_PREFIX", raising=False)
    private, public = tmp_path / "k.pem", tmp_path / "k.pub"
    generate_keys(private, public)
    key = load_private_key(private)
    config = StandaloneConfig(
        data_dir=tmp_path / "data",
        port=0,
        thrift2_port=0,
        sidecar=False,
        table_prefix="hq",
        security=server_security(auth_public_keys=[public]),
    )
    with StandaloneServer(config) as server:
        assert server.thrift1 is not None

        def happybase_as(claims: Claims) -> HappybaseConnection:
            return HappybaseConnection(
                "127.0.0.1",
                server.thrift1.port if server.thrift1 else 0,
                security=ClientSecurity(token=mint(key, claims)),
                gateway=False,
                timeout=10_000,
            )

        admin = happybase_as(Claims("root", admin=True))
        for table in ("hq_hqueue_metadata", "hq_orders", "other"):
            admin.create_table(table, {"cf": {}})
        reader = happybase_as(Claims("reader", consume=("orders",)))
        reader.table("hq_hqueue_metadata").put(b"r", {b"cf:q": b"checkpoint"})
        assert reader.table("hq_hqueue_metadata").row(b"r") == {b"cf:q": b"checkpoint"}
        assert reader.table("hq_orders").row(b"r") == {}
        with pytest.raises(Hbase.IOError) as caught:
            reader.table("hq_orders").put(b"forged", {b"cf:q": b"x"})
        assert b"only a sidecar or an admin" in caught.value.message
        with pytest.raises(Hbase.IOError) as caught:
            reader.table("other").row(b"r")
        assert b"outside this installation's table prefix" in caught.value.message
        admin.close()
        reader.close()
