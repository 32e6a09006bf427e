"""Read the binary's stdout in a thread and keep its latest progress and checkpoint."""

from __future__ import annotations

import threading
import time
from typing import IO


class ProgressReader(threading.Thread):
    """Parses `PROGRESS <fraction>` and `CHECKPOINT <path>` lines (see docs/fakegen.md)."""

    def __init__(self, stream: IO[str]):
        super().__init__(daemon=True)
        self.stream = stream
        self.progress: float | None = None
        self._checkpoints = 0
        self._reported_checkpoints = 0
        self._lock = threading.Lock()
        self._last_line = time.monotonic()

    def silent_for(self) -> float:
        """Seconds since the binary last printed a line (the hang detector reads this)."""
        return time.monotonic() - self._last_line

    def run(self) -> None:
        for line in self.stream:
            self._last_line = time.monotonic()
            word, _, rest = line.strip().partition(" ")
            with self._lock:
                if word == "PROGRESS":
                    try:
                        self.progress = float(rest.split()[0])
                    except (ValueError, IndexError):
                        continue
                elif word == "CHECKPOINT":
                    self._checkpoints += 1

    def take_checkpointed(self) -> bool:
        """True once per batch of checkpoints seen since the last call."""
        with self._lock:
            new = self._checkpoints > self._reported_checkpoints
            self._reported_checkpoints = self._checkpoints
            return new
