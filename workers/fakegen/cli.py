"""Entry point of ``gpusched-fakegen``: simulate a GPU job that follows the gpusched contract.

stdout carries only protocol lines (START, RESUME, PROGRESS, CHECKPOINT, OUTPUT), flushed
one by one so a supervisor reading the pipe sees them live; diagnostics go to stderr.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from types import FrameType

from workers.fakegen import checkpoint, video
from workers.fakegen.config import Settings, parse_settings
from workers.fakegen.stop_agreement import StopAgreement

EXIT_OK = 0
EXIT_CRASH = 1
EXIT_USAGE = 2  # raised by argparse itself
EXIT_PREEMPTED = 75  # EX_TEMPFAIL: checkpoint written on SIGTERM, rerun resumes
EXIT_OOM = 137  # what a shell reports for a SIGKILL, i.e. how an OOM kill looks
EXIT_SIGTERM_LOST = 143  # SIGTERM without a checkpoint dir: progress is lost

# what a real binary's libraries sometimes print: bytes that are not UTF-8, a NUL among them
NOISE = b"\xff\xfe\x00 \x80\xc3(\x00\r\n"

OOM_MESSAGE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB "
    "(GPU 0; 79.15 GiB total capacity; 77.02 GiB already allocated; 1.31 GiB free; "
    "77.90 GiB reserved in total by PyTorch)"
)


class Preempted(Exception):
    """Raised from the SIGTERM handler so the compute loop unwinds at once."""


class SimulatedCrash(RuntimeError):
    """The deliberate failure of ``--fail crash``."""


def emit(line: str) -> None:
    # One write call, so a signal can never leave half a line in the buffer.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _noise(stream) -> None:
    stream.flush()
    stream.buffer.write(NOISE)
    stream.buffer.flush()


class Runner:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.steps = settings.steps
        self.step = 0
        # Only the compute phase is interruptible; once output is being written, finishing
        # is cheaper than redoing the whole job, so a late SIGTERM is ignored.
        self.interruptible = True
        self.agreement = StopAgreement(settings.gang, settings.stop_wait_s) if (
            settings.gang and settings.checkpoint_dir) else None

    def run(self) -> int:
        cuda = os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")
        if self.settings.noise:
            _noise(sys.stderr)
        emit(f"START CUDA_VISIBLE_DEVICES={cuda} steps={self.steps} pid={os.getpid()}")
        # Resume before handling SIGTERM: an early SIGTERM must not overwrite a good
        # checkpoint with step 0 (until then it simply kills us, leaving the file intact).
        self.step = self._resume_step()
        if self.agreement is not None:
            self.agreement.listen()
        signal.signal(signal.SIGTERM, self._on_sigterm)
        try:
            self._compute()
        except Preempted:
            return self._checkpoint_and_exit()
        except SimulatedCrash:
            traceback.print_exc()
            return EXIT_CRASH
        self.interruptible = False
        return self._finish()

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        if self.interruptible:
            self.interruptible = False
            raise Preempted

    def _resume_step(self) -> int:
        directory = self.settings.checkpoint_dir
        if directory is None:
            return 0
        step = checkpoint.load(directory, self.settings.fingerprint, self.steps)
        if step is None:
            return 0
        emit(f"RESUME {step}")
        return step

    def _compute(self) -> None:
        s = self.settings
        step_seconds = s.run_seconds / self.steps
        started = time.monotonic()
        # at whole multiples of the steps the interval spans, as a distributed trainer
        # checkpoints every N steps: a gang's ranks checkpoint the same steps
        every = max(1, round(s.checkpoint_every / step_seconds)) if s.checkpoint_every else 0
        first = self.step
        self._progress()
        while True:
            self._maybe_fail()
            if self.step >= self.steps:
                return
            # Absolute deadlines keep the total run time accurate despite print/sleep jitter.
            deadline = started + (self.step - first + 1) * step_seconds
            time.sleep(max(0.0, deadline - time.monotonic()))
            self.step += 1
            self._progress()
            if every and s.checkpoint_dir and self.step % every == 0 and self.step < self.steps:
                self._save_checkpoint()

    def _progress(self) -> None:
        if self.settings.noise:
            _noise(sys.stdout)
        emit(f"PROGRESS {self.step / self.steps:.4f} step={self.step}/{self.steps}")

    def _maybe_fail(self) -> None:
        mode = self.settings.fail
        if mode in ("none", "corrupt") or self.step / self.steps < self.settings.fail_at:
            return
        where = f"step {self.step}/{self.steps}"
        if mode == "crash":
            raise SimulatedCrash(f"simulated crash at {where}")
        if mode == "oom":
            print(OOM_MESSAGE, file=sys.stderr, flush=True)
            sys.stdout.flush()
            os._exit(EXIT_OOM)  # no cleanup, like a process the kernel killed
        self._hang(where)

    def _hang(self, where: str) -> None:
        print(f"fakegen: simulating hang at {where}", file=sys.stderr, flush=True)
        # A hung GPU process cannot checkpoint: SIGTERM kills it outright (returncode -15).
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        while True:
            time.sleep(3600)

    def _save_checkpoint(self) -> None:
        assert self.settings.checkpoint_dir is not None
        state = checkpoint.Checkpoint(self.step, self.steps, self.settings.fingerprint)
        path = checkpoint.save(self.settings.checkpoint_dir, state)
        emit(f"CHECKPOINT {path} step={self.step}")

    def _checkpoint_and_exit(self) -> int:
        # A second SIGTERM must not interrupt the checkpoint write.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if self.settings.checkpoint_dir is None:
            print("fakegen: SIGTERM without --checkpoint-dir; progress lost", file=sys.stderr)
            return EXIT_SIGTERM_LOST
        if self.agreement is not None:
            self._compute_up_to(self.agreement.agree(self.step))
        self._save_checkpoint()
        return EXIT_PREEMPTED

    def _compute_up_to(self, step: int) -> None:
        """A rank behind the gang's stop step computes the steps it lacks."""
        left = max(0, min(step, self.steps) - self.step)
        time.sleep(left * self.settings.run_seconds / self.steps)
        self.step += left

    def _finish(self) -> int:
        s = self.settings
        data = video.render_y4m(s.prompt, s.seed, s.width, s.height, s.fps, s.frames)
        if s.fail == "corrupt":
            frame_bytes = s.width * s.height * 3 // 2
            data = data[: len(data) - frame_bytes // 2]  # cut the last frame in half
        video.write_atomic(s.output, data)
        if s.checkpoint_dir is not None:
            checkpoint.remove(s.checkpoint_dir)
        emit(f"OUTPUT {s.output}")
        return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the fake generator; returns the process exit status (see docs/fakegen.md)."""
    settings = parse_settings(list(argv) if argv is not None else None, os.environ)
    try:
        return Runner(settings).run()
    except Exception:  # noqa: BLE001 - any unexpected error is a generic crash (exit 1)
        traceback.print_exc()
        return EXIT_CRASH
