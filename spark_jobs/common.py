"""What every job shares: the connection arguments, the SparkSession, the translation
of Spark's errors into hqueue's, and the command line (:func:`job_main`: the arguments
parsed, then one summary line, or one error line and a non-zero exit status).

Not public API.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import logging
import os
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from hqueue import settings
from hqueue.errors import HQueueError

__all__ = [
    "INTERRUPTED",
    "Job",
    "SparkJobError",
    "add_connection_args",
    "add_selection_args",
    "check_queue",
    "connect_requested",
    "connection_options",
    "hqueue_error",
    "job_main",
    "plural",
    "run_job",
    "spark_errors",
    "spark_session",
    "stage_status",
]

INTERRUPTED = 130
"""The exit status after Ctrl-C (128 + SIGINT), as the ``hqueue`` command's."""


class SparkJobError(HQueueError):
    """Spark failed a job for a reason that is not an hqueue error (a missing path, an
    executor lost...): the message is Spark's first line, the Spark exception is the
    ``__cause__``."""


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--queue``, ``--hbase``, ``--hbase-admin``, ``--zookeeper`` and
    ``--table-prefix`` (defaults from ``HQUEUE_*`` environment variables), and
    ``--spark-log``."""
    parser.add_argument("--queue", required=True, help="the queue's name")
    parser.add_argument(
        "--hbase",
        default=settings.hbase_address(),
        help=f"HOST:PORT of the HBase Thrift1 gateway ({settings.ENV_HBASE})",
    )
    parser.add_argument(
        "--hbase-admin",
        default=settings.hbase_admin_address(),
        help=f"HOST:PORT of the Thrift2 gateway ({settings.ENV_HBASE_ADMIN})",
    )
    parser.add_argument(
        "--zookeeper",
        default=settings.zookeeper_hosts(),
        help=f"ZooKeeper hosts holding the metadata ({settings.ENV_ZOOKEEPER})",
    )
    parser.add_argument(
        "--table-prefix",
        default=settings.table_prefix() or "",
        help=f"the installation's table prefix ({settings.ENV_TABLE_PREFIX})",
    )
    parser.add_argument(
        "--spark-log",
        metavar="FILE",
        help="where local Spark's own log goes (default: a temporary file, kept and named "
        "only when the job fails for a reason that is not hqueue's)",
    )


def add_selection_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--start``, ``--end`` and ``--topics``: the data source options that select
    the messages a job reads."""
    parser.add_argument("--start", help="first id or time (inclusive)")
    parser.add_argument("--end", help="last id or time (exclusive)")
    parser.add_argument("--topics", help="comma-separated topics (default: all)")


def connection_options(args: argparse.Namespace) -> dict[str, str]:
    """Return the data source options of the connection arguments."""
    options = {"queue": args.queue, "hbase": args.hbase, "table_prefix": args.table_prefix}
    if args.hbase_admin:
        options["hbase_admin"] = args.hbase_admin
    if args.zookeeper:
        options["zookeeper"] = args.zookeeper
    return options


def plural(count: int, noun: str) -> str:
    """Return ``count`` and ``noun``, with an ``s`` unless ``count`` is 1."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def check_queue(options: dict[str, str]) -> int:
    """Check that the queue exists before Spark starts (a wrong name fails in a second
    instead of after Spark's start-up); return its partition count.

    :raises NoQueueError: if there is no such queue.
    :raises InvalidArgumentError: if the connection options are malformed.
    :raises ConnectionLostError: if the storage or the metadata cannot be reached.
    """
    from hqueue.spark.options import Connection

    conn = Connection.parse(options)
    with conn.connect() as client:
        return int(client.queue(conn.queue).partitions)


def connect_requested() -> bool:
    """Return whether the environment asks PySpark for a Spark Connect session:
    ``SPARK_REMOTE`` set (``sc://HOST:PORT``, or ``local[...]`` for a Connect server
    started in this process) or ``SPARK_API_MODE=connect``."""
    return "SPARK_REMOTE" in os.environ or os.environ.get("SPARK_API_MODE", "") == "connect"


def spark_session(app: str, log: IO[str] | None = None) -> Any:
    """Return the active SparkSession (spark-submit's), a Spark Connect session when
    the environment asks for one (:func:`connect_requested`), or a local one
    (``local[*]``, or ``$SPARK_MASTER``); with the ``hqueue`` data source registered.
    When this process starts a local Spark and ``log`` is given, its JVM writes its
    log and its own messages to ``log`` instead of this process's stderr (not a local
    Connect server's, started by PySpark itself).

    :raises ImportError: if PySpark or pyarrow is missing (or, for Spark Connect, its
        dependencies: grpcio, grpcio-status, googleapis-common-protos, zstandard,
        pandas).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    import hqueue.spark

    builder = SparkSession.builder.appName(app)
    # With Spark Connect there is no SparkContext here: the builder connects (PySpark
    # starts a local Connect server itself for SPARK_REMOTE=local).
    if not connect_requested() and "PYSPARK_GATEWAY_PORT" not in os.environ:
        # run with python -m, not spark-submit
        conf = (
            SparkConf()
            .setMaster(os.environ.get("SPARK_MASTER", "local[*]"))
            .setAppName(app)
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false")
        )
        # PySpark's documented hook for capturing the JVM's output: the JVM (and the
        # Python workers it forks) inherit ``log`` as their stderr.
        gateway = launch_gateway(conf, popen_kwargs={"stderr": log}) if log else None
        SparkContext(conf=conf, gateway=gateway)
        if log:
            _log_python_side(log)
    if threading.current_thread() is threading.main_thread():
        # PySpark's own Ctrl-C handler asks the JVM to cancel the jobs from inside the
        # py4j call under way, which fails and logs tracebacks; the job ends instead.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    spark = builder.config("spark.sql.session.timeZone", "UTC").getOrCreate()
    hqueue.spark.register(spark)
    return spark


def _log_python_side(log: IO[str]) -> None:
    """Send what PySpark and py4j log on the driver's Python side to ``log`` too:
    PySpark logs a failed query's context as a JSON line on stderr
    (``DataFrameQueryContextLogger``, created on first use with its own stderr
    handler), py4j logs broken calls through the root logger (which, without a
    handler, prints to stderr)."""
    from pyspark.logger import PySparkLogger

    logger = PySparkLogger.getLogger("DataFrameQueryContextLogger")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    logger.addHandler(logging.StreamHandler(log))
    logger.propagate = False
    logging.getLogger().addHandler(logging.StreamHandler(log))


# Python's traceback line of an hqueue exception, as Spark passes it on in the text of
# the exception it raises on the driver: "hqueue.errors.NoQueueError: no queue 'x'".
_RAISED = re.compile(r"^(hqueue(?:\.\w+)+)\.(\w+): (.*)$", re.MULTILINE)


def hqueue_error(exc: BaseException) -> HQueueError | None:
    """Return the hqueue error that ``exc`` is, or that it wraps: Spark raises on the
    driver an ``AnalysisException``, ``PythonException``, ``StreamingQueryException`` or
    ``Py4JJavaError`` whose text holds the traceback of the data source's error in a
    Python worker. The error is rebuilt from the last such traceback line (its class and
    the first line of its message); ``None`` if there is none.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, HQueueError):
            return current
        for module, name, message in reversed(_RAISED.findall(str(current))):
            error = _rebuild(module, name, message.strip())
            if error is not None:
                return error
        current = current.__cause__ or current.__context__
    return None


def _rebuild(module: str, name: str, message: str) -> HQueueError | None:
    try:
        cls = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
    if not (isinstance(cls, type) and issubclass(cls, HQueueError)):
        return None
    try:
        return cls(message)
    except TypeError:  # a class with other required arguments
        return HQueueError(f"{name}: {message}")


def _first_line(exc: BaseException) -> str:
    """The first line of Spark's message that says something (Py4J's starts with the
    Java method it called)."""
    for line in str(exc).splitlines():
        line = line.strip().removeprefix(": ").strip()
        if line and not line.startswith("An error occurred while calling"):
            return line
    return type(exc).__name__


def _from_spark(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] in ("pyspark", "py4j")


@contextlib.contextmanager
def spark_errors() -> Iterator[None]:
    """Raise hqueue's errors instead of Spark's inside the block: the hqueue error a
    Spark exception wraps (:func:`hqueue_error`), else :class:`SparkJobError` with
    Spark's first line.

    :raises HQueueError: as described.
    """
    try:
        yield
    except HQueueError:
        raise
    except Exception as exc:
        error = hqueue_error(exc)
        if error is not None:
            raise error from None
        if _from_spark(exc):
            raise SparkJobError(_first_line(exc)) from exc
        raise


class Job:
    """One run of a job from the command line: its Spark session, started on first use,
    with local Spark's log sent to a file (``--spark-log``, else a temporary one)."""

    def __init__(self, app: str, spark_log: str | None) -> None:
        self.app = app
        self.spark_log = spark_log
        self.log_path: Path | None = None
        self._log: IO[str] | None = None
        self._spark: Any = None

    def spark(self) -> Any:
        """Return the job's SparkSession, starting it on the first call.

        :raises SparkJobError: if Spark does not start.
        """
        if self._spark is None:
            if "PYSPARK_GATEWAY_PORT" not in os.environ and not _remote_server():
                if self.spark_log:
                    self._log = open(self.spark_log, "a")  # noqa: SIM115 - closed by close()
                else:
                    self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - as above
                        "w", prefix=f"{self.app}-", suffix=".log", delete=False
                    )
                self.log_path = Path(self._log.name)
            with spark_errors():
                self._spark = spark_session(self.app, self._log)
        return self._spark

    def close(self, keep_log: bool) -> None:
        """Stop Spark; remove a temporary log unless ``keep_log``."""
        if self._spark is not None:
            with contextlib.suppress(Exception):  # the result is already known
                self._spark.stop()
        if self._log is not None:
            self._log.close()
            if not keep_log and not self.spark_log and self.log_path:
                self.log_path.unlink(missing_ok=True)

    def log_failure(self, exc: BaseException) -> str:
        """Append ``exc``'s traceback to the Spark log; return where to find it, as the
        end of an error line ('' without a log)."""
        if self.log_path is None:
            return ""
        with self.log_path.open("a") as f:
            traceback.print_exception(exc, file=f)
        return f" (details in {self.log_path})"


def run_job(
    prog: str,
    spark_log: str | None,
    work: Callable[[Job], str],
    interrupted: str = "interrupted",
) -> int:
    """Run ``work`` (handed the :class:`Job`, it returns the summary of what it did) and
    print one line: on stdout the summary with the job's wall time, exit status 0; on
    stderr ``<prog>: error: <message>``, status 1 (the message of the hqueue error, or
    for anything else its first line and where the details are), or ``interrupted`` on
    Ctrl-C, status 130.

    :returns: the exit status.
    """
    started = time.monotonic()
    job = Job(prog.rpartition(".")[2], spark_log)
    keep_log = False
    try:
        summary = work(job)
    except KeyboardInterrupt:
        print(f"{prog}: {interrupted}", file=sys.stderr)
        return INTERRUPTED
    except ImportError as exc:  # PySpark or pyarrow
        print(f"{prog}: error: {exc}: install hqueue's Spark extra, hqueue[spark]", file=sys.stderr)
        return 1
    except SparkJobError as exc:
        keep_log = True
        print(f"{prog}: error: {exc}{job.log_failure(exc)}", file=sys.stderr)
        return 1
    except HQueueError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: its traceback goes to the log, or here without one
        keep_log = True
        where = job.log_failure(exc)
        if not where:
            traceback.print_exc()
        print(f"{prog}: error: {type(exc).__name__}: {_first_line(exc)}{where}", file=sys.stderr)
        return 1
    finally:
        job.close(keep_log)
    print(f"{summary} in {time.monotonic() - started:.1f} s")
    return 0


def job_main(
    prog: str,
    description: str | None,
    add_args: Callable[[argparse.ArgumentParser], None],
    run: Callable[[Job, argparse.Namespace, dict[str, str]], str],
    argv: list[str] | None = None,
    *,
    options: tuple[str, ...] = (),
    positive: tuple[str, ...] = (),
    interrupted: str = "interrupted",
) -> int:
    """Run a job from the command line ``argv`` (default: ``sys.argv``); return the exit
    status.

    The parser is named ``prog`` (``hqueue.spark_jobs.<job>``, which also starts the
    error lines) and shows ``description`` as written; it takes the connection
    arguments (:func:`add_connection_args`), then the job's own (``add_args``). The
    job's arguments named in ``options`` are data source options too, passed on when
    given and not empty; the integer options named in ``positive`` (``--bucket``) must
    be > 0, a usage error (status 2) otherwise. Then :func:`run_job` runs ``run``,
    handed the :class:`Job`, the parsed arguments and the data source options, which
    returns the summary line; ``interrupted`` is the line printed on Ctrl-C.
    """
    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_connection_args(parser)
    add_args(parser)
    args = parser.parse_args(argv)
    for flag in positive:
        if getattr(args, flag.removeprefix("--").replace("-", "_")) <= 0:
            parser.error(f"'{flag}' must be > 0")
    source_options = connection_options(args)
    for name in options:
        value = getattr(args, name)
        if value is not None and value != "":
            source_options[name] = str(value)
    return run_job(prog, args.spark_log, lambda job: run(job, args, source_options), interrupted)


def _remote_server() -> bool:
    """Whether the job's Spark runs elsewhere: a Connect server not started here."""
    return connect_requested() and not os.environ.get("SPARK_REMOTE", "local").startswith("local")


def stage_status(spark: Any) -> str:
    """Return the running Spark stages' progress, e.g. ``stage 3: 5/8 tasks``, from
    Spark's status tracker ('' when none runs, and over Spark Connect, which has no
    status tracker): the status line of a job's progress."""
    from hqueue.spark.session import is_connect

    if is_connect(spark):
        return ""
    tracker = spark.sparkContext.statusTracker()
    parts = []
    for stage in sorted(tracker.getActiveStageIds()):
        info = tracker.getStageInfo(stage)
        if info is not None:
            parts.append(f"stage {stage}: {info.numCompletedTasks}/{info.numTasks} tasks")
    return ", ".join(parts)
