"""A compiled policy runs only where it was built from the sources beside it."""

from pathlib import Path

import pytest

from jobs import policy_build
from jobs.policy_build import RECORD_NAME, check_build, clean, digest


def _package(tmp_path: Path) -> Path:
    pkg = tmp_path / "policy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from jobs.policy_build import check_build\n")
    (pkg / "ranking.py").write_text("def rank(job):\n    return job.wait\n")
    return pkg


def _built(pkg: Path) -> Path:
    """What a build leaves: a compiled module and the record of its sources' digest."""
    (pkg / "ranking.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (pkg / RECORD_NAME).write_text(digest(pkg) + "\n")
    return pkg


def test_sources_run_interpreted_without_a_build(tmp_path):
    check_build(_package(tmp_path))


def test_a_build_of_these_sources_runs(tmp_path):
    check_build(_built(_package(tmp_path)))


def test_a_build_of_other_sources_is_refused(tmp_path):
    pkg = _built(_package(tmp_path))
    (pkg / "ranking.py").write_text("def rank(job):\n    return -job.wait\n")
    with pytest.raises(ImportError, match="bin/build-policy"):
        check_build(pkg)


def test_a_module_added_after_the_build_is_refused(tmp_path):
    pkg = _built(_package(tmp_path))
    (pkg / "shares.py").write_text("SHARE = 1\n")
    with pytest.raises(ImportError):
        check_build(pkg)


def test_compiled_modules_without_a_record_are_refused(tmp_path):
    pkg = _built(_package(tmp_path))
    (pkg / RECORD_NAME).unlink()
    with pytest.raises(ImportError):
        check_build(pkg)


def test_the_package_module_is_not_compiled(tmp_path):
    """__init__ runs the check, so editing it never makes a build stale, and it is never
    one of the modules a build compiles."""
    pkg = _built(_package(tmp_path))
    assert [p.name for p in policy_build.sources(pkg)] == ["ranking.py"]
    (pkg / "__init__.py").write_text("# edited\n")
    check_build(pkg)


def test_clean_leaves_the_sources(tmp_path):
    pkg = _built(_package(tmp_path))
    clean(pkg)
    assert sorted(p.name for p in pkg.iterdir()) == ["__init__.py", "ranking.py"]
    check_build(pkg)
