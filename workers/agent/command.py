"""Build the binary's argv and environment from the configured template (pure)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from workers.agent.gpus import visible_devices

# What of the node worker's environment the binary inherits. The worker's own holds the
# service's secrets (DATABASE_URL, SECRET_KEY, broker and storage credentials), and the
# binary, which a tenant's params steer, may print them to the log its tenant reads; so it
# gets only what a process needs to run (locale, time zone, temp dir, where to find programs,
# libraries and Python packages) and what a GPU program reads for the driver, the devices
# and the fabric (CUDA_*, NVIDIA_*, NCCL_*: none carries a secret). Its GPUSCHED_* variables
# are the job's, set below; anything else an operator names in GPUSCHED_BINARY_ENV_PASS.
INHERITED = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_*", "TZ", "TMPDIR",
             "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "PYTHONUNBUFFERED", "VIRTUAL_ENV",
             "CUDA_*", "NVIDIA_*", "NCCL_*")


class UnsafeOutputPath(OSError):
    """The job's output would land outside its attempt's work directory: its input's fault,
    which the agent reports as bad input before it writes anything."""


@dataclass(frozen=True)
class AttemptPaths:
    work_dir: Path
    checkpoint_dir: Path
    output: Path
    params_file: Path
    stderr: Path  # the binary's streams, as the node keeps them (workers/agent/logs.py)
    stdout: Path

    rank: int = 0

    @classmethod
    def under(cls, root: Path, job_id: int, attempt_id: int, suffix: str,
              rank: int = 0) -> AttemptPaths:
        job_dir = root / f"job-{job_id}"
        # ranks beyond the first keep apart (nodes may share a file system, as in tests)
        own = f"-rank-{rank}" if rank else ""
        work = job_dir / f"attempt-{attempt_id}{own}"
        # the checkpoint outlives the attempt so that the next one resumes from it
        return cls(work_dir=work, checkpoint_dir=job_dir / f"checkpoint{own}",
                   output=work / f"output{suffix}", params_file=work / "params.json",
                   stderr=work / "stderr.log", stdout=work / "stdout.log", rank=rank)

    def check_output(self) -> None:
        """Raise UnsafeOutputPath unless the output is a file directly in the work dir: a
        suffix holding "/" or ".." would put it in another job's directory (intake refuses
        one; a job submitted before it did may still hold it)."""
        if self.output.parent != self.work_dir or self.output.name in ("", ".", ".."):
            raise UnsafeOutputPath(f"output path {str(self.output)!r} is not a file directly "
                                   f"in the work directory {str(self.work_dir)!r}")

    def create(self, params: dict) -> None:
        self.check_output()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        self.params_file.write_text(json.dumps(params, sort_keys=True))

    def remove(self, *, keep_checkpoint: bool) -> None:
        """Drop the attempt's files once reported; the checkpoint stays only for a resume."""
        shutil.rmtree(self.work_dir, ignore_errors=True)
        if not keep_checkpoint:  # the job's directory is rank 0's, the job's own node
            shutil.rmtree(self.checkpoint_dir if self.rank else self.checkpoint_dir.parent,
                          ignore_errors=True)


def build_argv(template: str, *, prompt: str, seed: int, paths: AttemptPaths) -> list[str]:
    """Split the template once, then fill each element: the prompt is never shell-parsed."""
    values = {"prompt": prompt, "seed": str(seed), "output": str(paths.output),
              "checkpoint_dir": str(paths.checkpoint_dir), "work_dir": str(paths.work_dir),
              "params_file": str(paths.params_file)}
    return [part.format_map(values) for part in shlex.split(template)]


def build_env(*, gpu_indices: tuple[int, ...], gpu_uuids: tuple[str, ...] = (),
              paths: AttemptPaths, attempt_id: int, job_id: int, node_rank: int = 0,
              nodes: tuple[str, ...] = (), rendezvous: tuple[str, int] = ("", 29500),
              retry: int = 0) -> dict[str, str]:
    env = inherited(os.environ, (*INHERITED, *settings.GPUSCHED_BINARY_ENV_PASS))
    env.update(visible_devices(gpu_indices, gpu_uuids))
    env.update(gang_env(node_rank, nodes, rendezvous))
    env.update({
        "GPUSCHED_JOB_ID": str(job_id),
        "GPUSCHED_ATTEMPT_ID": str(attempt_id),
        "GPUSCHED_RETRY": str(retry),
        "GPUSCHED_WORK_DIR": str(paths.work_dir),
        "GPUSCHED_CHECKPOINT_DIR": str(paths.checkpoint_dir),
        "GPUSCHED_OUTPUT_PATH": str(paths.output),
        "GPUSCHED_PARAMS_FILE": str(paths.params_file),
    })
    return env


def inherited(environ: Mapping[str, str], allowed: Sequence[str]) -> dict[str, str]:
    """The variables of `environ` that `allowed` names: each a name, or a prefix ending in
    "*" (a lone "*" is no prefix: it would pass the secrets the list keeps out)."""
    names = {a for a in allowed if not a.endswith("*")}
    prefixes = tuple(a[:-1] for a in allowed if a.endswith("*") and len(a) > 1)
    return {k: v for k, v in environ.items() if k in names or k.startswith(prefixes)}


def gang_env(node_rank: int, nodes: tuple[str, ...], rendezvous: tuple[str, int]
             ) -> dict[str, str]:
    """Where this node stands in its gang. A gang spanning nodes also gets the variables
    torchrun-style launchers read to meet: `rendezvous`, its first node's (address, port)."""
    env = {"GPUSCHED_NODE_RANK": str(node_rank), "GPUSCHED_NNODES": str(max(1, len(nodes))),
           "GPUSCHED_NODES": ",".join(nodes)}
    if len(nodes) > 1:
        address, port = rendezvous
        env.update(NODE_RANK=str(node_rank), NNODES=str(len(nodes)),
                   MASTER_ADDR=address or nodes[0], MASTER_PORT=str(port))
    return env
