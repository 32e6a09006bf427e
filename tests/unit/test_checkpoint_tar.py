"""A stored tar's file bytes go to their place in the kernel, or by hand where it cannot."""

import os
import tarfile
import tempfile
from pathlib import Path

import pytest

from workers.services.checkpoint_tar import _copy

DATA = os.urandom(3 << 20)  # more than one chunk of the copy by hand


def _copied(src_dir: Path, dst: Path, size: int = len(DATA)) -> bytes:
    with tempfile.NamedTemporaryFile(dir=src_dir) as src, dst.open("wb") as out:
        src.write(b"header" + DATA)
        src.flush()
        _copy(src.fileno(), out.fileno(), 6, size)
    return dst.read_bytes()


def test_a_files_bytes_arrive_whole_on_the_same_file_system(tmp_path):
    assert _copied(tmp_path, tmp_path / "out") == DATA


def test_a_files_bytes_arrive_whole_across_file_systems(tmp_path):
    """tmpfs to the test's disk: kernels since 5.19 refuse to copy across them (EXDEV), and
    the bytes go by hand."""
    if not Path("/dev/shm").is_dir():
        pytest.skip("no tmpfs at /dev/shm")
    assert _copied(Path("/dev/shm"), tmp_path / "out") == DATA


def test_a_tar_that_ends_inside_a_file_is_refused(tmp_path):
    with pytest.raises(tarfile.ReadError):
        _copied(tmp_path, tmp_path / "out", size=len(DATA) + 1)
