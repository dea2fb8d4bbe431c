"""The Python interpreter of one page: runs its ``python`` blocks in order, in one
namespace (as a reader pasting them into one interpreter would), and answers with what
each printed and the traceback of an error.

Run by :mod:`tests.docs.session` as ``python worker.py FD``. Requests come on stdin, one
JSON object a line: ``{"code", "file", "line"}`` runs a block (tracebacks name the page
and its lines); ``{"spark": true}`` first defines ``spark``, a local SparkSession, as the
``pyspark`` shell does. Each answer is one JSON line on file descriptor ``FD``:
``{"output", "error"}``, ``error`` being ``null`` or the traceback. Whatever the block
prints through ``sys.stdout``/``sys.stderr`` (its threads' prints included) is its
output; what reaches the process's own file descriptors (the JVM's logs) is not.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback
from typing import Any

_SPARK = """
from pyspark.sql import SparkSession
spark = (
    SparkSession.builder.master("local[2]")
    .appName("hqueue-docs")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.sql.session.timeZone", "UTC")
    .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
"""


def _run(source: str, file: str, namespace: dict[str, Any]) -> dict[str, str | None]:
    buffer = io.StringIO()
    error = None
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        try:
            exec(compile(source, file, "exec"), namespace)
        except BaseException:  # the block's failure is the answer, whatever it is
            error = traceback.format_exc()
    return {"output": buffer.getvalue(), "error": error}


def main() -> None:
    # Python put this file's folder first on the path: a block's `import markdown`
    # must find what a reader's interpreter finds, not the docs tests' modules.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    answers = os.fdopen(int(sys.argv[1]), "w")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for request in sys.stdin:
        job = json.loads(request)
        if job.get("spark"):
            answer = _run(_SPARK, "<the pyspark shell's spark>", namespace)
        else:
            # Blank lines first, so a traceback's line numbers are the page's.
            answer = _run("\n" * (job["line"] - 1) + job["code"], job["file"], namespace)
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
