"""Checkpoint file: how far the fake computation got, so a preempted run can resume."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

CHECKPOINT_NAME = "fakegen-checkpoint.json"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Checkpoint:
    step: int
    steps: int
    # Identifies the job (prompt, seed, video shape); a checkpoint from another job is ignored.
    fingerprint: str


def checkpoint_path(directory: Path) -> Path:
    return directory / CHECKPOINT_NAME


def save(directory: Path, checkpoint: Checkpoint) -> Path:
    """Atomically write the checkpoint and return its path.

    Atomic because SIGTERM may be followed by SIGKILL at any moment: a half-written
    checkpoint must never replace a good one.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = checkpoint_path(directory)
    tmp = path.with_name(f".{path.name}.tmp")
    payload = {"version": FORMAT_VERSION, **checkpoint.__dict__}
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(payload, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return path


def load(directory: Path, fingerprint: str, steps: int) -> int | None:
    """Return the step to resume from, or None if there is no usable checkpoint.

    If the step count changed (e.g. a different run time), the saved step is rescaled so the
    same fraction of work counts as done.
    """
    try:
        data = json.loads(checkpoint_path(directory).read_text(encoding="utf-8"))
        saved = Checkpoint(int(data["step"]), int(data["steps"]), str(data["fingerprint"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if data.get("version") != FORMAT_VERSION or saved.fingerprint != fingerprint:
        return None
    if saved.steps <= 0 or not 0 <= saved.step <= saved.steps:
        return None
    return saved.step * steps // saved.steps


def remove(directory: Path) -> None:
    checkpoint_path(directory).unlink(missing_ok=True)
