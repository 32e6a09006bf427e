"""A gang's ranks agree on the step they stop at, as a distributed trainer's ranks do.

On SIGTERM each rank of a gang spanning nodes tells rank 0, at the gang's rendezvous
(MASTER_ADDR, MASTER_PORT), the step it reached; once every rank has told it, rank 0 answers
each with the latest of those steps, and every rank computes up to that step before it
writes its checkpoint: a gang's checkpoints at its stop are all of one step, which the
scheduler checks before a resume reads them (docs/nodes.md, "Checkpoints"). A rank that
hears no answer within the wait stops at its own step; the scheduler then resumes from the
last step every node copied while the gang ran, or from the beginning. Standard library only.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Gang:
    rank: int
    nodes: int
    address: str  # rank 0's, where the gang meets
    port: int


class StopAgreement:
    """Rank 0 listens from the start, so that a rank stopped before it can tell it."""

    def __init__(self, gang: Gang, wait_s: float) -> None:
        self.gang, self.wait_s = gang, wait_s
        self._told: dict[socket.socket, int] = {}
        self._all_told = threading.Condition()
        self._listener: socket.socket | None = None

    def listen(self) -> None:
        if self.gang.rank != 0:
            return
        try:
            self._listener = socket.create_server(("", self.gang.port))
        except OSError as exc:  # the ranks will stop at their own steps
            print(f"fakegen: cannot listen on port {self.gang.port}: {exc}", file=sys.stderr)
            return
        threading.Thread(target=self._accept, daemon=True).start()

    def agree(self, step: int) -> int:
        """The step the gang stops at, given this rank's."""
        if self.gang.rank == 0:
            return self._answer(step)
        return self._ask(step)

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            conn, _ = self._listener.accept()
            conn.settimeout(self.wait_s)
            try:
                told = int(conn.makefile().readline().split()[1])  # "STOP <step>"
            except (OSError, ValueError, IndexError):
                conn.close()
                continue
            with self._all_told:
                self._told[conn] = told
                self._all_told.notify_all()

    def _answer(self, step: int) -> int:
        deadline = time.monotonic() + self.wait_s
        with self._all_told:
            while len(self._told) < self.gang.nodes - 1 and time.monotonic() < deadline:
                self._all_told.wait(max(0.0, deadline - time.monotonic()))
            agreed = max([step, *self._told.values()])
            for conn in self._told:
                with contextlib.suppress(OSError):  # else that rank stops at its own step
                    conn.sendall(f"AT {agreed}\n".encode())
                conn.close()
        return agreed

    def _ask(self, step: int) -> int:
        deadline = time.monotonic() + self.wait_s
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((self.gang.address, self.gang.port),
                                              timeout=deadline - time.monotonic()) as conn:
                    conn.sendall(f"STOP {step}\n".encode())
                    return int(conn.makefile().readline().split()[1])  # "AT <step>"
            except ConnectionRefusedError:
                time.sleep(0.1)  # rank 0 not listening yet
            except (OSError, ValueError, IndexError):
                break
        print(f"fakegen: no stop step agreed with rank 0; stopping at step {step}",
              file=sys.stderr)
        return step
