"""Kubernetes quantities, parsed exactly into integer milli-units.

Kueue reads CPU with ``MilliValue()`` and every other resource with ``Value()`` (rounded up to
a whole unit), then sums 64-bit integers. We do the same with Python integers, scaled by 1000
so that one representation serves every resource: sums and comparisons are exact and cheap,
and no float ever touches quota. kubernetes-asyncio ships no quantity parser, hence this module.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

MILLI = 1000

_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$"
)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_BINARY_RESOURCES = ("memory", "ephemeral-storage")


class QuantityError(ValueError):
    """Text that is not a Kubernetes quantity."""


def parse_exact(value: object) -> Fraction:
    """The exact value of a quantity given as YAML gives it: a string, an int, or a float such
    as ``cpu: 0.5`` (read from its shortest decimal form, i.e. what was written, never from its
    binary approximation)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"{value!r} is not a quantity")
        return Fraction(repr(value))
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f"{text!r} is not a quantity")
    number = Fraction(match["number"])
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        number *= _BINARY[suffix]
    elif suffix in _DECIMAL:
        number *= _DECIMAL[suffix]
    else:
        number *= Fraction(10) ** int(suffix[1:])
    return -number if match["sign"] == "-" else number


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def to_milli(resource: str, value: object) -> int:
    """Milli-units of ``value`` as Kueue counts ``resource``: CPU to the milli, others whole."""
    exact = parse_exact(value)
    if resource == "cpu":
        return _ceil(exact * MILLI)
    return _ceil(exact) * MILLI


def is_binary_resource(resource: str) -> bool:
    return resource in _BINARY_RESOURCES or resource.startswith("hugepages-")


@lru_cache(maxsize=4096)
def format_milli(resource: str, milli: int) -> str:
    """The canonical text Kubernetes prints for a quantity Kueue builds for ``resource``."""
    if resource == "cpu":
        if milli % MILLI == 0:
            return _with_suffix(milli // MILLI, 1000, ("", "k", "M", "G", "T", "P", "E"))
        return f"{milli}m"
    units = milli // MILLI
    if is_binary_resource(resource):
        return _with_suffix(units, 1024, ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))
    return _with_suffix(units, 1000, ("", "k", "M", "G", "T", "P", "E"))


def _with_suffix(units: int, base: int, suffixes: tuple[str, ...]) -> str:
    if units == 0:
        return "0"
    index = 0
    while index + 1 < len(suffixes) and units % base == 0:
        units //= base
        index += 1
    return f"{units}{suffixes[index]}"
