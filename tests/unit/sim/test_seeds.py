"""bench/seeds.py: the acceptance figures a seed a row, misses marked, and how many seeds meet."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LIMITS = {"ent p95 s": (30, "max"), "util %": (97, "min"), "loss %": (2, "max"),
          "Jain ent": (0.95, "min"), "Jain paid": (0.95, "min"), "Jain free": (0.95, "min")}


def _rows(*args: str) -> dict[str, dict[str, str]]:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "seeds.py"), "--nodes", "8",
                          "--horizon", "600", "--load", "2", "--seeds", "1-2", *args],
                         capture_output=True, text=True, check=True, timeout=180).stdout
    lines = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    return {cells[0]: dict(zip(head[1:], cells[1:], strict=True))
            for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[1:])}


def test_a_row_per_seed_each_miss_marked_and_counted():
    rows = _rows()
    assert list(rows) == ["1", "2", "mean", "met"]
    marked = 0
    for name, (limit, kind) in LIMITS.items():
        met = seen = 0
        for seed in ("1", "2"):
            text = rows[seed][name]
            if text == "n/a":  # a tier with no organization waiting has no index
                continue
            value = float(text.rstrip("*"))
            meets = value <= limit if kind == "max" else value >= limit
            assert text.endswith("*") is not meets, (name, seed, text)
            met, seen, marked = met + meets, seen + 1, marked + (not meets)
        assert rows["met"][name] == (f"{met}/{seen}" if seen else "-")
    assert marked > 0  # the small fleet misses some targets: the marks were tested both ways
    assert rows["met"]["free max min"] == "-"  # reported, no target
    # paid's 5 minutes are a target up to load 1.5 only (this run is at 2)
    assert not any(rows[s]["paid p95 min"].endswith("*") for s in ("1", "2"))
    assert rows["met"]["paid p95 min"] == "-"


def test_a_bad_override_stops_before_any_run():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "seeds.py"),
                          "--set", "no_such_field=1"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "no_such_field" in out.stderr
