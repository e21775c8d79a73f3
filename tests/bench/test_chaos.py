"""bench/chaos.py's fuzz part, small: every answer judged, none a crash; and the judge itself."""

from __future__ import annotations

import base64
import json
from types import ModuleType

import pytest

from tests.bench.conftest import load_script


@pytest.fixture(scope="module")
def chaos() -> ModuleType:
    return load_script("chaos")


def test_the_judge_tells_answers_from_crashes(chaos: ModuleType) -> None:
    ok = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
          "response": {"uid": "u", "allowed": True, "patchType": "JSONPatch",
                       "patch": base64.b64encode(b"[]").decode()}}
    assert chaos.judge(200, json.dumps(ok).encode(), "u") is None
    assert chaos.judge(400, b"AdmissionReview.request.uid is missing", None) is None
    assert "uid" in chaos.judge(200, json.dumps(ok).encode(), "v")
    assert "HTTP 500" in chaos.judge(500, b"boom", "u")
    assert "without a message" in chaos.judge(400, b"", None)
    assert "unreadable" in chaos.judge(200, b"{", "u")


def test_a_small_fuzz_run_finds_no_crash(chaos: ModuleType) -> None:
    reviews = chaos.fuzz_reviews(150, seed=2)
    assert reviews["alive"] and reviews["crashes"] == [], reviews["crashes"]
    assert reviews["sent"] == 150
    assert reviews["outcomes"]["200"] > 0 and reviews["outcomes"]["400"] > 0  # both kinds reached
    quantities = chaos.fuzz_quantities(300)
    assert quantities["crashes"] == []
    assert quantities["outcomes"]["parsed"] and quantities["outcomes"]["refused"]
