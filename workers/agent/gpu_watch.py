"""Reads a node's GPUs in a thread of its own, so that a driver call that hangs never stops
the node's heartbeats; a reading that does not come back in time counts against every GPU.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from workers.agent.gpus import GpuReading, gpu_problem

Reader = Callable[[Sequence[str]], "list[GpuReading] | None"]


class GpuWatch:
    def __init__(self, uuids: Sequence[str], read: Reader, *, every_s: float,
                 stale_after_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.uuids, self._read, self._every = list(uuids), read, every_s
        self._stale_after, self._clock = stale_after_s, clock
        self._lock = threading.Lock()
        self._problems: dict[str, str] | None = None  # None until the first reading ends
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
        except Exception as exc:  # noqa: BLE001 - whatever the driver raises, the GPUs are suspect
            readings, unusable = None, f"NVML failed: {exc}"
        if readings is None:  # this node found its GPUs with NVML: losing it is a problem
            problems = dict.fromkeys(self.uuids, unusable)
        else:
            problems = {r.uuid: gpu_problem(r) for r in readings}
        with self._lock:
            self._problems, self._since = problems, self._clock()

    def problems(self) -> dict[str, str] | None:
        """uuid -> problem ("" when fit), or None when there is nothing to report yet."""
        with self._lock:
            late = self._clock() - self._since
            if late > self._stale_after:
                # a hung driver call: nothing on this node can vouch for its GPUs
                return dict.fromkeys(self.uuids, f"NVML has not answered for {late:.0f} s")
            return None if self._problems is None else dict(self._problems)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.read_once()
            self._stop.wait(self._every)
