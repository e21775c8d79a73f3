"""The ``kadmit`` command line.

Each subcommand lives in its own module under :mod:`kadmit.controller.commands` and exposes
``register(subparsers)``; the module adds its parser and sets ``func`` to a callable that
takes the parsed namespace and returns the process exit code. Discovering the modules keeps
this entry point free of knowledge about any one command.

``kadmit --help`` imports every command module to build its parser, so those modules import
nothing heavy at their top (aiohttp, kubernetes-asyncio, prometheus-client, cryptography, the
engine, the local cluster, ...): their command functions import what they run.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

import kadmit
from kadmit.controller import commands

EXIT_USAGE = 2
LOG_LEVELS = ("debug", "info", "warning", "error")


class CommandError(Exception):
    """A failure a user can act on: printed as one line, exit code ``code``."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def add_log_level_argument(parser: argparse.ArgumentParser, default: str = "info", logs: str = "") -> None:
    """``--log-level {debug,info,warning,error}``, in any case: the one spelling every command uses.

    ``logs`` says where and how the command logs, for the help text.
    """
    parser.add_argument(
        "--log-level",
        type=str.lower,
        choices=LOG_LEVELS,
        default=default,
        help=f"log level, in any case (default {default})" + (f"; {logs}" if logs else ""),
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kadmit", description="Kueue-compatible batch admission for Kubernetes."
    )
    parser.add_argument("--version", action="version", version=f"kadmit {kadmit.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except CommandError as exc:
        print(f"kadmit: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130
    return code

