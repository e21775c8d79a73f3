"""JSON log lines: one object per record, with the fields collectors expect."""

from __future__ import annotations

import io
import json
import logging

from kadmit.controller.logs import setup_logging


def test_records_are_json_lines_with_extras_and_errors() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        setup_logging("info", stream)
        log = logging.getLogger("kadmit.test")
        log.debug("hidden")
        log.info("admitted %s", "ns/wl", extra={"cluster_queue": "cq"})
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("failed")
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["msg"] for line in lines] == ["admitted ns/wl", "failed"]
    assert lines[0]["level"] == "info" and lines[0]["logger"] == "kadmit.test"
    assert lines[0]["cluster_queue"] == "cq" and lines[0]["ts"].endswith("Z")
    assert "ValueError: boom" in lines[1]["error"]
