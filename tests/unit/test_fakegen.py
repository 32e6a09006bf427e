"""The fake generator, exercised as a real subprocess the way the node agent runs it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# Until the project is installed/configured, make `workers` importable for in-process checks.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from workers.agent.progress import checkpoint_step  # noqa: E402
from workers.fakegen.video import read_y4m_info, render_y4m, validate_y4m  # noqa: E402

PROGRESS_RE = re.compile(r"^PROGRESS (?P<frac>[01]\.\d{4}) step=(?P<step>\d+)/(?P<steps>\d+)$")
FAST_STEP_S = 0.05
FAST = ["--run-seconds", "0.4", "--progress-interval", str(FAST_STEP_S)]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKEGEN_", "GPUSCHED_"))}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "workers.fakegen", *args]


def run_fakegen(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        _cmd(*args), env=env or _env(), capture_output=True, text=True, timeout=15
    )


def start_fakegen(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        _cmd(*args), env=env or _env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def progress(stdout: str) -> list[tuple[float, int, int]]:
    found = []
    for line in stdout.splitlines():
        if line.startswith("PROGRESS"):
            match = PROGRESS_RE.match(line)
            assert match, f"malformed progress line {line!r}"
            found.append((float(match["frac"]), int(match["step"]), int(match["steps"])))
    return found


def read_until(proc: subprocess.Popen, predicate: Callable[[str], bool]) -> list[str]:
    """Read stdout lines until one satisfies ``predicate``; return all lines read."""
    assert proc.stdout is not None
    lines: list[str] = []
    for raw in proc.stdout:
        lines.append(raw.rstrip("\n"))
        if predicate(lines[-1]):
            break
    return lines


@pytest.fixture
def killer() -> Iterator[list[subprocess.Popen]]:
    """Make sure no fakegen outlives its test, whatever the test does."""
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=5)


def test_success_writes_valid_deterministic_video(tmp_path: Path) -> None:
    first, second, other = tmp_path / "a.y4m", tmp_path / "b.y4m", tmp_path / "c.y4m"
    common = ["--prompt", "a red fox", *FAST, "--resolution", "32x16", "--duration-s", "1"]
    done = run_fakegen(*common, "--seed", "7", "--output", str(first))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"OUTPUT {first}"
    run_fakegen(*common, "--seed", "7", "--output", str(second))
    run_fakegen(*common, "--seed", "8", "--output", str(other))
    assert validate_y4m(first)
    info = read_y4m_info(first)
    assert (info.width, info.height, info.fps, info.frames) == (32, 16, "8:1", 8)
    assert first.read_bytes().startswith(b"YUV4MPEG2 W32 H16 F8:1 Ip A1:1 C420jpeg\nFRAME\n")
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes() != other.read_bytes()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_progress_lines_parse_and_are_monotonic(tmp_path: Path) -> None:
    done = run_fakegen("--prompt", "x", "--output", str(tmp_path / "o.y4m"), *FAST)
    assert done.returncode == 0, done.stderr
    steps = progress(done.stdout)
    assert steps[0] == (0.0, 0, 8)
    assert steps[-1] == (1.0, 8, 8)
    assert [s[1] for s in steps] == list(range(9))
    fractions = [s[0] for s in steps]
    assert fractions == sorted(fractions)


def test_cuda_visible_devices_echoed_first(tmp_path: Path) -> None:
    out = str(tmp_path / "o.y4m")
    bound = run_fakegen(
        "--prompt", "x", "--output", out, *FAST, env=_env(CUDA_VISIBLE_DEVICES="3,5")
    )
    unbound = run_fakegen("--prompt", "x", "--output", out, *FAST)
    assert bound.stdout.splitlines()[0].startswith("START CUDA_VISIBLE_DEVICES=3,5 ")
    assert unbound.stdout.splitlines()[0].startswith("START CUDA_VISIBLE_DEVICES=<unset> ")


def test_sigterm_checkpoints_and_rerun_resumes(tmp_path: Path, killer: list) -> None:
    args = ["--prompt", "resume me", "--output", str(tmp_path / "o.y4m")]
    args += ["--checkpoint-dir", str(tmp_path / "ck"), "--run-seconds", "1.5"]
    args += ["--progress-interval", "0.05"]
    proc = start_fakegen(*args)
    killer.append(proc)
    read_until(proc, lambda line: line.startswith("PROGRESS") and float(line.split()[1]) >= 0.2)
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=10)
    assert proc.returncode == 75
    last, announced = rest.splitlines()[-1].rsplit(" ", 1)
    assert last == f"CHECKPOINT {tmp_path / 'ck' / 'fakegen-checkpoint.json'}"
    assert not (tmp_path / "o.y4m").exists()

    resumed = run_fakegen(*args)
    assert resumed.returncode == 0, resumed.stderr
    lines = resumed.stdout.splitlines()
    resume_step = int(lines[1].removeprefix("RESUME "))
    assert 6 <= resume_step < 30 and checkpoint_step(announced) == resume_step
    steps = progress(resumed.stdout)
    assert steps[0][1] == resume_step and steps[-1] == (1.0, 30, 30)
    assert len(steps) - 1 == 30 - resume_step  # only the remaining steps were computed
    assert validate_y4m(tmp_path / "o.y4m")
    assert not (tmp_path / "ck" / "fakegen-checkpoint.json").exists()


def _gang_rank(tmp_path: Path, rank: int, port: int, *extra: str) -> subprocess.Popen:
    env = _env(NNODES="2", NODE_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return start_fakegen("--prompt", "gang", "--output", str(tmp_path / f"o{rank}.y4m"),
                         "--checkpoint-dir", str(tmp_path / f"ck{rank}"), "--run-seconds", "20",
                         "--progress-interval", "0.05", *extra, env=env)


def _stop_step(proc: subprocess.Popen) -> tuple[int | None, str]:
    """The step a stopped rank announced its checkpoint with, and its stderr."""
    rest, err = proc.communicate(timeout=15)
    assert proc.returncode == 75
    return checkpoint_step(rest.splitlines()[-1].split(" ", 1)[1]), err


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as s:
        return s.getsockname()[1]


def test_a_gangs_ranks_stopped_apart_checkpoint_one_step(tmp_path: Path, killer: list) -> None:
    port = _free_port()
    ranks = [_gang_rank(tmp_path, rank, port) for rank in (0, 1)]
    killer.extend(ranks)
    read_until(ranks[1], lambda line: line.startswith("PROGRESS"))
    ranks[1].send_signal(signal.SIGTERM)  # first, and rank 0 goes on for a while
    lines = read_until(ranks[0], lambda line: line.endswith("step=10/400"))
    ranks[0].send_signal(signal.SIGTERM)
    steps = [_stop_step(proc)[0] for proc in ranks]
    assert steps[0] == steps[1]
    assert steps[0] is not None and steps[0] >= 10, lines


def test_a_rank_no_peer_answers_stops_at_its_own_step(tmp_path: Path, killer: list) -> None:
    alone = _gang_rank(tmp_path, 1, _free_port(), "--stop-wait", "0.3")
    killer.append(alone)
    lines = read_until(alone, lambda line: line.endswith("step=3/400"))
    alone.send_signal(signal.SIGTERM)
    step, err = _stop_step(alone)
    assert step is not None and 3 <= step < 10, lines
    assert "no stop step agreed" in err


def test_sigterm_without_checkpoint_dir_exits_143(tmp_path: Path, killer: list) -> None:
    proc = start_fakegen("--prompt", "x", "--output", str(tmp_path / "o.y4m"), "--run-seconds", "5")
    killer.append(proc)
    read_until(proc, lambda line: line.startswith("PROGRESS"))
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=10)
    assert proc.returncode == 143


def test_periodic_checkpoints(tmp_path: Path) -> None:
    ckdir = tmp_path / "ck"
    done = run_fakegen(
        "--prompt", "x", "--output", str(tmp_path / "o.y4m"), *FAST,
        "--checkpoint-dir", str(ckdir), "--checkpoint-every", "0.1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    steps = [checkpoint_step(line.split(" ", 1)[1]) for line in done.stdout.splitlines()
             if line.startswith("CHECKPOINT ")]
    every = round(0.1 / FAST_STEP_S)  # the steps an interval spans: each multiple of them
    assert len(steps) >= 2 and steps == list(range(every, every * (len(steps) + 1), every))
    assert not (ckdir / "fakegen-checkpoint.json").exists()  # removed after success


def test_checkpoint_of_another_job_is_ignored(tmp_path: Path, killer: list) -> None:
    ckdir = str(tmp_path / "ck")
    common = ["--output", str(tmp_path / "o.y4m"), "--checkpoint-dir", ckdir, *FAST]
    proc = start_fakegen("--prompt", "first", *common, "--run-seconds", "5")
    killer.append(proc)
    read_until(proc, lambda line: line.startswith("PROGRESS 0.0") and "step=0/" not in line)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=10)
    assert proc.returncode == 75
    other = run_fakegen("--prompt", "second", *common)
    assert other.returncode == 0
    assert "RESUME" not in other.stdout


def test_crash(tmp_path: Path) -> None:
    out = tmp_path / "o.y4m"
    done = run_fakegen("--prompt", "x", "--output", str(out), *FAST, "--fail", "crash")
    assert done.returncode == 1
    assert "Traceback (most recent call last)" in done.stderr
    assert "SimulatedCrash: simulated crash at step 4/8" in done.stderr
    assert max(f for f, _, _ in progress(done.stdout)) == 0.5
    assert not out.exists()


def test_a_failure_named_for_one_rank_of_a_gang_happens_there_only(tmp_path: Path) -> None:
    args = ("--prompt", "x", "--output", str(tmp_path / "o.y4m"), *FAST, "--fail", "crash",
            "--fail-rank", "1")
    assert run_fakegen(*args, env=_env(GPUSCHED_NODE_RANK="0")).returncode == 0
    assert run_fakegen(*args, env=_env(GPUSCHED_NODE_RANK="1")).returncode == 1


def test_a_failure_for_the_first_tries_stops_on_the_retry_after_them(tmp_path: Path) -> None:
    args = ("--prompt", "x", "--output", str(tmp_path / "o.y4m"), *FAST, "--fail", "crash",
            "--fail-tries", "2")
    assert [run_fakegen(*args, env=_env(GPUSCHED_RETRY=str(retry))).returncode
            for retry in (0, 1, 2)] == [1, 1, 0]


def test_noise_interleaves_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    out = tmp_path / "o.y4m"
    done = subprocess.run(_cmd("--prompt", "x", "--output", str(out), *FAST, "--noise", "1"),
                          env=_env(), capture_output=True, timeout=15)
    assert done.returncode == 0 and validate_y4m(out)
    for stream in (done.stdout, done.stderr):
        assert b"\x00" in stream
        with pytest.raises(UnicodeDecodeError):
            stream.decode("utf-8")
    lines = done.stdout.decode("utf-8", "replace").splitlines()
    assert len(progress("\n".join(line for line in lines if line.startswith("PROGRESS")))) == 9


def test_oom(tmp_path: Path) -> None:
    out = tmp_path / "o.y4m"
    done = run_fakegen("--prompt", "x", "--output", str(out), *FAST, "--fail", "oom")
    assert done.returncode == 137
    assert "CUDA out of memory. Tried to allocate" in done.stderr
    assert not out.exists()


def test_corrupt_exits_zero_with_invalid_output(tmp_path: Path) -> None:
    out = tmp_path / "o.y4m"
    done = run_fakegen("--prompt", "x", "--output", str(out), *FAST, "--fail", "corrupt")
    assert done.returncode == 0
    assert done.stdout.splitlines()[-1] == f"OUTPUT {out}"
    assert out.exists() and not validate_y4m(out)


def test_hang_stops_progress_until_killed(tmp_path: Path, killer: list) -> None:
    args = ["--prompt", "x", "--output", str(tmp_path / "o.y4m"), "--run-seconds", "0.5"]
    proc = start_fakegen(*args, "--progress-interval", "0.05", "--fail", "hang", "--fail-at", "0.3")
    killer.append(proc)
    time.sleep(1.2)  # well past the whole run time
    assert proc.poll() is None, "a hung generator must not exit by itself"
    proc.send_signal(signal.SIGTERM)  # a hung process dies without checkpointing
    stdout, stderr = proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGTERM
    assert max(f for f, _, _ in progress(stdout)) == pytest.approx(0.3)
    assert "OUTPUT" not in stdout and "CHECKPOINT" not in stdout
    assert not (tmp_path / "o.y4m").exists()


def test_env_knobs_and_argv_precedence(tmp_path: Path) -> None:
    out = tmp_path / "o.y4m"
    env = _env(
        FAKEGEN_FAIL="crash",
        FAKEGEN_RUN_SECONDS="0.2",
        FAKEGEN_PROGRESS_INTERVAL="0.05",
        GPUSCHED_OUTPUT_PATH=str(out),
    )
    assert run_fakegen("--prompt", "x", env=env).returncode == 1
    done = run_fakegen("--prompt", "x", "--fail", "none", env=env)
    assert done.returncode == 0, done.stderr
    assert progress(done.stdout)[-1] == (1.0, 4, 4)
    assert validate_y4m(out)


def test_gpusched_dirs_from_environment(tmp_path: Path) -> None:
    env = _env(
        GPUSCHED_WORK_DIR=str(tmp_path),
        GPUSCHED_OUTPUT_PATH="video.y4m",
        GPUSCHED_CHECKPOINT_DIR="ck",
        FAKEGEN_CHECKPOINT_EVERY="0.05",
    )
    done = run_fakegen("--prompt", "x", *FAST, env=env)
    assert done.returncode == 0, done.stderr
    assert f"CHECKPOINT {tmp_path / 'ck' / 'fakegen-checkpoint.json'} step=" in done.stdout
    assert validate_y4m(tmp_path / "video.y4m")


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (["--resolution", "63x48"], {}),
        (["--fail-at", "1.5"], {}),
        (["--fail", "explode"], {}),
        ([], {"FAKEGEN_FAIL": "explode"}),
        ([], {"FAKEGEN_RUN_SECONDS": "soon"}),
    ],
)
def test_bad_usage_exits_2(tmp_path: Path, args: list[str], env: dict[str, str]) -> None:
    done = run_fakegen("--prompt", "x", "--output", str(tmp_path / "o.y4m"), *args, env=_env(**env))
    assert done.returncode == 2
    assert "usage:" in done.stderr


def test_missing_output_is_usage_error() -> None:
    assert run_fakegen("--prompt", "x").returncode == 2


def test_validate_y4m_rejects_defects(tmp_path: Path) -> None:
    good = render_y4m("p", 1, 4, 2, 8, 3)
    cases = {
        "good": good,
        "truncated": good[:-1],
        "trailing": good + b"F",
        "no_frames": good.split(b"FRAME")[0],
        "bad_magic": b"YUV4MPEG3" + good[9:],
        "bad_frame_tag": good.replace(b"FRAME", b"FRAMX", 1),
        "empty": b"",
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    verdicts = {name: validate_y4m(tmp_path / name) for name in cases}
    assert verdicts == {name: name == "good" for name in cases}
    assert not validate_y4m(tmp_path / "missing")
