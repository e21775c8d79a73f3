"""The ``kadmit`` entry point: subcommand discovery and usage errors."""

from __future__ import annotations

import pytest

from kadmit.controller.cli import build_parser, main


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
