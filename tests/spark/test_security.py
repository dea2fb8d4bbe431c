"""The data source against a secured ``hqueue standalone`` (TLS on every port, tokens
required): a read and a write with the options ``tlsCa`` and ``tokenFile``, a read
without a token refused; and the token never shown in the plan Spark prints."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hqueue.testing.standalone import StandaloneProcess
from tests.security_e2e.installation import Credentials, Installation

QUEUE = "sec-e2e-orders-spark"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installation]:
    base = tmp_path_factory.mktemp("secured-spark")
    credentials = Credentials.make(base)
    server = StandaloneProcess(base / "data", credentials.server_args()).start(timeout=60)
    try:
        installation = Installation(server, credentials)
        with installation.connect("admin") as admin:
            admin.create_queue(QUEUE, 2)
            admin.queue(QUEUE).put_batch([f"m{i}".encode() for i in range(20)], topic="t")
        yield installation
    finally:
        server.stop()


def _options(installation: Installation, who: str | None) -> dict[str, str]:
    server = installation.server
    options = {
        "queue": QUEUE,
        "hbase": server.address,
        "hbase_admin": server.admin_address,
        "table_prefix": "",
        "tlsCa": installation.certs.ca,
    }
    if who is not None:
        options["tokenFile"] = str(installation.tokens[who])
    return options


def test_read_and_write_with_tls_and_a_token(spark, secured: Installation) -> None:
    df = spark.read.format("hqueue").options(**_options(secured, "orders-reader")).load()
    assert sorted(r.value for r in df.select("value").collect()) == sorted(
        f"m{i}".encode() for i in range(20)
    )
    rows = spark.createDataFrame([(b"from-spark", "t")], "value binary, topic string")
    rows.write.format("hqueue").options(**_options(secured, "orders-writer")).mode("append").save()
    with secured.connect("admin") as admin:
        assert b"from-spark" in {m.value for m in admin.queue(QUEUE).scan()}


def test_a_read_without_a_token_is_refused(spark, secured: Installation) -> None:
    with pytest.raises(Exception, match="token"):
        spark.read.format("hqueue").options(**_options(secured, None)).load().count()


def test_the_token_is_not_in_the_plan(spark, secured: Installation, tmp_path: Path) -> None:
    options = _options(secured, "orders-reader")
    token = Path(options["tokenFile"]).read_text().strip()
    df = spark.read.format("hqueue").options(**options, token=token).load()
    plan = df._jdf.queryExecution().toString()
    assert token not in plan
