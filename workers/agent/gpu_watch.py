"""Reads a node's GPUs in a thread of its own (each reading in a process of its own, see
`discovery.read_gpus_apart`), so that a driver call that hangs never stops the node's
heartbeats; a reading that does not come back in time counts against every GPU.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from workers.agent.discovery import ReadingInterrupted
from workers.agent.gpus import GpuReading, gpu_problem

Reader = Callable[[Sequence[str]], "list[GpuReading] | None"]


@dataclass(frozen=True)
class GpuReport:
    """What the last reading found, for the node's heartbeat to record."""

    problems: dict[str, str]  # uuid -> problem, "" when fit
    busy: dict[str, tuple[int, ...]] = field(default_factory=dict)  # uuid -> compute pids


class GpuWatch:
    def __init__(self, uuids: Sequence[str], read: Reader, *, every_s: float,
                 stale_after_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.uuids, self._read, self._every = list(uuids), read, every_s
        self._stale_after, self._clock = stale_after_s, clock
        self._lock = threading.Lock()
        self._report: GpuReport | None = None  # None until the first reading ends
        self._since = clock()  # when the last reading completed (or the watch began)
        self._stop = threading.Event()

    def start(self) -> GpuWatch:
        threading.Thread(target=self._loop, name="gpu-watch", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def read_once(self) -> None:
        try:
            readings, unusable = self._read(self.uuids), "NVML cannot be used"
        except ReadingInterrupted:  # the node is stopping: the last reading stands (and ages)
            return
        except Exception as exc:  # noqa: BLE001 - whatever the driver raises, the GPUs are suspect
            readings, unusable = None, f"NVML failed: {exc}"
        if readings is None:  # this node found its GPUs with NVML: losing it is a problem
            report = GpuReport(dict.fromkeys(self.uuids, unusable))
        else:
            report = GpuReport({r.uuid: gpu_problem(r) for r in readings},
                               {r.uuid: r.pids for r in readings if r.pids})
        with self._lock:
            self._report, self._since = report, self._clock()

    def report(self) -> GpuReport | None:
        """The last reading, or None when there is nothing to report yet."""
        with self._lock:
            late = self._clock() - self._since
            if late > self._stale_after:
                # a hung driver call: nothing on this node can vouch for its GPUs
                return GpuReport(dict.fromkeys(self.uuids,
                                               f"NVML has not answered for {late:.0f} s"))
            return self._report

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.read_once()
            self._stop.wait(self._every)
