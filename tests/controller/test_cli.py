"""The ``kadmit`` entry point: subcommand discovery, usage errors, ``--version``, a light ``--help``."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kadmit
from kadmit.controller.cli import EVENT_LOOP_VARIABLE, LOG_LEVELS, build_parser, main, run_async

KADMIT = Path(sys.executable).with_name("kadmit")  # the installed entry point


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2


def test_parser_builds() -> None:
    assert build_parser().prog == "kadmit"


# ``kadmit --help`` runs this as ``python -m kadmit`` does (runpy), then reports what it imported.
PROBE = """
import contextlib, io, json, runpy, sys
sys.argv = ["kadmit", *sys.argv[1:]]
out = io.StringIO()
code = None
try:
    with contextlib.redirect_stdout(out):
        runpy.run_module("kadmit", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "stdout": out.getvalue(), "modules": sorted(sys.modules)}))
"""
HEAVY = ("aiohttp", "kubernetes_asyncio", "prometheus_client", "cryptography", "yaml", "jsonschema",
         "fastjsonschema", "celpy", "jsonpatch", "multidict", "urllib3")


def _imported_by(*args: str) -> dict[str, Any]:
    result = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                            timeout=60, check=True)
    report: dict[str, Any] = json.loads(result.stdout)
    return report


@pytest.mark.parametrize("args", [["--help"], ["checks", "run", "--help"], ["--version"]])
def test_help_imports_only_the_command_line(args: list[str]) -> None:
    report = _imported_by(*args)
    assert report["code"] == 0 and report["stdout"]
    modules: list[str] = report["modules"]
    heavy = sorted({m.split(".")[0] for m in modules} & set(HEAVY))
    assert not heavy, f"kadmit {' '.join(args)} imported {heavy}"
    ours = {m for m in modules if m == "kadmit" or m.startswith("kadmit.")}
    light = {"kadmit", "kadmit.__main__", "kadmit.controller", "kadmit.controller.cli",
             "kadmit.controller.defaults", "kadmit.controller.commands"}
    extra = sorted(m for m in ours - light if not m.startswith("kadmit.controller.commands."))
    assert not extra, f"kadmit {' '.join(args)} imported {extra} (import them inside the command function)"


def test_help_lists_every_command() -> None:
    out = subprocess.run([sys.executable, "-m", "kadmit", "--help"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    for command in ("certs", "checks", "local", "run", "simulate"):
        assert f"    {command}" in out, out


@pytest.mark.parametrize("command", [[sys.executable, "-m", "kadmit"], [str(KADMIT)]])
def test_version_is_the_package_version(command: list[str]) -> None:
    result = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"kadmit {kadmit.__version__}\n"
    assert kadmit.__version__ != "0+unknown"  # the installed distribution's version, not the fallback


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                yield from _parsers(child)


def test_every_log_level_flag_is_spelled_the_same() -> None:
    flags = [
        (parser.prog, action)
        for parser in _parsers(build_parser())
        for action in parser._actions
        if "log" in action.dest and "level" in action.dest
    ]
    assert {prog for prog, _ in flags} >= {"kadmit run", "kadmit checks run"}
    for prog, action in flags:
        assert action.option_strings == ["--log-level"], prog
        assert tuple(action.choices or ()) == LOG_LEVELS and action.default in LOG_LEVELS, prog


@pytest.mark.parametrize("command", [["run"], ["checks", "run"]])
def test_log_level_takes_any_case_and_refuses_other_words(command: list[str]) -> None:
    assert build_parser().parse_args([*command, "--log-level", "DEBUG"]).log_level == "debug"
    refused = subprocess.run([sys.executable, "-m", "kadmit", *command, "--log-level", "verbose"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode == 2
    assert "argument --log-level: invalid choice: 'verbose'" in refused.stderr


# -- the event loop: uvloop where installed, the standard one on request


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_commands_run_on_uvloop_where_it_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("uvloop")
    monkeypatch.delenv(EVENT_LOOP_VARIABLE, raising=False)
    assert run_async(_loop_module()).startswith("uvloop")


@pytest.mark.parametrize("value", ["asyncio", " AsyncIO "])
def test_the_standard_loop_on_request(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(EVENT_LOOP_VARIABLE, value)
    assert run_async(_loop_module()).startswith("asyncio")


def test_an_unknown_event_loop_is_a_one_line_usage_error() -> None:
    env = {**os.environ, EVENT_LOOP_VARIABLE: "trio"}
    done = subprocess.run(
        [str(KADMIT), "list", "clusterqueues"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "kadmit: error: KADMIT_EVENT_LOOP must be uvloop or asyncio, not 'trio'\n"
