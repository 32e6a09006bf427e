"""Read the binary's stdout in a thread and keep its latest progress and checkpoint."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import IO

log = logging.getLogger(__name__)
MAX_LINE = 64 * 1024  # characters of a line read at once; a longer one comes in pieces
MAX_STEP_DIGITS = 18  # a step of more is no step: it would not fit the database's bigint


class ProgressReader(threading.Thread):
    """Parses `PROGRESS <fraction>` and `CHECKPOINT <path> [step=<n>]` lines (see
    docs/fakegen.md); `on_checkpoint` hears each checkpoint's step (None if it has none) as
    its line is read, `copy` every line."""

    def __init__(self, stream: IO[str],
                 on_checkpoint: Callable[[int | None], None] | None = None,
                 copy: Callable[[str], None] | None = None):
        super().__init__(daemon=True)
        self.stream, self.on_checkpoint, self.copy = stream, on_checkpoint, copy
        self.progress: float | None = None
        self._checkpoints = 0
        self._reported_checkpoints = 0
        self._last_step: int | None = None
        self._lock = threading.Lock()
        self._last_line = time.monotonic()
        self._failed = False  # a line could not be read: logged once

    def silent_for(self) -> float:
        """Seconds since the binary last printed a line (the hang detector reads this)."""
        return time.monotonic() - self._last_line

    def run(self) -> None:
        # a line at most MAX_LINE characters at a time: a binary that prints without a
        # newline must not grow the worker without bound
        for line in iter(lambda: self.stream.readline(MAX_LINE), ""):
            self._last_line = time.monotonic()
            try:
                self._read(line)
            except Exception:  # a line it cannot read must not stop the reading: the
                if not self._failed:  # binary would block on a full pipe, killed as hung
                    log.exception("a line of the binary's stdout could not be read: %r",
                                  line[:200])
                self._failed = True

    def _read(self, line: str) -> None:
        if self.copy is not None:  # the log (workers/agent/logs.py), which never raises
            self.copy(line)
        word, _, rest = line.strip().partition(" ")
        with self._lock:
            if word == "PROGRESS":
                self.progress = progress_fraction(rest, self.progress)
            elif word == "CHECKPOINT":
                self._checkpoints += 1
                self._last_step = checkpoint_step(rest)
        if word == "CHECKPOINT":
            self._hear(self._last_step)

    def _hear(self, step: int | None) -> None:
        """A listener's failure must not stop the reading: the binary would look hung."""
        listener = self.on_checkpoint
        if listener is None:
            return
        try:
            listener(step)
        except Exception:
            log.exception("a checkpoint's listener failed")

    def checkpoints_heard(self) -> int:
        with self._lock:
            return self._checkpoints

    def step_since(self, heard: int) -> int | None:
        """The step of the latest checkpoint, if one was announced after the first `heard`
        (the one a binary writes as it stops, for `heard` counted when it was asked to)."""
        with self._lock:
            return self._last_step if self._checkpoints > heard else None

    def take_checkpointed(self) -> bool:
        """True once per batch of checkpoints seen since the last call."""
        with self._lock:
            new = self._checkpoints > self._reported_checkpoints
            self._reported_checkpoints = self._checkpoints
            return new


def progress_fraction(rest: str, last: float | None) -> float | None:
    """The fraction of a `PROGRESS <fraction> ...` line (`rest`: what follows the word), or
    `last` for one that holds none: "nan" or "inf" would pass float() and be reported."""
    try:
        fraction = float(rest.split()[0])
    except (ValueError, IndexError):
        return last
    return fraction if math.isfinite(fraction) else last


def checkpoint_step(rest: str) -> int | None:
    """The step of a `CHECKPOINT <path> step=<n>` line (`rest`: what follows the word).
    isdigit() alone passes "²", which int() refuses; MAX_STEP_DIGITS keeps it in a bigint."""
    last = rest.rsplit(" ", 1)[-1]
    digits = last[5:]
    if not last.startswith("step=") or not (digits.isascii() and digits.isdecimal()) or len(
            digits) > MAX_STEP_DIGITS:
        return None
    return int(digits)
