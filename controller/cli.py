"""The ``kadmit`` command line.

Each subcommand lives in its own module under :mod:`kadmit.controller.commands` and exposes
``register(subparsers)``; the module adds its parser and sets ``func`` to a callable that
takes the parsed namespace and returns the process exit code. Discovering the modules keeps
this entry point free of knowledge about any one command.

``kadmit --help`` imports every command module to build its parser, so those modules import
nothing heavy at their top (aiohttp, kubernetes-asyncio, prometheus-client, cryptography, the
engine, the local cluster, ...): their command functions import what they run.

Exit codes: 0 done; 1 a runtime failure (:data:`EXIT_FAILURE`: the cluster cannot be reached or
refuses a request, a port is in use, a file cannot be read or does not hold what it should);
2 a usage error (:data:`EXIT_USAGE`, argparse's: an unknown option, a value out of range, options
that do not go together: what was typed has to change); 130 interrupted. Errors are one line,
``kadmit: error: ...``, on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import pkgutil
import signal
import sys
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import kadmit
from kadmit.controller import commands

if TYPE_CHECKING:
    from kadmit.kube import Client

EXIT_FAILURE = 1
EXIT_USAGE = 2
LOG_LEVELS = ("debug", "info", "warning", "error")
EVENT_LOOP_VARIABLE = "KADMIT_EVENT_LOOP"

T = TypeVar("T")


class CommandError(Exception):
    """A failure a user can act on: printed as one line, exit code ``code``.

    A runtime failure by default; a command raises it with ``EXIT_USAGE`` for what is wrong in
    the command line itself, which no retry fixes.
    """

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


def add_command(
    subparsers: Any,
    name: str,
    func: Callable[[argparse.Namespace], int],
    help: str,
    description: str | None = None,
) -> argparse.ArgumentParser:
    """Add the (sub)command ``name``, run by ``func``; returns its parser, for its options."""
    parser: argparse.ArgumentParser = subparsers.add_parser(name, help=help, description=description)
    parser.set_defaults(func=func)
    return parser


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


async def connect(kubeconfig: str | None, context: str | None = None) -> Client:
    """kadmit's client for the cluster: from the kubeconfig (and its context), else in-cluster
    (:meth:`kadmit.kube.Client.connect`); a kubeconfig that cannot be used is a one-line error."""
    from kadmit.kube import Client, KubeConfigError

    try:
        return await Client.connect(kubeconfig, context)
    except KubeConfigError as exc:
        raise CommandError(str(exc)) from None


@contextlib.contextmanager
def stop_on_signals() -> Iterator[asyncio.Event]:
    """An event that SIGINT or SIGTERM sets, for as long as the block runs (on a platform whose
    event loop can handle signals)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    try:
        yield stop
    finally:
        for sig in signals:
            with contextlib.suppress(NotImplementedError):
                loop.remove_signal_handler(sig)


def run_async(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the event loop :func:`loop_factory` chooses."""
    try:
        factory = loop_factory()
    except CommandError:
        main.close()  # never started: no "never awaited" warning after the one-line error
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (a dependency on Linux and macOS); None: the
    standard library's.

    Every request kadmit sends or serves crosses TLS, and asyncio's own TLS transport is Python
    code on each read and write; uvloop's loop and TLS transport are compiled. In Kueue's
    scalability test it took 8 to 10 % off kadmit's CPU per admission (bench/README.md).
    ``KADMIT_EVENT_LOOP=asyncio`` keeps the standard library's loop; ``uvloop`` insists on uvloop.
    """
    choice = os.environ.get(EVENT_LOOP_VARIABLE, "").strip().lower()
    if choice not in ("", "uvloop", "asyncio"):
        raise CommandError(f"{EVENT_LOOP_VARIABLE} must be uvloop or asyncio, not {choice!r}", EXIT_USAGE)
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise CommandError(f"{EVENT_LOOP_VARIABLE}=uvloop, but uvloop is not installed") from None
        return None
    return uvloop.new_event_loop


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

