"""The policy compiled against the policy interpreted, in one run: `bench/policy_tick.py` on
two copies of the policy, one built with mypyc (bin/build-policy) and one not.

    python bench/policy_builds.py [--rounds 3] [--runs 7] [--queued 5000,50000,200000]

Copies the policy's sources (not any build of this checkout) twice into a temporary
directory, compiles one copy (about a minute; needs the `compile` extra, a C compiler and
the Python headers), then runs the tick bench on each copy in turn, `--rounds` times, each
in a process of its own. Prints each build's median decision time (the lowest and highest
median over the rounds), the ratio compiled / interpreted of the medians of those medians,
and whether both builds decided the same (placed, preempted, reserved, kept, pending).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COPIED = ("jobs/__init__.py", "jobs/policy_build.py", "bench/policy_tick.py")
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # each copy its own policy


def _copy(dest: Path) -> Path:
    """The policy's sources, the build tool and the tick bench under `dest`."""
    for name in COPIED:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest / name)
    (dest / "jobs" / "policy").mkdir()
    for src in (ROOT / "jobs" / "policy").glob("*.py"):
        shutil.copy2(src, dest / "jobs" / "policy" / src.name)
    return dest


def _tick(tree: Path, runs: int, queued: str) -> tuple[str, dict[int, tuple[float, tuple]]]:
    """policy_tick's header and, per queue size, its median ms and its decision counts."""
    out = subprocess.run(
        [sys.executable, "bench/policy_tick.py", "--runs", str(runs), "--queued", queued],
        cwd=tree, check=True, capture_output=True, text=True, env=_ENV,
    ).stdout.splitlines()
    rows = {}
    for line in out[2:]:
        cols = line.split()
        rows[int(cols[0])] = (float(cols[1]), tuple(cols[5:]))
    return out[0], rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--queued", default="5000,50000,200000")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain, built = _copy(Path(tmp) / "interpreted"), _copy(Path(tmp) / "compiled")
        subprocess.run([sys.executable, "-m", "jobs.policy_build"], cwd=built, check=True,
                       capture_output=True, env=_ENV)
        medians: dict[str, dict[int, list[float]]] = {"interpreted": {}, "compiled": {}}
        decisions: dict[str, dict[int, set[tuple]]] = {"interpreted": {}, "compiled": {}}
        for _ in range(args.rounds):
            for name, tree in (("interpreted", plain), ("compiled", built)):
                header, rows = _tick(tree, args.runs, args.queued)
                if not header.endswith(f"policy {name}" if name == "interpreted"
                                       else "policy compiled (bin/build-policy)"):
                    raise SystemExit(f"the {name} copy ran another build: {header}")
                for q, (ms, counts) in rows.items():
                    medians[name].setdefault(q, []).append(ms)
                    decisions[name].setdefault(q, set()).add(counts)
    print(f"policy_tick medians (ms) over {args.rounds} rounds of {args.runs} runs, one core")
    print(f"{'queued':>8} {'interpreted':>15} {'compiled':>15} {'ratio':>6} {'same':>5}")
    for q in medians["compiled"]:
        plain_ms, built_ms = medians["interpreted"][q], medians["compiled"][q]
        ratio = statistics.median(built_ms) / statistics.median(plain_ms)
        same = decisions["interpreted"][q] == decisions["compiled"][q] \
            and len(decisions["compiled"][q]) == 1
        print(f"{q:>8} {min(plain_ms):>7.1f}–{max(plain_ms):<7.1f} "
              f"{min(built_ms):>7.1f}–{max(built_ms):<7.1f} {ratio:>6.2f} "
              f"{'yes' if same else 'NO':>5}")


if __name__ == "__main__":
    main()
