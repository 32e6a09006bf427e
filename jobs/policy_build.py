"""Compile the scheduling policy (`jobs/policy`) to C extensions with mypyc, and check that a
compiled policy was built from the sources beside it.

    python -m jobs.policy_build             build in place (what bin/build-policy runs)
    python -m jobs.policy_build --clean     remove the build: the sources run interpreted
    python -m jobs.policy_build --status

The policy is pure, typed Python (mypy checks it: pyproject.toml, [tool.mypy]); compiled,
the same code makes the same decisions in about two thirds of the time (docs/policy.md,
"Speed"). The compiled modules lie beside their sources and Python imports them instead, so
the build records a digest of the sources, and `jobs.policy` refuses a build whose sources
have changed since: an edited policy never runs as its older build. Standard library only:
`jobs/policy/__init__.py` imports this module, and a build must not need a built policy.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "jobs" / "policy"
RECORD_NAME = "compiled.sha256"  # the digest of the sources a build was made from
GROUP = "jobs.policy._compiled"  # the shared library every compiled module links to
INTERPRETED = frozenset({"__init__.py"})  # runs the check below, so is never compiled
COMPILED_SUFFIXES = (".so", ".pyd")


def sources(directory: Path = POLICY) -> list[Path]:
    """The modules a build compiles."""
    return sorted(p for p in directory.glob("*.py") if p.name not in INTERPRETED)


def compiled_files(directory: Path = POLICY) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix in COMPILED_SUFFIXES)


def digest(directory: Path = POLICY) -> str:
    """sha256 over the compiled modules' names and contents."""
    h = hashlib.sha256()
    for path in sources(directory):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def check_build(directory: Path = POLICY) -> None:
    """Raise ImportError where compiled modules lie beside sources they were not built from."""
    if not compiled_files(directory):
        return
    record = directory / RECORD_NAME
    recorded = record.read_text().strip() if record.exists() else None
    if recorded != digest(directory):
        raise ImportError(
            f"{directory} holds a compiled policy built from other sources: run "
            "bin/build-policy to rebuild it, or bin/build-policy --clean to run the sources"
        )


def running_compiled() -> bool:
    """Whether the imported policy is the compiled one."""
    from jobs.policy import gpusched

    return not str(gpusched.__file__).endswith(".py")


def clean(directory: Path = POLICY) -> None:
    for path in [*compiled_files(directory), directory / RECORD_NAME]:
        path.unlink(missing_ok=True)


def build() -> None:
    """Compile `sources()` in place and record their digest (needs mypy and setuptools:
    the `compile` extra)."""
    from mypyc.build import mypycify
    from setuptools import setup  # type: ignore[import-untyped]

    clean()
    os.chdir(ROOT)  # mypyc names modules by their path from here: jobs/policy/x.py
    paths = [str(p.relative_to(ROOT)) for p in sources()]
    with tempfile.TemporaryDirectory() as tmp:
        setup(
            name="gpusched-policy",
            ext_modules=mypycify(paths, group_name=GROUP, opt_level="3", target_dir=tmp),
            script_args=["--quiet", "build_ext", "--inplace", "--build-temp", tmp],
        )
    (POLICY / RECORD_NAME).write_text(digest() + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clean", action="store_true", help="remove the build")
    ap.add_argument("--status", action="store_true", help="say whether the policy is compiled")
    args = ap.parse_args(argv)
    if args.clean:
        clean()
    elif not args.status:
        build()
    try:
        check_build()
    except ImportError as exc:
        print(f"stale: {exc}", file=sys.stderr)
        return 1
    print(f"policy: {'compiled' if compiled_files() else 'interpreted'} ({POLICY})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
