"""Kubernetes resource quantities (``500m``, ``2Gi``, ``1e3``) as exact numbers.

Fit checks compare sums of requests against allocatable; floats would let ``0.1+0.2`` CPUs
overflow a node, so quantities are kept as :class:`~fractions.Fraction`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction

_SUFFIXES: dict[str, Fraction] = {
    "": Fraction(1),
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(
    r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$"
)

Resources = dict[str, Fraction]


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity the way the API server does; raise :class:`QuantityError` otherwise."""
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    match = _QUANTITY.match(value.strip())
    if match is None:
        raise QuantityError(f"invalid quantity {value!r}")
    number, exponent, suffix = match.groups()
    amount = Fraction(number)
    if exponent:
        return amount * Fraction(10) ** int(exponent[1:])
    return amount * _SUFFIXES[suffix or ""]


def parse_resources(values: Mapping[str, str | int | float] | None) -> Resources:
    """Parse a ``ResourceList`` (``{"cpu": "500m", ...}``)."""
    return {name: parse_quantity(raw) for name, raw in (values or {}).items()}


def add(total: Resources, more: Mapping[str, Fraction]) -> None:
    """Add ``more`` into ``total`` in place."""
    for name, amount in more.items():
        total[name] = total.get(name, Fraction(0)) + amount


def format_quantity(amount: Fraction) -> str:
    """Render an amount for a status field: whole numbers plainly, the rest in milli-units."""
    if amount.denominator == 1:
        return str(amount.numerator)
    milli = amount * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return f"{int(amount * 10**9)}n"
