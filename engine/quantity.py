"""Kubernetes quantities, parsed exactly, in time linear in the text, into integer units.

Kueue reads CPU with ``MilliValue()`` and every other resource with ``Value()`` (rounded up to
a whole unit), then sums 64-bit integers. We do the same with Python integers, scaled by 1000
so that one representation serves every resource: sums and comparisons are exact and cheap,
and no float ever touches quota. kubernetes-asyncio ships no quantity parser, hence this module,
the one place in kadmit (the local cluster aside) that reads a quantity.

The limits are apimachinery's ``resource.Quantity`` (``pkg/api/resource``):

* a quantity holds nano-units at most: ``ParseQuantity`` rounds a finer value up (away from
  zero) to the next nano, so ``1e-20`` is ``1n``;
* no quantity may exceed 2^63-1 in magnitude (``maxAllowed``, math.go). Go caps binary-suffixed
  values there and lets decimal ones overflow ``Value()``; we refuse both, naming the value;
* a decimal exponent is an ``int32`` (``suffixer.interpret`` truncates the parsed exponent to
  ``int32``, the width of ``inf.Dec``'s scale); we refuse a wider one instead of wrapping it.

Only those bounds make parsing cheap: the digits are scanned once, and at most ~90 of them are
ever turned into an integer, so neither ``1e2147483647`` nor a megabyte of zeros is slow.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from functools import lru_cache

MILLI = 1000
NANO = 10**9
MAX_QUANTITY = 2**63 - 1
"""The largest magnitude a quantity may have (apimachinery's ``maxAllowed``)."""
MAX_EXPONENT = 2**31 - 1
MIN_EXPONENT = -(2**31)

_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?:(?P<whole>[0-9]+)(?:\.(?P<fraction>[0-9]*))?|\.(?P<only_fraction>[0-9]+))"
    r"(?P<suffix>[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
_BINARY_SHIFT = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXPONENT = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_MAX_NANO = MAX_QUANTITY * NANO
_MAX_DIGITS = len(str(MAX_QUANTITY))  # 19: a value of 20 digits or more is out of range
_SUB_NANO_DIGITS = 60
"""Digits kept below the nano: enough to round exactly after a binary suffix (at most 2^60 < 10^60)."""
_POWERS_OF_TEN: tuple[int, ...] = tuple(10**n for n in range(_SUB_NANO_DIGITS + 1))
_BINARY_RESOURCES = ("memory", "ephemeral-storage")
_SHORT = 64
"""Texts up to this long are shown whole in errors, and cached."""


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity, or one beyond a quantity's limits."""


def _shown(text: str) -> str:
    """``text`` quoted for an error message, cut short if it is long."""
    if len(text) <= _SHORT:
        return repr(text)
    return f"{text[: _SHORT // 2]!r}... ({len(text)} characters)"


def to_nano(value: object) -> int:
    """The quantity in nano-units, as ``ParseQuantity`` holds it (a finer value rounded up, away
    from zero), given as YAML gives it: a string, an int, or a float such as ``cpu: 0.5`` (read
    from its shortest decimal form, i.e. what was written, never from its binary approximation)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        shown = repr(value)
        raise QuantityError(f"{shown if len(shown) <= _SHORT else _shown(shown)} is not a quantity")
    if isinstance(value, int):
        if abs(value) > MAX_QUANTITY:  # checked before printing: str() of a huge int is slow
            raise QuantityError(
                f"an integer of {value.bit_length()} bits is out of range: a quantity may be at most "
                f"2^63-1 ({MAX_QUANTITY}) in magnitude"
            )
        return value * NANO
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a quantity")
        return _parse_short(repr(value))
    text = value.strip()
    return _parse_short(text) if len(text) <= _SHORT else _parse_text(text)


@lru_cache(maxsize=4096)
def _parse_short(text: str) -> int:
    """Cached, for short texts only: a cluster's pods and queues repeat a handful of values
    (``1``, ``500m``, ``4Gi``), and a long one must not be kept."""
    return _parse_text(text)


def _parse_text(text: str) -> int:
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise QuantityError(f"{_shown(text)} is not a quantity")
    fraction = match["fraction"] or match["only_fraction"] or ""
    suffix = match["suffix"] or ""
    shift = _BINARY_SHIFT.get(suffix, 0)
    if suffix in _DECIMAL_EXPONENT:
        exponent = _DECIMAL_EXPONENT[suffix]
    elif shift:
        exponent = 0
    else:
        written = suffix[1:].lstrip("+-").lstrip("0") or "0"
        # Too many digits to be an int32: refused before int() would read them all.
        exponent = int(written) if len(written) <= len(str(MAX_EXPONENT)) else MAX_EXPONENT + 1
        exponent = -exponent if suffix[1] == "-" else exponent
        if not MIN_EXPONENT <= exponent <= MAX_EXPONENT:
            raise QuantityError(f"{_shown(text)} is out of range: the exponent must fit in 32 bits")
    # value = 0.digits x 10^point x 2^shift, digits without leading zeros
    digits = ((match["whole"] or "") + fraction).lstrip("0")
    significant = digits.rstrip("0")
    if not significant:
        return 0
    point = len(digits) - len(fraction) + exponent
    if point > _MAX_DIGITS:
        raise _too_large(text)
    nanos = _nanos(significant, point + 9, shift)
    if nanos > _MAX_NANO:
        raise _too_large(text)
    return -nanos if match["sign"] == "-" else nanos


def _nanos(significant: str, above: int, shift: int) -> int:
    """ceil(0.significant x 10^above x 2^shift): nano-units of a value whose first ``above`` digits
    stand above the nano (``above`` at most 28, as the value is below 10^19)."""
    if above >= len(significant):
        return int(significant) * _POWERS_OF_TEN[above - len(significant)] << shift
    # Below the nano: keep enough digits to round exactly; the rest only says "not zero".
    kept = significant[: max(0, above + _SUB_NANO_DIGITS)]
    if not kept:  # far below a nano, even after a binary suffix
        return 1
    quotient, remainder = divmod(int(kept) << shift, _POWERS_OF_TEN[len(kept) - above])
    # If the kept part is not a whole nano, the dropped digits (< 2^shift / 10^below, less than
    # its distance to the next nano) cannot carry it further; if it is, they round it up.
    return quotient + (1 if remainder or len(kept) < len(significant) else 0)


def _too_large(text: str) -> QuantityError:
    return QuantityError(
        f"{_shown(text)} is out of range: a quantity may be at most 2^63-1 ({MAX_QUANTITY}) in magnitude"
    )


def parse_exact(value: object) -> Fraction:
    """The exact value of a quantity, to the nano as Kubernetes holds it (see :func:`to_nano`)."""
    return Fraction(to_nano(value), NANO)


def resource_value(resource: str, value: object) -> int:
    """Kueue's ``resources.ResourceValue``: ``MilliValue()`` for CPU, ``Value()`` for the rest
    (both rounded up)."""
    nanos = to_nano(value)
    return -(-nanos // (NANO // MILLI if resource == "cpu" else NANO))


def to_milli(resource: str, value: object) -> int:
    """Milli-units of ``value`` as Kueue counts ``resource``: CPU to the milli, others whole."""
    units = resource_value(resource, value)
    return units if resource == "cpu" else units * MILLI


def effective_pod_amounts(
    containers: Iterable[Mapping[str, int]],
    init_containers: Iterable[tuple[Mapping[str, int], bool]],
    overhead: Mapping[str, int],
) -> dict[str, int]:
    """What a pod needs of each resource, as Kubernetes' ``PodRequests`` (or ``PodLimits``) sums
    amounts already read, in any one unit. ``init_containers`` pair each one's amounts with
    whether it is a sidecar (``restartPolicy: Always``).

    The app containers run together with every sidecar; each plain init container runs alone
    beside the sidecars started before it; the pod needs the larger of the two, plus overhead.
    """
    totals: dict[str, int] = {}
    for amounts in containers:
        for name, value in amounts.items():
            totals[name] = totals.get(name, 0) + value
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for amounts, is_sidecar in init_containers:
        for name, value in amounts.items():
            if is_sidecar:
                sidecars[name] = sidecars.get(name, 0) + value
            else:
                init_peak[name] = max(init_peak.get(name, 0), value + sidecars.get(name, 0))
    for name, value in sidecars.items():
        totals[name] = totals.get(name, 0) + value
    for name, value in init_peak.items():
        totals[name] = max(totals.get(name, 0), value)
    for name, value in overhead.items():
        totals[name] = totals.get(name, 0) + value
    return totals


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


def format_nano(nano: int) -> str:
    """The canonical text Kubernetes prints for a decimal quantity of ``nano`` nano-units (the
    largest suffix that keeps it exact: ``1500m``, ``2``, ``353553390n``)."""
    if nano % NANO == 0:
        return _with_suffix(nano // NANO, 1000, ("", "k", "M", "G", "T", "P", "E"))
    for suffix, step in (("m", 10**6), ("u", 10**3)):
        if nano % step == 0:
            return f"{nano // step}{suffix}"
    return f"{nano}n"
