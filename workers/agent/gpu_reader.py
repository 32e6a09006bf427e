"""The node's GPU readings, taken by one long-lived process of its own.

A reading in the agent's own process could hang it for good in a driver call, so each is
taken apart; a process started for every heartbeat's reading costs an interpreter's start
and NVML's initialisation each time (170 to 220 ms against 12 ms for the reading itself on
an H200 host, `bench/nvml_reading.py`). This one process answers reading after reading (0.1
ms there) and is replaced when it is late (killed, and not waited for: a process stuck in
the driver may not even die) or has ended. Its stderr goes to a file, which no reading can
wait on, and is read once it has ended.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from typing import IO

from workers.agent.discovery import CODE_ROOT, reading_failed, readings_from_json
from workers.agent.gpus import GpuReading

SERVE = [sys.executable, "-m", "workers.agent.discovery", "--serve"]


class GpuReader:
    """Call it with UUIDs for their readings (None where NVML cannot be used). Raises
    TimeoutError when the process does not answer in `timeout_s`, ReadingInterrupted when
    it was told to end, RuntimeError when it failed; the next call starts a fresh one.
    One caller at a time."""

    def __init__(self, *, timeout_s: float, argv: Sequence[str] = SERVE) -> None:
        self.timeout_s, self._argv = timeout_s, list(argv)
        self._proc: subprocess.Popen | None = None
        self._stderr: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def __call__(self, uuids: Sequence[str]) -> list[GpuReading] | None:
        proc = self._proc or self._start()
        try:
            proc.stdin.write(json.dumps(list(uuids)) + "\n")
            proc.stdin.flush()
        except BrokenPipeError:
            raise self._ended(proc) from None
        if not select.select([proc.stdout], [], [], self.timeout_s)[0]:
            self._abandon(proc)
            raise TimeoutError(f"no answer in {self.timeout_s:.0f} s")
        line = proc.stdout.readline()
        if not line:
            raise self._ended(proc)
        return readings_from_json(line)

    def close(self) -> None:
        if self._proc:
            self._abandon(self._proc)

    def _start(self) -> subprocess.Popen:
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed as its process ends
        self._proc = subprocess.Popen(self._argv, cwd=CODE_ROOT, text=True, bufsize=1,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=self._stderr)
        return self._proc

    def _ended(self, proc: subprocess.Popen) -> RuntimeError:
        self._proc = None
        try:
            returncode = proc.wait(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:  # its stdout closed, yet it lives on: be done with it
            self._abandon(proc)
            return RuntimeError("the reading process closed its output")
        return reading_failed(returncode, self._said())

    def _said(self) -> str:
        """The end of what the ended process wrote to stderr."""
        if self._stderr is None:
            return ""
        with self._stderr:
            self._stderr.seek(max(0, self._stderr.seek(0, 2) - 4000))
            return self._stderr.read().decode(errors="replace")

    def _abandon(self, proc: subprocess.Popen) -> None:
        self._proc = None
        if self._stderr is not None:
            self._stderr.close()
        proc.kill()
        threading.Thread(target=proc.wait, name="gpu-reader-reap", daemon=True).start()
