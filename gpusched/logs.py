"""Structured logs: with LOG_FORMAT=json every record is one JSON object a line, carrying the
fields its caller passed in `extra` (job_id, attempt_id, node, ...) as keys of their own."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

# attributes every LogRecord has; anything else on a record came in through `extra`
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message",
                                                                                 "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        at = datetime.fromtimestamp(record.created, UTC)
        entry = {"ts": at.isoformat(timespec="milliseconds"), "level": record.levelname,
                 "logger": record.name, "message": record.getMessage()}
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)
