"""Read the binary's stdout in a thread and keep its latest progress and checkpoint."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import IO

log = logging.getLogger(__name__)
MAX_LINE = 64 * 1024  # characters of a line read at once; a longer one comes in pieces


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

    def silent_for(self) -> float:
        """Seconds since the binary last printed a line (the hang detector reads this)."""
        return time.monotonic() - self._last_line

    def run(self) -> None:
        # a line at most MAX_LINE characters at a time: a binary that prints without a
        # newline must not grow the worker without bound
        for line in iter(lambda: self.stream.readline(MAX_LINE), ""):
            self._last_line = time.monotonic()
            if self.copy is not None:  # the log (workers/agent/logs.py), which never raises
                self.copy(line)
            word, _, rest = line.strip().partition(" ")
            with self._lock:
                if word == "PROGRESS":
                    try:
                        self.progress = float(rest.split()[0])
                    except (ValueError, IndexError):
                        continue
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


def checkpoint_step(rest: str) -> int | None:
    """The step of a `CHECKPOINT <path> step=<n>` line (`rest`: what follows the word)."""
    last = rest.rsplit(" ", 1)[-1]
    if not last.startswith("step=") or not last[5:].isdigit():
        return None
    return int(last[5:])
