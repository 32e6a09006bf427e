"""A time-ordered event queue; at equal times, kinds run in ORDER (ends before rounds)."""

from __future__ import annotations

import heapq
import itertools
from typing import Any

ORDER = {"stop": 0, "end": 0, "crash": 1, "fail": 1, "maintenance": 1, "repair": 2, "retry": 3,
         "arrival": 3, "round": 9}


class EventQueue:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, str, Any]] = []
        self._seq = itertools.count()

    def push(self, t: float, kind: str, payload: Any = None) -> None:
        heapq.heappush(self._heap, (t, ORDER[kind], next(self._seq), kind, payload))

    def pop(self) -> tuple[float, str, Any]:
        t, _, _, kind, payload = heapq.heappop(self._heap)
        return t, kind, payload

    def peek_time(self) -> float:
        return self._heap[0][0]

    def __bool__(self) -> bool:
        return bool(self._heap)
