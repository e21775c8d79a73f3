"""CEL for webhook ``matchConditions``, evaluated with cel-python (``celpy``).

The real API server compiles each condition once and evaluates it against ``object``,
``oldObject`` and ``request`` (the AdmissionRequest as sent to the webhook). The full CEL
standard library that cel-python implements is available; the Kubernetes extension
libraries (``authorizer``, ``quantity()``, ``url()``, ``ip()``) are not, and an expression
that uses them fails when it is evaluated, with the error below.
"""

from __future__ import annotations

import functools
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

_ENVIRONMENT = celpy.Environment()


class CELError(Exception):
    """An expression that does not compile, fails at evaluation, or does not yield a bool."""


@functools.lru_cache(maxsize=512)
def _program(expression: str) -> celpy.Runner:
    try:
        return _ENVIRONMENT.program(_ENVIRONMENT.compile(expression))
    except CELParseError as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else "syntax error"
        raise CELError(f"compilation failed: {first_line}") from None


def check(expression: str) -> None:
    """Raise :class:`CELError` when ``expression`` does not compile."""
    _program(expression)


def evaluate_bool(expression: str, variables: dict[str, Any]) -> bool:
    """Evaluate ``expression`` over JSON-like ``variables`` and return its boolean result."""
    program = _program(expression)
    activation = {name: json_to_cel(value) for name, value in variables.items()}
    try:
        result = program.evaluate(activation)
    except CELEvalError as exc:
        raise CELError(_describe(exc)) from None
    except (TypeError, ValueError, KeyError, ZeroDivisionError) as exc:
        raise CELError(str(exc) or type(exc).__name__) from None
    if isinstance(result, CELEvalError):
        raise CELError(_describe(result))
    if not isinstance(result, celtypes.BoolType):
        raise CELError(f"expression must evaluate to a bool, got {type(result).__name__}")
    return bool(result)


def _describe(error: CELEvalError) -> str:
    args = error.args
    if args and isinstance(args[0], str):
        return args[0]
    return str(error)
