"""Structured logs: one JSON object a line, with the caller's fields as keys."""

import json
import logging

from gpusched.logs import JsonFormatter


def _record(**extra) -> logging.LogRecord:
    record = logging.LogRecord("jobs.transitions", logging.INFO, "x.py", 1,
                               "job %s: %s", (7, "QUEUED → SCHEDULED"), None)
    record.__dict__.update(extra)
    return record


def test_a_record_is_one_json_line_with_its_extra_fields():
    line = JsonFormatter().format(_record(job_id=7, to_state="SCHEDULED", attempt_id=None))
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["message"] == "job 7: QUEUED → SCHEDULED"
    assert (entry["level"], entry["logger"]) == ("INFO", "jobs.transitions")
    assert (entry["job_id"], entry["to_state"], entry["attempt_id"]) == (7, "SCHEDULED", None)
    assert entry["ts"].endswith("+00:00") and "args" not in entry and "msg" not in entry


def test_an_exception_travels_inside_the_line():
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("w", logging.ERROR, "x.py", 1, "failed", (), sys.exc_info())
    entry = json.loads(JsonFormatter().format(record))
    assert "ValueError: boom" in entry["exception"]


def test_values_json_cannot_hold_are_written_as_text():
    from datetime import datetime

    entry = json.loads(JsonFormatter().format(_record(at=datetime(2026, 1, 2))))
    assert entry["at"] == "2026-01-02 00:00:00"
