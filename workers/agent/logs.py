"""Keep what the binary prints and publish it for its organization to read while it runs.

Each stream is read from its pipe and kept in a `BoundedCopy` on the node: stdout by the
progress reader, which parses it too, stderr by a `StderrReader` (its end is also what the
attempt reports). The `LogPublisher` copies the last GPUSCHED_LOG_MAX_BYTES of each to
storage every GPUSCHED_LOG_PUBLISH_S and once at the end, so a two-day training run is
followed as it goes and a crash is read whole. A failure to keep or publish a log never
touches the attempt."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import IO

from django.conf import settings

from workers.agent.progress import MAX_LINE
from workers.services.logs import log_kept, log_name, log_store, logs_delete

log = logging.getLogger(__name__)


def last_lines(data: bytes, cap: int) -> bytes:
    """The whole lines of the last `cap` bytes of `data`, under a note that earlier ones went."""
    data = data[-cap:]
    return (f"[gpusched: earlier lines dropped; a log keeps its last {cap} bytes]\n".encode()
            + data[data.find(b"\n") + 1:])


class BoundedCopy:
    """A stream of the binary, line by line, in a file of at most about twice the log's cap:
    past that its oldest half goes, so a chatty binary cannot fill the node's disk."""

    def __init__(self, path: Path, cap: int):
        self.path, self.cap = path, cap
        self._fh = path.open("ab")
        self._size = self._fh.tell()
        self.failed = False

    def write(self, line: str) -> None:
        if self.failed:
            return
        try:
            data = line.encode()
            self._fh.write(data)
            self._fh.flush()
            self._size += len(data)
            if self._size > 2 * self.cap:
                self._keep_last()
        except (OSError, ValueError):  # a full disk, or a line after close: the log is lost,
            self.failed = True
            log.exception("keeping the binary's output in %s", self.path)  # not the job

    def _keep_last(self) -> None:
        self._fh.close()
        data = last_lines(self.path.read_bytes(), self.cap)
        self.path.write_bytes(data)
        self._fh = self.path.open("ab")
        self._size = len(data)

    def close(self) -> None:
        self._fh.close()


class StderrReader(threading.Thread):
    """Copies the binary's stderr to its bounded file as it comes, MAX_LINE at most at once."""

    def __init__(self, stream: IO[str], copy: BoundedCopy):
        super().__init__(daemon=True)
        self.stream, self.copy = stream, copy

    def run(self) -> None:
        for line in iter(lambda: self.stream.readline(MAX_LINE), ""):
            self.copy.write(line)


class LogPublisher:
    """Copies an attempt's (one rank's) stdout and stderr to storage when they have grown."""

    def __init__(self, *, job_id: int, attempt_id: int, rank: int,
                 files: dict[str, Path]):
        self.job_id, self.attempt_id, self.rank, self.files = job_id, attempt_id, rank, files
        self.cap = settings.GPUSCHED_LOG_MAX_BYTES
        self._seen: dict[str, tuple[int, int]] = {}
        self._next_at = time.monotonic() + settings.GPUSCHED_LOG_PUBLISH_S
        self._kept = False

    def due(self) -> None:
        """Publish if the interval is over (called on every heartbeat)."""
        if time.monotonic() >= self._next_at:
            self.publish()

    def publish(self) -> None:
        self._next_at = time.monotonic() + settings.GPUSCHED_LOG_PUBLISH_S
        for stream, path in self.files.items():
            try:
                self._publish(stream, path)
            except Exception:  # storage down: the next round, or the end, tries again
                log.exception("publishing the %s of attempt %s", stream, self.attempt_id)

    def _publish(self, stream: str, path: Path) -> None:
        try:
            stat = path.stat()
        except FileNotFoundError:
            return
        seen = (stat.st_size, stat.st_mtime_ns)
        if stat.st_size == 0 or self._seen.get(stream) == seen:
            return
        with path.open("rb") as fh:
            fh.seek(max(0, stat.st_size - self.cap))
            data = fh.read(self.cap)
        if stat.st_size > self.cap:
            data = last_lines(data, self.cap)
        name = log_name(self.job_id, self.attempt_id, self.rank, stream)
        log_store(name, data)
        self._seen[stream] = seen
        # every time: a job erased as it ended (a gang's last rank, a lost node back) keeps
        # no log, and this publish may come after the erasure deleted the others
        if not log_kept(self.attempt_id, first=not self._kept):
            logs_delete([name])
            self.files = {}  # nothing more is published
        self._kept = True
