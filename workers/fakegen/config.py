"""Command line and environment parsing for the fake generator.

Precedence for every knob: command line > the job's params file > its environment
variable > built-in default. Empty environment variables count as unset.
See docs/fakegen.md for the full contract.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from workers.fakegen.stop_agreement import Gang

FAIL_MODES = ("none", "crash", "hang", "oom", "corrupt")
MAX_SIDE = 4096
_Parse = Callable[[str], float]


@dataclass(frozen=True)
class Settings:
    prompt: str
    output: Path
    checkpoint_dir: Path | None
    width: int
    height: int
    duration_s: float
    fps: int
    seed: int
    run_seconds: float
    fail: str
    fail_at: float
    progress_interval: float
    checkpoint_every: float
    noise: bool = False
    gang: Gang | None = None  # a gang spanning nodes: its ranks agree on their stop step
    stop_wait_s: float = 5.0

    @property
    def frames(self) -> int:
        return max(1, round(self.duration_s * self.fps))

    @property
    def steps(self) -> int:
        """Number of progress steps; one step per progress interval of compute time."""
        return max(1, round(self.run_seconds / self.progress_interval))

    @property
    def fingerprint(self) -> str:
        """What makes two runs the same job, for deciding whether a checkpoint applies."""
        key = [self.prompt, self.seed, self.width, self.height, self.fps, self.frames]
        return hashlib.sha256(json.dumps(key).encode()).hexdigest()


def _resolution(text: str) -> tuple[int, int]:
    width, sep, height = text.lower().partition("x")
    if not (sep and width.isdigit() and height.isdigit()):
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT, got {text!r}")
    w, h = int(width), int(height)
    if not (0 < w <= MAX_SIDE and 0 < h <= MAX_SIDE) or w % 2 or h % 2:
        raise argparse.ArgumentTypeError(f"sides must be even and in 2..{MAX_SIDE}: {text!r}")
    return w, h


def _number(kind: type[int] | type[float], minimum: float, strict: bool) -> _Parse:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a valid {kind.__name__}: {text!r}") from None
        if value < minimum or (strict and value == minimum):
            bound = ">" if strict else ">="
            raise argparse.ArgumentTypeError(f"must be {bound} {minimum}: {text!r}")
        return value

    return parse


def _fraction(text: str) -> float:
    value = _number(float, 0.0, strict=False)(text)
    if value > 1.0:
        raise argparse.ArgumentTypeError(f"must be within 0..1: {text!r}")
    return value


def _fail_mode(text: str) -> str:
    # A type function rather than choices=, because argparse skips choices for defaults
    # and the default may come from FAKEGEN_FAIL.
    if text not in FAIL_MODES:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(FAIL_MODES)}: {text!r}")
    return text


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a valid int: {text!r}") from None


def _flag(text: str) -> bool:
    if text.lower() not in ("0", "1", "false", "true"):
        raise argparse.ArgumentTypeError(f"must be 0, 1, false or true: {text!r}")
    return text.lower() in ("1", "true")


def _option_table() -> list[tuple[str, str, str | None, Callable[[str], object], str]]:
    """(flag, environment variable, built-in default, type function, help) per option."""
    return [
        ("--prompt", "FAKEGEN_PROMPT", None, str, "text prompt (required)"),
        ("--output", "GPUSCHED_OUTPUT_PATH", None, Path, "output .y4m path (required)"),
        (
            "--checkpoint-dir",
            "GPUSCHED_CHECKPOINT_DIR",
            None,
            Path,
            "directory for the resume checkpoint; without it SIGTERM loses progress",
        ),
        (
            "--work-dir",
            "GPUSCHED_WORK_DIR",
            None,
            Path,
            "directory that relative --output/--checkpoint-dir are resolved against",
        ),
        ("--resolution", "FAKEGEN_RESOLUTION", "64x48", _resolution, "WIDTHxHEIGHT, even"),
        (
            "--duration-s",
            "FAKEGEN_DURATION_S",
            "2",
            _number(float, 0.0, True),
            "video length in seconds",
        ),
        ("--fps", "FAKEGEN_FPS", "8", _number(int, 0, True), "frames per second"),
        ("--seed", "FAKEGEN_SEED", "0", _int, "seed; same prompt+seed gives identical bytes"),
        (
            "--run-seconds",
            "FAKEGEN_RUN_SECONDS",
            "5",
            _number(float, 0.0, False),
            "simulated compute time for a full run",
        ),
        ("--fail", "FAKEGEN_FAIL", "none", _fail_mode, "|".join(FAIL_MODES)),
        (
            "--fail-at",
            "FAKEGEN_FAIL_AT",
            "0.5",
            _fraction,
            "progress fraction at which crash/hang/oom happen",
        ),
        (
            "--fail-rank",
            "FAKEGEN_FAIL_RANK",
            "-1",
            _int,
            "node rank of a gang (GPUSCHED_NODE_RANK) where the failure happens (-1: every one)",
        ),
        (
            "--fail-tries",
            "FAKEGEN_FAIL_TRIES",
            "0",
            _int,
            "fail only on the job's first N tries (GPUSCHED_RETRY below N; 0: on every one)",
        ),
        (
            "--progress-interval",
            "FAKEGEN_PROGRESS_INTERVAL",
            "0.5",
            _number(float, 0.0, True),
            "seconds between PROGRESS lines (one step each)",
        ),
        (
            "--checkpoint-every",
            "FAKEGEN_CHECKPOINT_EVERY",
            "0",
            _number(float, 0.0, False),
            "also checkpoint every N seconds of compute (0: only on SIGTERM)",
        ),
        (
            "--stop-wait",
            "FAKEGEN_STOP_WAIT",
            "5",
            _number(float, 0.0, False),
            "in a gang spanning nodes, seconds a stopping rank waits for the gang's stop step",
        ),
        (
            "--noise",
            "FAKEGEN_NOISE",
            "0",
            _flag,
            "also write bytes that are not UTF-8, NUL among them, to stdout and stderr",
        ),
    ]


def load_params(argv: Sequence[str] | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The job's parameters (JSON object) from --params-file or GPUSCHED_PARAMS_FILE.

    Keys are option names with underscores (``run_seconds``, ``fail``, ``fail_at`` …);
    keys that name no option are ignored, so a job may carry parameters for other binaries.
    """
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--params-file", type=Path, default=environ.get("GPUSCHED_PARAMS_FILE"))
    path = pre.parse_known_args(argv)[0].params_file
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        pre.error(f"cannot read params file {path}: {exc}")
    if not isinstance(data, dict):
        pre.error(f"params file {path} must hold a JSON object")
    return {str(k): str(v) for k, v in data.items() if v is not None}


def build_parser(
    environ: Mapping[str, str], params: Mapping[str, str] | None = None
) -> argparse.ArgumentParser:
    """Parser whose defaults come from ``params`` then ``environ``; argparse type-checks them."""
    parser = argparse.ArgumentParser(
        prog="gpusched-fakegen",
        description="Fake text-to-video generator implementing the gpusched binary contract.",
    )
    params = params or {}
    for flag, env, builtin, kind, text in _option_table():
        default = params.get(flag[2:].replace("-", "_")) or environ.get(env) or builtin
        parser.add_argument(
            flag, type=kind, default=default, help=f"{text} [env {env}; default {builtin}]"
        )
    parser.add_argument(
        "--params-file", type=Path, help="JSON object of the job's parameters [env "
        "GPUSCHED_PARAMS_FILE]; its keys are option names with underscores"
    )
    return parser


def parse_settings(argv: Sequence[str] | None, environ: Mapping[str, str]) -> Settings:
    """Parse argv+environment; exits with status 2 (argparse) on bad usage."""
    parser = build_parser(environ, load_params(argv, environ))
    args = parser.parse_args(argv)
    if args.prompt is None:
        parser.error("--prompt (or FAKEGEN_PROMPT) is required")
    if args.output is None:
        parser.error("--output (or GPUSCHED_OUTPUT_PATH) is required")
    base = args.work_dir if args.work_dir is not None else Path.cwd()
    width, height = args.resolution
    node_rank = _int(environ.get("GPUSCHED_NODE_RANK") or "0")
    retry = _int(environ.get("GPUSCHED_RETRY") or "0")
    fails_here = (args.fail_rank < 0 or args.fail_rank == node_rank) and (
        args.fail_tries <= 0 or retry < args.fail_tries)
    return Settings(
        prompt=args.prompt,
        output=base / args.output,
        checkpoint_dir=None if args.checkpoint_dir is None else base / args.checkpoint_dir,
        width=width,
        height=height,
        duration_s=args.duration_s,
        fps=args.fps,
        seed=args.seed,
        run_seconds=args.run_seconds,
        fail=args.fail if fails_here else "none",
        fail_at=args.fail_at,
        progress_interval=args.progress_interval,
        checkpoint_every=args.checkpoint_every,
        noise=args.noise,
        gang=_gang(environ),
        stop_wait_s=args.stop_wait,
    )


def _gang(environ: Mapping[str, str]) -> Gang | None:
    """Where a gang spanning nodes meets, from the variables torchrun-style launchers read
    (docs/fakegen.md); None on one node."""
    try:
        nodes, rank = int(environ.get("NNODES", "1")), int(environ.get("NODE_RANK", "0"))
        port = int(environ.get("MASTER_PORT", "0"))
    except ValueError:
        return None
    address = environ.get("MASTER_ADDR", "")
    return Gang(rank, nodes, address, port) if nodes > 1 and address and port else None
