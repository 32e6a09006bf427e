"""bench/tier_tail.py: a tier's late jobs, counted by gang size and by organization."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _run(*args: str) -> str:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "tier_tail.py"), "--nodes", "4",
                          "--horizon", "300", "--load", "2", "--seed", "1", *args],
                         capture_output=True, text=True, check=True, timeout=120)
    return out.stdout


def test_late_jobs_add_up_by_size_and_by_org():
    out = _run("--late", "60")
    late = int(re.search(r"later than 60 s: (\d+) jobs", out).group(1))
    by_size = re.search(r"by GPUs: (.*)", out).group(1)
    sizes = [(int(a), int(b)) for a, b in re.findall(r"\d+: (\d+) of (\d+)", by_size)]
    assert late > 0
    assert sum(a for a, _ in sizes) == late
    assert all(a <= b for a, b in sizes)
    top = re.findall(r"^  (\S+): (\d+) late of (\d+) jobs", out, re.M)
    counts = [int(n) for _, n, _ in top]
    assert counts == sorted(counts, reverse=True) and sum(counts) <= late
    assert f"tier p95 without {top[0][0]}:" in out


def test_the_default_threshold_is_the_tier_start_slo():
    assert "later than 3600 s:" in _run("--of", "free")
