"""``hqueue token keygen|create|inspect``: the keys that sign tokens, and the tokens.

``keygen`` writes a new Ed25519 key pair: the private key (mode 0600) stays with
whoever issues tokens, the public key goes to every server (``--auth-public-key``).
``create`` prints a token naming a principal and its rights (queue-name patterns for
``--produce`` and ``--consume``, ``--admin``, ``--admin-namespace``, ``--sidecar``, or
``--push`` alone: what
a sidecar presents to subscribers, worth nothing at any server), or writes it to
``--output`` (mode 0600). ``inspect`` reads a token from a file or stdin, never from
the command line (where ``ps`` would show it), and prints its claims, not its
signature; with ``--public-key`` it also checks the signature and the expiry.

Errors print one line and exit with status 1.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from hqueue.cli.common import format_option, root_options
from hqueue.errors import HQueueError
from hqueue.message import format_time

__all__ = ["token"]


@click.group("token")
def token() -> None:
    """Make signing keys, create signed tokens and show what a token says."""


@token.command("keygen")
@click.option(
    "--private-key",
    required=True,
    type=click.Path(dir_okay=False),
    help="Write the private key here (mode 0600); it must not exist yet.",
)
@click.option(
    "--public-key",
    required=True,
    type=click.Path(dir_okay=False),
    help="Write the public key here (for the servers' --auth-public-key).",
)
def keygen(private_key: str, public_key: str) -> None:
    """Write a new Ed25519 key pair for signing tokens."""
    from hqueue.security.tokens import generate_keys

    try:
        generate_keys(private_key, public_key)
    except HQueueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"private key: {private_key} (keep it secret)\npublic key: {public_key}")


def _expires(text: str | None) -> int | None:
    if text is None:
        return None
    from hqueue.cli.policy_options import parse_ttl

    try:
        return parse_ttl(text, "--expires")
    except click.ClickException:
        raise click.ClickException(
            f"--expires {text!r} is not a duration: give seconds (3600), a duration such "
            "as 30d, 12h or 1h30m, or 'none' for a token that never expires"
        ) from None


@token.command("create")
@click.option(
    "--private-key",
    required=True,
    type=click.Path(dir_okay=False),
    help="The private key that signs (from `hqueue token keygen`).",
)
@click.option("--principal", required=True, help="The name the token gives its bearer.")
@click.option(
    "--produce",
    multiple=True,
    metavar="PATTERN",
    help="May put into the queues this pattern matches (*, ?, [...]); repeatable.",
)
@click.option(
    "--consume",
    multiple=True,
    metavar="PATTERN",
    help="May read and subscribe to the queues this pattern matches; repeatable.",
)
@click.option("--admin", is_flag=True, help="May use every admin verb, on every queue.")
@click.option(
    "--admin-namespace",
    "admin_namespace",
    multiple=True,
    metavar="NAMESPACE",
    help="May use the admin verbs on this namespace's policy and queues; repeatable.",
)
@click.option("--sidecar", is_flag=True, help="A sidecar's own token: every queue's table.")
@click.option(
    "--push",
    is_flag=True,
    help="A push token, alone: subscribers take pushes from it; no server takes it.",
)
@click.option(
    "--expires",
    default=None,
    metavar="DURATION",
    help="Expire this long after now (30d, 12h, 3600) [default: never].",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the token to this new file (mode 0600) instead of printing it.",
)
def create(
    private_key: str,
    principal: str,
    produce: tuple[str, ...],
    consume: tuple[str, ...],
    admin: bool,
    admin_namespace: tuple[str, ...],
    sidecar: bool,
    push: bool,
    expires: str | None,
    output: str | None,
) -> None:
    """Print a token signed with --private-key naming --principal and its rights."""
    import time

    from hqueue.security.tokens import Claims, load_private_key, mint

    lifetime = _expires(expires)
    now = int(time.time())
    try:
        claims = Claims(
            sub=principal,
            produce=produce,
            consume=consume,
            admin=admin,
            sidecar=sidecar,
            push=push,
            admin_ns=admin_namespace,
            iat=now,
            exp=None if lifetime is None else now + lifetime,
        )
        minted = mint(load_private_key(private_key), claims)
    except HQueueError as exc:
        message = str(exc)
        for claim, option in (
            ("sub", "principal"),
            ("produce", "produce"),
            ("consume", "consume"),
            ("push", "push"),
            ("admin_ns", "admin-namespace"),
        ):
            message = message.replace(f"claim {claim!r}", f"--{option}")
        raise click.ClickException(message) from None
    if output is None:
        click.echo(minted.reveal().decode())
        return
    try:
        fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise click.ClickException(f"cannot create {output}: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as out:
        out.write(minted.reveal() + b"\n")
    click.echo(f"token for principal {principal!r} written to {output}", err=True)


@token.command("inspect")
@click.argument("file", required=False, type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--public-key",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also check the signature with this public key, and the expiry.",
)
@format_option
@click.pass_context
def inspect(ctx: click.Context, file: str | None, public_key: str | None) -> None:
    """Print the claims of the token in FILE (default: stdin), not its signature."""
    from hqueue.security.secret import Secret
    from hqueue.security.tokens import (
        TOKEN_VERSION,
        SignedTokenAuthenticator,
        decode_claims,
        load_public_key,
    )

    if file is not None and file.startswith(TOKEN_VERSION + "."):
        # Not echoed back: the token has been shown to ``ps`` once already.
        raise click.ClickException(
            "hqueue token inspect reads the token from a FILE or stdin, never from the "
            "command line (where ps shows it)"
        )
    try:
        if file is None or file == "-":
            if sys.stdin.isatty():
                click.echo("reading the token from the terminal: paste it, then Ctrl-D", err=True)
            raw = Secret(sys.stdin.buffer.read().strip())
        else:
            raw = Secret(Path(file).read_bytes().strip())
    except OSError as exc:
        raise click.ClickException(f"cannot read the token file {file}: {exc.strerror}") from None
    try:
        if not raw.reveal():
            raise click.ClickException(f"no token in {file or 'stdin'}")
        claims = decode_claims(raw)
        verified = None
        if public_key is not None:
            SignedTokenAuthenticator([load_public_key(public_key)]).authenticate(raw.reveal())
            verified = True
    except HQueueError as exc:
        raise click.ClickException(str(exc)) from None
    if root_options(ctx).get("format") == "json":
        shown = claims.to_json()
        if verified is not None:
            shown["verified"] = verified
        click.echo(json.dumps(shown))
        return

    def listed(patterns: tuple[str, ...]) -> str:
        return " ".join(patterns) if patterns else "-"

    lines = [
        f"principal: {claims.sub}",
        f"produce: {listed(claims.produce)}",
        f"consume: {listed(claims.consume)}",
        f"admin: {'yes' if claims.admin else 'no'}",
        f"admin of namespaces: {listed(claims.admin_ns)}",
        f"sidecar: {'yes' if claims.sidecar else 'no'}",
        f"push: {'yes' if claims.push else 'no'}",
        f"issued: {_when(claims.iat)}",
        f"expires: {'never' if claims.exp is None else _when(claims.exp)}",
    ]
    if verified:
        lines.append("signature: valid for the public key given; not expired")
    click.echo("\n".join(lines))


def _when(seconds: int) -> str:
    return format_time(seconds * 1000)
