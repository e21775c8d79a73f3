"""Kubernetes resource quantities (``500m``, ``2Gi``, ``1e3``) as exact numbers, parsed in bounded time.

Fit checks and quotas compare sums of requests against limits; floats would let ``0.1+0.2`` CPUs
overflow a node, so amounts are kept as :class:`~fractions.Fraction`.

Parsing follows apimachinery's ``resource.ParseQuantity`` (``pkg/api/resource/quantity.go`` and
``suffix.go``): its grammar, its suffixes, the format a quantity remembers, and its limits, which
are also what keeps a parse cheap whatever the text (``1e1000000000`` must not build a number with
a billion digits):

- a decimal exponent must fit an int32, as ``suffixer.interpret`` requires since Kubernetes
  stopped wrapping larger ones (kubernetes/kubernetes#141203);
- no quantity may exceed 2^63-1 in magnitude, the bound ``resource.Quantity`` documents (the real
  server caps BinarySI values there and overflows on larger decimal ones; this one refuses them);
- the finest unit is the nano: a finer amount is rounded up, away from zero, as ``ParseQuantity``
  rounds with ``inf.RoundUp``.

The number itself is read with :mod:`decimal`, whose values carry their exponent apart from their
digits, so no step costs more than the length of the text.
"""

from __future__ import annotations

import decimal
import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

BINARY_SI = "BinarySI"
DECIMAL_SI = "DecimalSI"
DECIMAL_EXPONENT = "DecimalExponent"

MAX_MAGNITUDE = 2**63 - 1
MAX_EXPONENT = 2**31 - 1

# apimachinery's errors, worded as the real server words them.
FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
NUMERIC = "unable to parse numeric part of quantity"
SUFFIX = "unable to parse quantity's suffix"
TOO_LARGE = f"quantities must be no larger than 2^63-1 ({MAX_MAGNITUDE}) in magnitude"

# suffix -> (base, exponent), as suffix.go's tables.
_SUFFIXES: dict[str, tuple[int, int]] = {
    **{suffix: (10, 3 * power) for power, suffix in enumerate(("", "k", "M", "G", "T", "P", "E"))},
    **{suffix: (10, -3 * power) for power, suffix in enumerate(("m", "u", "n"), start=1)},
    **{suffix: (2, 10 * power) for power, suffix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), start=1)},
}
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL_SUFFIXES = {exponent: suffix for suffix, (base, exponent) in _SUFFIXES.items() if base == 10}

# quantity.go's grammar: sign, digits with at most one point, then a suffix. Possessive, so a
# long run of digits that fails to match is not tried again from every position.
_GRAMMAR = re.compile(r"([+-]?+)([0-9]*+)(?:\.([0-9]*+))?+([eEinumkKMGTP]*+[-+]?+[0-9]*+)")
_EXPONENT = re.compile(r"[eE]([-+]?)0*([0-9]{1,10})")

_EXACT = decimal.Context(
    prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN, rounding=decimal.ROUND_UP
)
_NANO = decimal.Decimal("1e-9")
_LARGEST = decimal.Decimal(MAX_MAGNITUDE)
_CACHED_TEXT = 64  # parses of texts up to this long are remembered (pods repeat the same few)

Resources = dict[str, Fraction]


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity; ``reason`` is apimachinery's wording of why."""

    def __init__(self, raw: object, reason: str) -> None:
        super().__init__(f"invalid quantity {raw!r}: {reason}")
        self.reason = reason


@dataclass(frozen=True)
class Quantity:
    """An exact amount that remembers its format, so it prints as ``resource.Quantity`` does."""

    value: Fraction
    format: str = DECIMAL_SI

    @classmethod
    def parse(cls, raw: object) -> Quantity:
        """Parse ``"500m"``, ``"1Gi"``, ``"1e3"``, ``2`` or ``0.5``; raise :class:`QuantityError` if not."""
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise QuantityError(raw, FORMAT_WRONG)
        if isinstance(raw, int):
            if abs(raw) > MAX_MAGNITUDE:
                raise QuantityError(raw, TOO_LARGE)
            return cls(Fraction(raw))
        if isinstance(raw, float) and not math.isfinite(raw):
            raise QuantityError(raw, FORMAT_WRONG)
        text = raw.strip() if isinstance(raw, str) else repr(raw)
        try:
            return _parse_short(text) if len(text) <= _CACHED_TEXT else _parse(text)
        except QuantityError as exc:
            raise QuantityError(raw, exc.reason) from None

    def __add__(self, other: Quantity) -> Quantity:
        # Go keeps the receiver's format unless the receiver is zero.
        return Quantity(self.value + other.value, other.format if self.value == 0 else self.format)

    def __str__(self) -> str:
        return format_quantity(self.value, self.format)


ZERO = Quantity(Fraction(0))
ONE = Quantity(Fraction(1))


def _parse(text: str) -> Quantity:
    match = _GRAMMAR.fullmatch(text)
    if match is None:
        raise QuantityError(text, FORMAT_WRONG)
    sign, whole, fraction, suffix = match.groups()
    if not whole and not fraction:
        raise QuantityError(text, NUMERIC if text else FORMAT_WRONG)
    base, exponent, fmt = _interpret(suffix)
    number = decimal.Decimal(f"{sign}{whole or 0}.{fraction or 0}")
    if base == 10:
        amount = number.scaleb(exponent, _EXACT)
    else:
        amount = _EXACT.multiply(number, 2**exponent)
        if fmt == BINARY_SI and 0 < amount.copy_abs() < 1:
            fmt = DECIMAL_SI  # as ParseQuantity does, "to avoid rounding and confusion"
    if amount.is_zero():
        return Quantity(Fraction(0), fmt)
    if amount.copy_abs() > _LARGEST:
        raise QuantityError(text, TOO_LARGE)
    return Quantity(Fraction(amount.quantize(_NANO, context=_EXACT)), fmt)


_parse_short = functools.lru_cache(maxsize=4096)(_parse)


def _interpret(suffix: str) -> tuple[int, int, str]:
    """(base, exponent, format) of a suffix, as ``suffixer.interpret``."""
    known = _SUFFIXES.get(suffix)
    if known is not None:
        return known[0], known[1], BINARY_SI if known[0] == 2 else DECIMAL_SI
    match = _EXPONENT.fullmatch(suffix)
    if match is None:
        raise QuantityError(suffix, SUFFIX)
    exponent = int(match[2])
    if exponent > MAX_EXPONENT:
        raise QuantityError(suffix, SUFFIX)
    return 10, -exponent if match[1] == "-" else exponent, DECIMAL_EXPONENT


def parse_quantity(raw: object) -> Fraction:
    """The exact amount of a quantity (see :meth:`Quantity.parse`)."""
    return Quantity.parse(raw).value


def parse_resources(values: Mapping[str, object] | None) -> Resources:
    """Parse a ``ResourceList`` (``{"cpu": "500m", ...}``)."""
    return {name: parse_quantity(raw) for name, raw in (values or {}).items()}


def add(total: Resources, more: Mapping[str, Fraction]) -> None:
    """Add ``more`` into ``total`` in place."""
    for name, amount in more.items():
        total[name] = total.get(name, Fraction(0)) + amount


def format_quantity(value: Fraction, fmt: str = DECIMAL_SI) -> str:
    """``Quantity.String()``: 0.5 → ``500m``, 2000 → ``2k``, 2**30 as BinarySI → ``1Gi``."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if fmt == BINARY_SI and magnitude >= 1024 and magnitude.denominator == 1:
        number, power = magnitude.numerator, 0
        while number % 1024 == 0 and power < len(_BINARY_SUFFIXES) - 1:
            number //= 1024
            power += 1
        return f"{sign}{number}{_BINARY_SUFFIXES[power]}"
    # Decimal: round up to nano precision, then the largest exponent (a multiple of 3) that
    # keeps the mantissa an integer.
    mantissa, exponent = math.ceil(magnitude * 10**9), -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    if exponent % 3 == 1:
        mantissa, exponent = mantissa * 10, exponent - 1
    elif exponent % 3 == 2:
        mantissa, exponent = mantissa * 100, exponent - 2
    if fmt == DECIMAL_EXPONENT:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    while exponent > 18:
        mantissa, exponent = mantissa * 1000, exponent - 3
    return f"{sign}{mantissa}{_DECIMAL_SUFFIXES[exponent]}"
