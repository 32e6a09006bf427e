"""On a host with an NVIDIA GPU: the whole path, from discovery to the binary's view.

A node started with `gpu_node --nvml` registers what NVML found; a job that asks for that
GPU type is scheduled, started and finished there; its binary (tests/gpu/cuda_probe.py,
then the fake generator) records which devices the CUDA driver showed it. The product runs
as the demo does (SQLite and the file-system broker in a temporary folder), since a GPU
host need have no PostgreSQL or Redis; the services' behaviour is tested in the main suite.
Skipped where there is no GPU (CI).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workers.agent.discovery import discover_nvml

FOUND = discover_nvml()
pytestmark = pytest.mark.skipif(FOUND is None, reason="no NVML GPU on this host")

ROOT = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).with_name("cuda_probe.py")
SUBMIT = """
from jobs.services.submission import JobSpec, job_submit
from jobs.services.tenancy import organization_create, tiers_ensure_defaults
tiers_ensure_defaults()
org = organization_create(slug="gpu-host", tier="paid")
spec = JobSpec(prompt="probe", gpus=1, gpu_types=("{gpu_type}",), params={{"run_seconds": 2}})
print(job_submit(organization=org, spec=spec).pk)
"""
READ = """
import json
from jobs.models import Job
from workers.models import Gpu
job = Job.objects.get(pk={job})
gpus = [[g.node.gpu_type, g.uuid, g.health] for g in Gpu.objects.select_related("node")]
print(json.dumps({{"state": job.state, "error": job.error_code, "gpus": gpus}}))
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
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                        os.environ.get("PYTHONPATH")]))}


def _manage(env: dict[str, str], *args: str) -> str:
    out = subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


def _start(env: dict[str, str], argv: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(argv, env=env, cwd=ROOT, stdout=log.open("wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def test_a_job_runs_on_the_discovered_gpu_and_sees_only_it(tmp_path):
    gpu_type, gpus = FOUND
    env = _env(tmp_path)
    _manage(env, "migrate", "--verbosity=0")
    job = _manage(env, "shell", "-c", SUBMIT.format(gpu_type=gpu_type)).splitlines()[-1]
    celery = [sys.executable, "-m", "celery", "-A", "gpusched"]
    procs = [
        _start(env, celery + ["beat", "--loglevel=WARNING"], tmp_path / "beat.log"),
        _start(env, celery + ["worker", "-Q", "scheduler,default", "-c", "1",
                              "--hostname=scheduler@%h"], tmp_path / "scheduler.log"),
        _start(env, [sys.executable, str(ROOT / "manage.py"), "gpu_node", "--name", "gpu-host",
                     "--nvml"], tmp_path / "node.log"),
    ]
    try:
        deadline, seen = time.monotonic() + 240, {"state": ""}
        while time.monotonic() < deadline and seen["state"] not in ENDS:
            time.sleep(2)
            seen = json.loads(_manage(env, "shell", "-c", READ.format(job=job)).splitlines()[-1])
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            p.wait(timeout=30)
    logs = {p.name: p.read_text()[-1500:] for p in tmp_path.glob("*.log")}
    assert seen["state"] == "SUCCEEDED", (seen, logs)
    assert sorted(seen["gpus"]) == sorted([gpu_type, g.uuid, "HEALTHY"] for g in gpus)
    (record,) = tmp_path.glob("attempt-*")
    visible, shown = record.read_text().splitlines()
    assert visible in {g.uuid for g in gpus}  # bound by UUID, not by index
    assert shown.split() == [visible.lower()]
