"""The Configuration's ``resources`` block: what a pod asks quota for, beyond what it requests.

Kueue drops the resources named by ``excludeResourcePrefixes`` from a pod set's requests, then
applies ``transformations``: each maps an input resource to outputs, per unit of input (times
the amount of ``multiplyBy``, if the pod requests it), and keeps the input (``Retain``, the
default) or drops it (``Replace``). The outputs of all inputs are summed; a negative total (an
allowance) counts as zero. This is Kueue's ``dropExcludedResources`` and
``applyResourceTransformations`` (``pkg/workload/workload.go``), applied once, as a Workload is
read, so the quota tree sees only the resulting requests.

Amounts are in the engine's units (:func:`kadmit.engine.quantity.to_milli`); the arithmetic is
exact and each resulting amount is rounded up once, as Kueue rounds the sum of quantities.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

from kadmit.engine.quantity import MILLI

RETAIN = "Retain"
REPLACE = "Replace"
STRATEGIES = (RETAIN, REPLACE)


class ResourceTransformation:
    """One ``resources.transformations`` entry; ``outputs`` are exact amounts per unit of input."""

    __slots__ = ("input", "multiply_by", "outputs", "strategy")

    def __init__(
        self, input: str, outputs: Mapping[str, Fraction], strategy: str = RETAIN, multiply_by: str = ""
    ) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be Retain or Replace, not {strategy!r}")
        self.input = input
        self.outputs = dict(outputs)
        self.strategy = strategy
        self.multiply_by = multiply_by


class ResourceTransformations:
    """``excludeResourcePrefixes`` and ``transformations``, applied to one pod's requests."""

    __slots__ = ("by_input", "excluded_prefixes")

    def __init__(
        self, excluded_prefixes: Sequence[str] = (), transformations: Sequence[ResourceTransformation] = ()
    ) -> None:
        self.excluded_prefixes = tuple(excluded_prefixes)
        self.by_input: dict[str, ResourceTransformation] = {}
        for transformation in transformations:
            if transformation.input in self.by_input:
                raise ValueError(f"two transformations of {transformation.input}")
            self.by_input[transformation.input] = transformation

    def __bool__(self) -> bool:
        return bool(self.excluded_prefixes or self.by_input)

    def apply(self, requests: dict[str, int]) -> dict[str, int]:
        """What a pod asking for ``requests`` is charged."""
        prefixes = self.excluded_prefixes
        if prefixes:
            requests = {name: value for name, value in requests.items() if not name.startswith(prefixes)}
        by_input = self.by_input
        if not any(name in by_input for name in requests):
            return requests
        kept: dict[str, Fraction] = {}
        generated: dict[str, Fraction] = {}
        for name, value in requests.items():
            transformation = by_input.get(name)
            if transformation is None:
                kept[name] = Fraction(value, MILLI)
                continue
            base = Fraction(value, MILLI)
            factor_of = transformation.multiply_by
            if factor_of and factor_of in requests:
                base *= Fraction(requests[factor_of], MILLI)
            for output, per_unit in transformation.outputs.items():
                generated[output] = generated.get(output, Fraction(0)) + base * per_unit
            if transformation.strategy == RETAIN:
                kept[name] = Fraction(value, MILLI)
        for name, amount in generated.items():
            kept[name] = kept.get(name, Fraction(0)) + max(amount, Fraction(0))
        return {name: _units(name, amount) for name, amount in kept.items()}


def _units(resource: str, amount: Fraction) -> int:
    """An exact amount in the engine's units, rounded up as Kueue's ``ResourceValue``."""
    if resource == "cpu":
        return -(-amount.numerator * MILLI // amount.denominator)
    return -(-amount.numerator // amount.denominator) * MILLI
