"""The docs tests' convention: which blocks run, the output each shows, the wildcards,
and a page run end to end against a real server (docs/architecture.md, "The docs are
tests")."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.docs.expected import matches
from tests.docs.markdown import DocsSyntaxError, parse_page
from tests.docs.session import BlockFailure, PageRun, needs_spark, needs_zookeeper

PAGE = """# A page

```sh
hqueue queue create q --partitions 2
```
```text
created queue q: 2 partitions, 2 regions, ttl forever
```

Prose.

```python
print("hello")
```
Prose.
```text
not the output: prose came between
```

```console
$ echo one \\
    two
one two
$ false
```

```sh
# Not run by the docs tests: needs a real HBase cluster.
hqueue --hbase rs1:9090 sidecar
```

- a list:
  ```sh
  echo indented
  ```

```
hqueue scan QUEUE [--limit N]
```
"""


def test_blocks_their_kinds_lines_and_shown_output() -> None:
    page = parse_page("docs/example.md", PAGE)
    assert [(b.kind, b.line) for b in page.blocks] == [
        ("sh", 4),
        ("python", 13),
        ("console", 21),
        ("sh", 28),
        ("sh", 34),
    ]
    sh, python, console, cluster, indented = page.blocks
    assert sh.commands[0].expected == "created queue q: 2 partitions, 2 regions, ttl forever"
    assert python.commands[0].expected is None
    assert [(c.code, c.line, c.expected) for c in console.commands] == [
        ("echo one \\\n    two", 21, "one two"),
        ("false", 24, ""),
    ]
    assert cluster.skip == "needs a real HBase cluster."
    assert indented.commands[0].code == "echo indented"
    assert page.id == "example"


def test_an_untagged_transcript_is_refused() -> None:
    with pytest.raises(DocsSyntaxError, match=r"docs/x\.md:3"):
        parse_page("docs/x.md", "text\n\n```\n$ hqueue queue list\n```\n")


def test_an_unclosed_fence_is_refused() -> None:
    with pytest.raises(DocsSyntaxError, match=r"docs/x\.md:1: .*never closed"):
        parse_page("docs/x.md", "```sh\necho\n")


def test_what_a_page_needs() -> None:
    zk = parse_page("z.md", "```python\nopen_metastore(zookeeper=hosts)\n```\n")
    assert needs_zookeeper(zk) and not needs_spark(zk)
    spark = parse_page("s.md", "```python\nspark.read.format('hqueue')\n```\n")
    assert needs_spark(spark) and not needs_zookeeper(spark)
    skipped = parse_page(
        "n.md",
        "```sh\n# Not run by the docs tests: a cluster\n"
        "hqueue --zookeeper zk:2181 queue list\n```\n",
    )
    assert not needs_zookeeper(skipped)


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        ("<id>\n<id>", "1795291845192:0\n1795291845192:1\n"),
        ("created: <time>", "created: 2026-11-23T12:00:00.123Z"),
        ('{"timestamp": <ms>}', '{"timestamp": 1795291845192}'),
        ("a\n...\nz", "a\nb\nc\nz"),
        ("a\n...\nz", "a\nz"),
        ("head ... tail", "head anything at all tail"),
        ("audit  0  -", "audit\t0\t-"),
        ("x\n\n", "x   \n\n\n"),
        ("<other> stays literal", "<other> stays literal"),
    ],
)
def test_shown_output_matches(expected: str, actual: str) -> None:
    assert matches(expected, actual)


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        ("<id>", "1795291845192"),  # no sequence
        ("created: <time>", "created: 2026-11-23 12:00:00"),  # not ISO-8601 UTC
        ("a\nz", "a\nb\nz"),  # a line more
        ("partition 1", "partition 0"),
        ("a\n...", "b\na"),
        ("<n>", "x"),
    ],
)
def test_shown_output_does_not_match(expected: str, actual: str) -> None:
    assert not matches(expected, actual)


RUN = """```sh
hqueue queue create q --partitions 2
printf 'x\\n' | hqueue put q --topic t --partition 1
```
```text
created queue q: 2 partitions, 2 regions, ttl forever
1@<id>
```

```python
import hqueue

with hqueue.connect("127.0.0.1:9090") as client:
    print([m.value for m in client.queue("q").scan()])
```
```text
[b'x']
```

```console
$ hqueue queue create q --partitions 2
Error: queue 'q' already exists
```
"""


def test_a_page_runs_against_its_own_server(page_run: Callable[..., PageRun]) -> None:
    """Shell, Python (reaching make run's address, which stands for the page's server)
    and a transcript whose failing command shows its error."""
    page = parse_page("docs/run.md", RUN)
    with page_run(page) as run:
        for block in page.blocks:
            run.run(block)


def test_a_wrong_output_fails_naming_the_block(page_run: Callable[..., PageRun]) -> None:
    page = parse_page(
        "docs/wrong.md", "intro\n\n```sh\necho 'partition 1'\n```\n```text\npartition 0\n```\n"
    )
    with page_run(page) as run, pytest.raises(BlockFailure) as failure:
        run.run(page.blocks[0])
    assert "docs/wrong.md:4: the sh block printed other than the page shows" in str(failure.value)


def test_a_failing_command_fails_the_block(page_run: Callable[..., PageRun]) -> None:
    page = parse_page("docs/fail.md", "```sh\nhqueue scan nosuchqueue\necho after\n```\n")
    with page_run(page) as run, pytest.raises(BlockFailure) as failure:
        run.run(page.blocks[0])
    message = str(failure.value)
    assert "exited with status 1" in message and "after" not in message.split("printed:")[1]


def test_a_background_standalone_is_stood_in_for(page_run: Callable[..., PageRun]) -> None:
    """`hqueue standalone --data-dir DIR &` is the page's server (nothing binds 9090);
    other options are refused, naming the block."""
    page = parse_page(
        "docs/bg.md",
        "```sh\nhqueue standalone --data-dir /tmp/hq &   # prints its ready line\n"
        "hqueue queue create bg --partitions 1\n```\n"
        "```text\ncreated queue bg: 1 partition, 1 region, ttl forever\n```\n\n"
        "text\n\n```sh\nhqueue standalone --port 9999 &\n```\n",
    )
    with page_run(page) as run:
        run.run(page.blocks[0])
        with pytest.raises(BlockFailure, match=r"docs/bg\.md:12: .*only --data-dir"):
            run.run(page.blocks[1])


def test_python_blocks_do_not_see_the_runner(page_run: Callable[..., PageRun]) -> None:
    """A block imports what a reader's interpreter would, not the runner's modules."""
    page = parse_page(
        "docs/path.md",
        "```python\nimport importlib.util\n"
        "print(importlib.util.find_spec('session'), importlib.util.find_spec('expected'))\n"
        "```\n```text\nNone None\n```\n",
    )
    with page_run(page) as run:
        run.run(page.blocks[0])
