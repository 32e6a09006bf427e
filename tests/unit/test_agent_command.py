"""How the node agent builds the binary's argv and reads its exit."""

from pathlib import Path

import pytest

from workers.agent.command import AttemptPaths, UnsafeOutputPath, build_argv, build_env
from workers.agent.outcome import classify, retryable


def _paths():
    return AttemptPaths.under(Path("/w"), job_id=7, attempt_id=9, suffix=".y4m")


def test_a_prompt_with_shell_syntax_stays_one_argument():
    prompt = "a cat; rm -rf / $(whoami) 'quoted'"
    argv = build_argv("gen --prompt {prompt} --out {output}", prompt=prompt, seed=1,
                      paths=_paths())
    assert argv == ["gen", "--prompt", prompt, "--out", "/w/job-7/attempt-9/output.y4m"]


def test_the_checkpoint_outlives_the_attempt_but_the_work_dir_does_not():
    first, second = _paths(), AttemptPaths.under(Path("/w"), 7, 10, ".y4m")
    assert first.checkpoint_dir == second.checkpoint_dir
    assert first.work_dir != second.work_dir


def test_the_binary_sees_only_its_gpus():
    env = build_env(gpu_indices=(1, 3), gpu_uuids=("GPU-sim-n-1", "GPU-sim-n-3"),
                    paths=_paths(), attempt_id=9, job_id=7)
    assert env["CUDA_VISIBLE_DEVICES"] == "1,3"
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert env["GPUSCHED_GPU_UUIDS"] == "GPU-sim-n-1,GPU-sim-n-3"


def test_a_single_node_job_is_told_it_is_alone():
    env = build_env(gpu_indices=(0,), paths=_paths(), attempt_id=9, job_id=7, nodes=("n1",))
    assert (env["GPUSCHED_NODE_RANK"], env["GPUSCHED_NNODES"]) == ("0", "1")
    assert "MASTER_ADDR" not in env and "NODE_RANK" not in env


def test_each_node_of_a_gang_learns_its_rank_and_where_to_meet():
    env = build_env(gpu_indices=(0, 1), paths=_paths(), attempt_id=9, job_id=7, node_rank=2,
                    nodes=("n1", "n2", "n3"), rendezvous=("10.0.0.1", 29501))
    assert {k: env[k] for k in ("NODE_RANK", "NNODES", "MASTER_ADDR", "MASTER_PORT",
                                "GPUSCHED_NODES")} == {
        "NODE_RANK": "2", "NNODES": "3", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29501",
        "GPUSCHED_NODES": "n1,n2,n3"}


def test_ranks_beyond_the_first_keep_their_files_apart():
    """Nodes may share a file system: rank 0 owns the job's directory and checkpoint."""
    rank = AttemptPaths.under(Path("/w"), 7, 9, ".y4m", rank=1)
    assert rank.work_dir == Path("/w/job-7/attempt-9-rank-1")
    assert rank.checkpoint_dir == Path("/w/job-7/checkpoint-rank-1")
    assert rank.work_dir != _paths().work_dir and rank.checkpoint_dir != _paths().checkpoint_dir


SECRETS = {"DATABASE_URL": "postgres://u:hunter2@db/g", "SECRET_KEY": "s3cret",
           "REDIS_URL": "redis://:pw@r/0", "CELERY_BROKER_URL": "redis://:pw@r/1",
           "AWS_SECRET_ACCESS_KEY": "k", "GPUSCHED_MEDIA_ROOT": "/srv/media",
           "HF_TOKEN": "hf_x", "LD_PRELOAD": "/tmp/evil.so"}
NEEDED = {"PATH": "/usr/bin", "HOME": "/home/n", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
          "TZ": "UTC", "TMPDIR": "/scratch", "LD_LIBRARY_PATH": "/usr/local/cuda/lib64",
          "PYTHONPATH": "/srv/app", "VIRTUAL_ENV": "/srv/venv", "CUDA_HOME": "/usr/local/cuda",
          "NVIDIA_DRIVER_CAPABILITIES": "compute", "NCCL_SOCKET_IFNAME": "ib0"}


@pytest.fixture
def worker_env(monkeypatch, settings):
    settings.GPUSCHED_BINARY_ENV_PASS = ()
    for name, value in {**SECRETS, **NEEDED, "CUDA_VISIBLE_DEVICES": "0,1,2,3",
                        "MASTER_ADDR": "elsewhere"}.items():
        monkeypatch.setenv(name, value)


def test_the_binary_gets_what_it_needs_and_none_of_the_services_secrets(worker_env):
    env = build_env(gpu_indices=(1,), paths=_paths(), attempt_id=9, job_id=7)
    assert not set(SECRETS) & set(env)
    assert {k: env[k] for k in NEEDED} == NEEDED
    # the worker's own GPUs and gang are not the job's
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and "MASTER_ADDR" not in env
    assert env["GPUSCHED_OUTPUT_PATH"] == "/w/job-7/attempt-9/output.y4m"
    assert env["GPUSCHED_JOB_ID"] == "7" and env["GPUSCHED_WORK_DIR"] == "/w/job-7/attempt-9"


def test_an_operator_passes_more_by_name_or_prefix_but_a_lone_star_passes_nothing(
        worker_env, monkeypatch, settings):
    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    settings.GPUSCHED_BINARY_ENV_PASS = ("HF_TOKEN", "OMP_*", "*")
    env = build_env(gpu_indices=(0,), paths=_paths(), attempt_id=9, job_id=7)
    assert (env["HF_TOKEN"], env["OMP_NUM_THREADS"]) == ("hf_x", "8")
    assert "DATABASE_URL" not in env and "SECRET_KEY" not in env


@pytest.mark.parametrize("suffix", ["/../../../job-123/checkpoint/x", "/x", "/..", "/../x"])
def test_an_output_outside_the_work_dir_is_refused_before_anything_is_made(tmp_path, suffix):
    paths = AttemptPaths.under(tmp_path, job_id=7, attempt_id=9, suffix=suffix)
    with pytest.raises(UnsafeOutputPath) as refused:
        paths.create({})
    assert isinstance(refused.value, OSError)  # the runner's launch failure
    assert list(tmp_path.iterdir()) == []


def test_an_output_suffix_is_a_file_in_the_work_dir(tmp_path):
    paths = AttemptPaths.under(tmp_path, job_id=7, attempt_id=9, suffix=".mp4")
    paths.create({})
    assert paths.output == paths.work_dir / "output.mp4" and paths.work_dir.is_dir()


def _classify(**kw):
    base = dict(exit_code=0, stderr_tail="", stop="", output_ok=True)
    return classify(**{**base, **kw})


def test_exits_are_classified():
    assert _classify() == ("SUCCEEDED", "")
    assert _classify(output_ok=False) == ("FAILED", "corrupt_output")
    assert _classify(exit_code=1) == ("FAILED", "exit_1")
    assert _classify(exit_code=137) == ("OOM", "out_of_memory")
    assert _classify(exit_code=1, stderr_tail="CUDA out of memory") == ("OOM", "out_of_memory")
    for said in ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when "
                 "allocating tensor with shape[65536,65536]",
                 "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
                 "`cublasCreate(handle)`",
                 "cudaErrorMemoryAllocation", "CUresult 2: CUDA_ERROR_OUT_OF_MEMORY"):
        assert _classify(exit_code=1, stderr_tail=said) == ("OOM", "out_of_memory"), said
    device_assert = "RuntimeError: CUDA error: device-side assert triggered"  # a crash
    assert _classify(exit_code=1, stderr_tail=device_assert) == ("FAILED", "exit_1")
    assert _classify(exit_code=75, stop="preempt") == ("PREEMPTED", "")
    assert _classify(exit_code=0, stop="preempt") == ("SUCCEEDED", "")
    assert _classify(exit_code=-15, stop="cancel") == ("CANCELLED", "cancelled")
    assert _classify(exit_code=-15, stop="timeout") == ("TIMED_OUT", "time_limit")
    assert _classify(exit_code=-15, stop="hung") == ("FAILED", "hung")


def _retryable(**kw):
    return retryable(**{**dict(outcome="FAILED", error_code="", exit_code=None), **kw})


def test_a_crash_a_hang_and_a_broken_output_are_retried_a_bad_input_is_not():
    assert _retryable(error_code="exit_1", exit_code=1)
    assert _retryable(error_code="exit_-11", exit_code=-11)  # SIGSEGV
    assert _retryable(error_code="exit_75", exit_code=75)  # EX_TEMPFAIL, unasked
    assert _retryable(error_code="hung", exit_code=-15)
    assert _retryable(error_code="corrupt_output", exit_code=0)
    assert _retryable(error_code="launch_failed", exit_code=None)  # the node's fault
    for code in (2, 64, 65, 78):  # usage, EX_USAGE, EX_DATAERR, EX_CONFIG
        assert not _retryable(error_code=f"exit_{code}", exit_code=code)
    assert not _retryable(outcome="OOM", error_code="out_of_memory", exit_code=137)
    assert not _retryable(outcome="TIMED_OUT", error_code="time_limit", exit_code=-15)
    assert not _retryable(outcome="CANCELLED", error_code="cancelled", exit_code=-15)
