"""``hqueue token keygen|create|inspect`` (hqueue/cli/token.py), through click's
runner and once through the installed ``hqueue`` console script."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hqueue.cli.main import cli
from hqueue.security.tokens import SignedTokenAuthenticator, load_public_key

HQUEUE = Path(sys.executable).with_name("hqueue")


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    private, public = tmp_path / "signing.pem", tmp_path / "signing.pub"
    code, out, err = run(
        "token", "keygen", "--private-key", str(private), "--public-key", str(public)
    )
    assert code == 0, err
    assert str(private) in out and str(public) in out
    return private, public


def test_keygen_create_inspect(keys: tuple[Path, Path], tmp_path: Path) -> None:
    private, public = keys
    assert stat.S_IMODE(os.stat(private).st_mode) == 0o600
    code, out, err = run(
        "token", "create", "--private-key", str(private), "--principal", "billing",
        "--produce", "orders-*", "--consume", "orders-*", "--consume", "audit",
        "--expires", "30d",
    )  # fmt: skip
    assert code == 0, err
    token = out.strip()
    assert token.startswith("hqt1.") and out.count("\n") == 1
    principal = SignedTokenAuthenticator([load_public_key(public)]).authenticate(token.encode())
    assert principal.name == "billing" and principal.consume == ("orders-*", "audit")

    code, out, err = run("token", "inspect", "--public-key", str(public), stdin=token + "\n")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[:7] == [
        "principal: billing",
        "produce: orders-*",
        "consume: orders-* audit",
        "admin: no",
        "admin of namespaces: -",
        "sidecar: no",
        "push: no",
    ]
    assert lines[7].startswith("issued: ") and lines[8].startswith("expires: 20")
    assert lines[9].startswith("signature: valid")
    signature = token.rsplit(".", 1)[1]
    assert signature not in out

    token_file = tmp_path / "token"
    token_file.write_text(token)
    code, out, _ = run("token", "inspect", str(token_file), "-o", "json")
    shown = json.loads(out)
    assert shown["sub"] == "billing" and shown["exp"] - shown["iat"] == 30 * 86400
    assert "verified" not in shown


def test_create_to_a_file_and_flags(keys: tuple[Path, Path], tmp_path: Path) -> None:
    private, public = keys
    output = tmp_path / "sidecar.token"
    code, out, err = run(
        "token", "create", "--private-key", str(private), "--principal", "sidecar-1",
        "--sidecar", "--admin", "--output", str(output),
    )  # fmt: skip
    assert code == 0 and out == "" and str(output) in err
    assert stat.S_IMODE(os.stat(output).st_mode) == 0o600
    token = output.read_bytes().strip()
    principal = SignedTokenAuthenticator([load_public_key(public)]).authenticate(token)
    assert principal.sidecar and principal.admin
    code, out, _ = run("token", "inspect", str(output))
    assert "expires: never" in out and "sidecar: yes" in out
    assert "admin of namespaces: -" in out
    ns_token = tmp_path / "ns.token"
    code, _, err = run(
        "token", "create", "--private-key", str(private), "--principal", "markets-ops",
        "--admin-namespace", "markets", "--admin-namespace", "logs", "--output", str(ns_token),
    )  # fmt: skip
    assert code == 0, err
    ns_principal = SignedTokenAuthenticator([load_public_key(public)]).authenticate(
        ns_token.read_bytes().strip()
    )
    assert ns_principal.admin_namespaces == ("markets", "logs") and not ns_principal.admin
    code, out, _ = run("token", "inspect", str(ns_token))
    assert "admin of namespaces: markets logs" in out
    code, _, err = run(
        "token",
        "create",
        "--private-key",
        str(private),
        "--principal",
        "x",
        "--output",
        str(output),
    )
    assert code == 1 and "cannot create" in err


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["create", "--principal", " padded"], None, "--principal must hold printable"),
        (["create", "--principal", "p", "--produce", ""], None, "--produce must hold non-empty"),
        (["create", "--principal", "p", "--expires", "soon"], None, "--expires 'soon' is not"),
        (
            ["create", "--principal", "p", "--admin-namespace", "a-b"],
            None,
            "--admin-namespace must be namespace names",
        ),
        (["create", "--principal", "p", "--expires", "0"], None, "--expires '0' is not"),
        (["inspect"], "", "no token in stdin"),
        (["inspect"], "hqt1.garbage", "malformed token"),
        (["inspect", "/nonexistent/token"], None, "cannot read the token file"),
    ],
)
def test_errors_are_one_line(
    keys: tuple[Path, Path], args: list[str], stdin: str | None, message: str
) -> None:
    private, _ = keys
    if args[0] == "create":
        args = [*args, "--private-key", str(private)]
    code, out, err = run("token", *args, stdin=stdin)
    assert code == 1 and out == ""
    assert err.startswith("Error: ") and err.count("\n") == 1 and message in err, err


def test_inspect_with_the_wrong_key_or_after_expiry(
    keys: tuple[Path, Path], tmp_path: Path
) -> None:
    private, _ = keys
    other_private, other_public = tmp_path / "o.pem", tmp_path / "o.pub"
    run("token", "keygen", "--private-key", str(other_private), "--public-key", str(other_public))
    _, token, _ = run("token", "create", "--private-key", str(private), "--principal", "p")
    code, _, err = run("token", "inspect", "--public-key", str(other_public), stdin=token)
    assert code == 1 and "signature is not valid" in err and token.strip() not in err
    code, _, err = run("token", "inspect", stdin=private.read_text())
    assert code == 1 and "malformed token" in err and "PRIVATE" not in err
    code, _, err = run("token", "create", "--private-key", str(other_public), "--principal", "p")
    assert code == 1 and "holds no unencrypted PEM private key" in err


def test_keygen_never_overwrites(keys: tuple[Path, Path]) -> None:
    private, public = keys
    before = private.read_bytes()
    code, _, err = run(
        "token", "keygen", "--private-key", str(private), "--public-key", str(public)
    )
    assert code == 1 and "exists: not overwritten" in err
    assert private.read_bytes() == before


def test_the_console_script(tmp_path: Path) -> None:
    assert HQUEUE.exists(), HQUEUE
    private, public = tmp_path / "k.pem", tmp_path / "k.pub"

    def hqueue(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(HQUEUE), "token", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    assert (
        hqueue("keygen", "--private-key", str(private), "--public-key", str(public)).returncode == 0
    )
    created = hqueue("create", "--private-key", str(private), "--principal", "ops", "--admin")
    assert created.returncode == 0, created.stderr
    shown = hqueue("inspect", "--public-key", str(public), "-o", "json", stdin=created.stdout)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) | {"iat": 0} == {
        "sub": "ops",
        "produce": [],
        "consume": [],
        "admin": True,
        "sidecar": False,
        "iat": 0,
        "verified": True,
    }
    # No token on the command line: inspect takes none there.
    refused = hqueue("inspect", created.stdout.strip())
    assert refused.returncode == 1 and "never from the command line" in refused.stderr
    assert created.stdout.strip() not in refused.stderr


def test_help_imports_no_cryptography() -> None:
    script = (
        "import sys\n"
        "from hqueue.cli.main import cli\n"
        "cli(['token', 'create', '--help'], standalone_mode=False)\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    imported = set(result.stderr.split())
    assert "hqueue.cli.token" in imported
    assert not {m for m in imported if m.split(".")[0] in ("cryptography", "kazoo", "thriftpy2")}
