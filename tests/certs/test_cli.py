"""``kadmit certs`` writes a usable set of files, and never half of one."""

from __future__ import annotations

import os
import ssl
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kadmit.certs.authority import KeyPair, served_names, signed_by

# The installed entry point, as a user runs it (``python -m controller.cli`` would load a second
# copy of the module, with its own CommandError class).
KADMIT = Path(sys.executable).with_name("kadmit")


def kadmit_process(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(KADMIT), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def kadmit(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in-process (the installed entry point is exercised once, above all the others)."""
    import contextlib
    import io

    from kadmit.controller.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def test_writes_ca_and_serving_files(tmp_path: Path) -> None:
    out = tmp_path / "tls"
    result = kadmit_process("certs", "--service", "hooks", "--namespace", "batch", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    ca = KeyPair((out / "ca.crt").read_bytes(), b"")
    serving = KeyPair((out / "tls.crt").read_bytes(), (out / "tls.key").read_bytes())
    assert serving.matches()
    assert signed_by(serving, ca)
    assert "hooks.batch.svc" in served_names(serving)
    assert stat.S_IMODE(os.stat(out / "tls.key").st_mode) == 0o600
    # OpenSSL accepts the pair and trusts the chain.
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(out / "tls.crt", out / "tls.key")
    ssl.create_default_context(cafile=str(out / "ca.crt"))


def test_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    assert kadmit("certs", "--out", str(tmp_path)).returncode == 0
    before = (tmp_path / "tls.crt").read_bytes()
    result = kadmit("certs", "--out", str(tmp_path))
    assert result.returncode == 1  # the files on disk are in the way, not the command line
    assert result.stderr == f"kadmit: error: {tmp_path / 'ca.crt'} exists; pass --force to overwrite\n"
    assert (tmp_path / "tls.crt").read_bytes() == before
    assert kadmit("certs", "--out", str(tmp_path), "--force").returncode == 0
    assert (tmp_path / "tls.crt").read_bytes() != before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--service", "Bad_Name"], "--service 'Bad_Name': a lowercase RFC 1123 label must consist of"),
        (["--days", "0"], "--days must be at least 1"),
    ],
)
def test_bad_arguments_are_one_line_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = kadmit("certs", "--out", str(tmp_path / "x"), *args)
    assert result.returncode == 2  # a usage error
    assert result.stderr.startswith("kadmit: error: " + message)
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "x").exists()


def test_out_must_be_a_directory(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("")
    result = kadmit("certs", "--out", str(target))
    assert result.returncode == 1
    assert result.stderr == f"kadmit: error: {target} exists and is not a directory\n"
