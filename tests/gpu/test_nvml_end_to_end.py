"""On a host with an NVIDIA GPU: the whole path, from discovery to the binary's view.

A node started with `gpu_node --nvml` registers what NVML found; jobs that ask for that GPU
type are scheduled, started and finished there; their binary (tests/gpu/cuda_probe.py, then
the fake generator) records which devices the CUDA driver showed it, and on request leaves a
process holding its GPU behind. The product runs as the demo does (SQLite and the
file-system broker in a temporary folder), since a GPU host need have no PostgreSQL or
Redis; the services' behaviour is tested in the main suite. Skipped where there is no GPU.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from workers.agent.discovery import discover_nvml

FOUND = discover_nvml()
pytestmark = pytest.mark.skipif(FOUND is None, reason="no NVML GPU on this host")

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("cuda_probe.py")
SUBMIT = """
import json
from jobs.services.submission import JobSpec, job_submit
from jobs.services.tenancy import organization_create, tiers_ensure_defaults
from jobs.models import Organization
tiers_ensure_defaults()
org = (Organization.objects.filter(slug="gpu-host").first()
       or organization_create(slug="gpu-host", tier="paid"))
ids = [job_submit(organization=org, spec=JobSpec(prompt="probe", gpus=1,
                  gpu_types=("{gpu_type}",), params=p)).pk for p in json.loads('{params}')]
print(json.dumps(ids))
"""
READ = """
import json
from jobs.models import Job
from workers.models import Gpu
jobs = {{j.pk: [j.state, j.error_code, [[a.pk, a.started_at and a.started_at.timestamp()]
                                      for a in j.attempts.order_by("pk")]]
        for j in Job.objects.filter(pk__in={jobs})}}
gpus = [[g.node.gpu_type, g.uuid, g.health, g.health_reason]
        for g in Gpu.objects.select_related("node")]
print(json.dumps({{"jobs": jobs, "gpus": gpus}}))
"""
ENDS = ("SUCCEEDED", "FAILED", "DEAD", "TIMED_OUT", "CANCELLED")


def _env(var: Path) -> dict[str, str]:
    binary = (f"{sys.executable} {PROBE} --prompt {{prompt}} --output {{output}} "
              "--checkpoint-dir {checkpoint_dir} --seed {seed} --params-file {params_file}")
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("CUDA_", "DATABASE_", "CELERY_", "REDIS_", "GPUSCHED_"))}
    return {**keep, "GPUSCHED_VAR_DIR": str(var), "DATABASE_URL": f"sqlite:///{var}/db.sqlite3",
            "CELERY_BROKER_URL": "filesystem://", "SECRET_KEY": "gpu-host-check",
            "GPUSCHED_BINARY": binary, "GPUSCHED_PROBE_DIR": str(var),
            # the probe's own variable: the binary gets none of the worker's but those named
            "GPUSCHED_BINARY_ENV_PASS": "GPUSCHED_PROBE_DIR",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                        os.environ.get("PYTHONPATH")]))}


def _manage(env: dict[str, str], *args: str) -> str:
    out = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return (out.stdout.strip().splitlines() or [""])[-1]  # what the command printed last


def _start(env: dict[str, str], argv: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(argv, env=env, cwd=ROOT, stdout=log.open("ab"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def _node(env: dict[str, str], var: Path) -> subprocess.Popen:
    return _start(env, [sys.executable, str(ROOT / "manage.py"), "gpu_node", "--name",
                        "gpu-host", "--nvml"], var / "node.log")


@contextmanager
def _running(var: Path) -> Iterator[tuple[dict[str, str], list[subprocess.Popen]]]:
    """Beat, a scheduler worker and a `gpu_node --nvml` node on a fresh database, each
    stopped at the end as a service manager stops it (SIGTERM to its process group)."""
    env = _env(var)
    _manage(env, "migrate", "--verbosity=0")
    celery = [sys.executable, "-m", "celery", "-A", "gpusched"]
    procs = [
        _start(env, celery + ["beat", "--loglevel=WARNING"], var / "beat.log"),
        _start(env, celery + ["worker", "-Q", "scheduler,default", "-c", "1",
                              "--hostname=scheduler@%h"], var / "scheduler.log"),
        _node(env, var),
    ]
    try:
        yield env, procs
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            p.wait(timeout=30)


def _submit(env: dict[str, str], *params: dict) -> list[int]:
    gpu_type, _ = FOUND
    return json.loads(_manage(env, "shell", "-c",
                              SUBMIT.format(gpu_type=gpu_type, params=json.dumps(params))))


def _read(env: dict[str, str], jobs: list[int]) -> dict:
    return json.loads(_manage(env, "shell", "-c", READ.format(jobs=jobs)))


def _watch(env: dict[str, str], jobs: list[int], *, within_s: float,
           until=lambda seen: all(s in ENDS for s, _, _ in seen["jobs"].values())) -> list[dict]:
    """What the database said every 2 s until `until` held (every job ended) or time ran
    out."""
    seen: list[dict] = []
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        time.sleep(2)
        seen.append(_read(env, jobs))
        if until(seen[-1]):
            break
    return seen


def _health(seen: dict) -> list[list[str]]:
    return [g[2:] for g in seen["gpus"]]


def _held(seen: list[dict]) -> list[str]:
    """Why GPUs were out of service at any of these moments."""
    return [reason for s in seen for _, _, health, reason in s["gpus"] if health == "UNHEALTHY"]


def _logs(var: Path) -> dict[str, str]:
    return {p.name: p.read_text()[-1500:] for p in var.glob("*.log")}


def test_a_job_runs_on_the_discovered_gpu_and_sees_only_it(tmp_path):
    gpu_type, gpus = FOUND
    with _running(tmp_path) as (env, _):
        (job,) = _submit(env, {"run_seconds": 2})
        last = _watch(env, [job], within_s=240)[-1]
    assert last["jobs"][str(job)][0] == "SUCCEEDED", (last, _logs(tmp_path))
    assert sorted(last["gpus"]) == sorted([gpu_type, g.uuid, "HEALTHY", ""] for g in gpus)
    (record,) = tmp_path.glob("attempt-*")
    visible, shown = record.read_text().splitlines()
    assert visible in {g.uuid for g in gpus}  # bound by UUID, not by index
    assert shown.split() == [visible.lower()]
    # stopping the node stopped its GPU reading too: not a reason to take a GPU out
    assert _health(_read(env, [job])) == [["HEALTHY", ""]] * len(gpus), _logs(tmp_path)


def _one_gpu() -> None:
    if len(FOUND[1]) > 1:
        pytest.skip("needs a host whose jobs have one GPU to go to")


def test_a_process_a_job_leaves_on_its_gpu_keeps_the_next_job_off_it_until_it_ends(tmp_path):
    """A daemonised child outlives the kill of its job's process group and holds GPU memory:
    the node takes that GPU out of service before the job's end frees it, and the next job
    starts there only once the process has let go."""
    _one_gpu()
    with _running(tmp_path) as (env, _):
        first, second = _submit(env, {"run_seconds": 2, "leave_gpu_process_s": 20},
                                {"run_seconds": 2})
        seen = _watch(env, [first, second], within_s=300)
    last = seen[-1]["jobs"]
    assert [last[str(first)][0], last[str(second)][0]] == ["SUCCEEDED"] * 2, (
        seen[-1], _logs(tmp_path))
    let_go = list(tmp_path.glob("left-*"))
    assert let_go, "the second job ended while the first one's process still held the GPU"
    ((_, started),) = last[str(second)][2]
    assert started > float(let_go[0].read_text())
    held = _held(seen)
    assert held and all(r.startswith("in use by process") for r in held), held
    assert _health(seen[-1]) == [["HEALTHY", ""]]


def test_a_node_killed_outright_finds_its_jobs_process_on_the_gpu_as_it_restarts(tmp_path):
    """kill -9 of the node's agent (the kernel's OOM killer, say) leaves its job's processes
    running, each in a session of its own, one of them on the GPU. The restarted agent finds
    that process as it registers and keeps the GPU out of service; the job, its try lost
    with its lease, runs again there once the process has let go."""
    _one_gpu()
    with _running(tmp_path) as (env, procs):
        (job,) = _submit(env, {"run_seconds": 20, "leave_gpu_process_s": 25})
        _watch(env, [job], within_s=120, until=lambda s: s["jobs"][str(job)][0] == "RUNNING")
        _watch(env, [job], within_s=30, until=lambda s: any(tmp_path.glob("attempt-*")))
        time.sleep(2)  # the process holds its context by then (the probe waits for it)
        os.killpg(procs[-1].pid, signal.SIGKILL)
        procs[-1].wait(timeout=30)
        procs[-1] = _node(env, tmp_path)
        seen = _watch(env, [job], within_s=300)
        state, _, attempts = seen[-1]["jobs"][str(job)]
        assert state == "SUCCEEDED", (seen[-1], _logs(tmp_path))
        seen += _watch(env, [job], within_s=60,
                       until=lambda s: _health(s) == [["HEALTHY", ""]])
    assert len(attempts) >= 2, attempts
    let_go = float((tmp_path / f"left-{attempts[0][0]}").read_text())
    assert attempts[-1][1] > let_go  # the try that succeeded started once the GPU was free
    held = _held(seen)
    assert held and all(r.startswith("in use by process") for r in held), held
    assert _health(seen[-1]) == [["HEALTHY", ""]]
