"""``kadmit certs``: issue a CA and a serving certificate to files, for GitOps installs.

Writes ``ca.crt`` (for the webhook configurations' caBundle), ``tls.crt`` and ``tls.key`` (for
the Secret ``kadmit-webhook-server-cert``). The CA key is not written: nothing else can be
signed with it, and renewing means running the command again.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import tempfile
from pathlib import Path
from typing import Any

from kadmit.controller.cli import EXIT_USAGE, CommandError, add_command

FILES = ("ca.crt", "tls.crt", "tls.key")


def register(subparsers: Any) -> None:
    parser = add_command(
        subparsers, "certs", run, help="issue a CA and a webhook serving certificate to files",
        description="Issue a self-signed CA and a serving certificate for the webhook Service "
        "(<service>.<namespace>.svc and .svc.cluster.local), written as ca.crt, tls.crt and tls.key.",
    )
    parser.add_argument("--service", default="kadmit-webhook-service", help="webhook Service name")
    parser.add_argument("--namespace", default="kadmit-system", help="namespace of the Service")
    parser.add_argument("--out", required=True, help="directory to write ca.crt, tls.crt and tls.key into")
    parser.add_argument("--ca-days", type=int, default=3650, help="CA validity in days (default 3650)")
    parser.add_argument(
        "--days", type=int, default=365, help="serving certificate validity in days (default 365)"
    )
    parser.add_argument("--force", action="store_true", help="overwrite existing files")


def run(args: argparse.Namespace) -> int:
    from kadmit.certs.authority import issue_ca, issue_serving
    from kadmit.webhook.names import dns1123_label

    for what, value in (("--service", args.service), ("--namespace", args.namespace)):
        if problems := dns1123_label(value):
            raise CommandError(f"{what} {value!r}: {problems[0]}", EXIT_USAGE)
    for what, days in (("--ca-days", args.ca_days), ("--days", args.days)):
        if days < 1:
            raise CommandError(f"{what} must be at least 1, got {days}", EXIT_USAGE)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CommandError(f"{out} exists and is not a directory")
    if not args.force:
        for name in FILES:
            if (out / name).exists():
                raise CommandError(f"{out / name} exists; pass --force to overwrite")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(f"cannot create {out}: {exc.strerror}") from None

    ca = issue_ca(validity=dt.timedelta(days=args.ca_days))
    serving = issue_serving(ca, args.service, args.namespace, validity=dt.timedelta(days=args.days))
    contents = {
        "ca.crt": (ca.cert_pem, 0o644),
        "tls.crt": (serving.cert_pem, 0o644),
        "tls.key": (serving.key_pem, 0o600),
    }
    # Everything is written to temporary files first and renamed only when all three are complete,
    # so a failure leaves the previous files (or none), never a mismatched set.
    staged: list[tuple[str, Path]] = []
    try:
        for name, (data, mode) in contents.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=out)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.chmod(tmp, mode)
            staged.append((tmp, out / name))
        for tmp, final in staged:
            os.replace(tmp, final)
    except OSError as exc:
        for tmp, _ in staged:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise CommandError(f"cannot write to {out}: {exc.strerror}") from None
    names = f"{args.service}.{args.namespace}.svc"
    print(f"wrote {out / 'ca.crt'}, {out / 'tls.crt'}, {out / 'tls.key'} for {names}")
    return 0
