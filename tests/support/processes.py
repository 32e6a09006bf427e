"""Start the product's real processes (beat, scheduler worker, node workers) for a test."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def child_env(**extra: str) -> dict[str, str]:
    """The test's own database (pytest-django renamed it), broker and storage, for child
    processes."""
    db = settings.DATABASES["default"]
    env = dict(os.environ)
    if connection.vendor == "postgresql":
        env["DATABASE_URL"] = (f"postgres://{db['USER']}:{db['PASSWORD']}@{db['HOST'] or ''}"
                               f":{db['PORT'] or 5432}/{db['NAME']}")
    else:
        env["DATABASE_URL"] = f"sqlite:///{db['NAME']}"
    env["GPUSCHED_MEDIA_ROOT"] = str(settings.MEDIA_ROOT)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def wait_for(predicate: Callable[[], bool], timeout: float, what: str, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def binaries_under(root: Path) -> list[str]:
    """Command lines of live fake-binary processes whose argv names a path under `root`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(root) in text and "fakegen" in text:
            found.append(text)
    return found


class ProcessGroup:
    def __init__(self, **env: str) -> None:
        self.env = env  # given to every child process
        self.procs: list[tuple[str, subprocess.Popen, Path]] = []
        self.log_dir = Path(settings.VAR_DIR) / "test-logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        # job ids restart with every test database: give each test its own work root
        self.work_root = Path(tempfile.mkdtemp(prefix="work-", dir=settings.VAR_DIR))

    def start(self, name: str, argv: list[str], **env: str) -> subprocess.Popen:
        log = self.log_dir / f"{name}-{uuid.uuid4().hex[:6]}.log"
        with log.open("wb") as out:
            env = {"GPUSCHED_WORK_ROOT": str(self.work_root), **self.env, **env}
            proc = subprocess.Popen(argv, cwd=ROOT, env=child_env(**env), stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((name, proc, log))
        return proc

    def manage(self, name: str, *args: str, **env: str) -> subprocess.Popen:
        return self.start(name, [sys.executable, "manage.py", *args], **env)

    def celery(self, name: str, *args: str, **env: str) -> subprocess.Popen:
        return self.start(name, [sys.executable, "-m", "celery", "-A", "gpusched", *args], **env)

    def scheduler(self) -> None:
        """Beat (the 1 s tick) and the worker that runs ticks, as in production."""
        self.celery("beat", "beat", "--loglevel=INFO")
        self.celery("scheduler", "worker", "-Q", "scheduler,default", "-c", "1",
                    "--hostname=scheduler@%h", "--without-gossip", "--without-mingle")

    def node(self, name: str, gpus: int, gpu_type: str = "H100", island: str = "",
             **env: str) -> subprocess.Popen:
        # every node runs on this host: a gang's ranks meet at its loopback address, whatever
        # the host's name resolves to
        return self.manage(f"node-{name}", "gpu_node", "--name", name, "--gpus", str(gpus),
                           "--gpu-type", gpu_type, "--island", island, "--address", "127.0.0.1",
                           **env)

    def kill(self, proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        proc.wait(timeout=30)

    def log_of(self, name: str) -> str:
        """What the process started as `name` wrote so far (stdout and stderr, in order)."""
        return next(log for n, _, log in self.procs if n == name).read_text(errors="replace")

    def logs(self) -> str:
        return "\n".join(f"--- {n} ---\n{log.read_text(errors='replace')[-3000:]}"
                         for n, _, log in self.procs)

    def stop_all(self) -> None:
        for _, proc, _ in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for _, proc, _ in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill(proc)
        shutil.rmtree(self.work_root, ignore_errors=True)
