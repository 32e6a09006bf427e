"""Putting a stored checkpoint's tar back into a directory (workers/services/checkpoints.py).

Names stay inside the directory, and nothing but files, directories and links inside it is
made: tarfile's "data" filter decides for every member. Where storage keeps the tar as a
file on a local disk (file system storage), each file's bytes go from the tar to its place
inside the kernel (os.copy_file_range), never through this process, as a plain copy of the
directory goes (bench/checkpoint_copy.py); a file system that shares extents (XFS, btrfs)
may copy no bytes at all. Other storage is read as a stream.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path
from typing import BinaryIO

from django.core.files.storage import FileSystemStorage, default_storage

_CHUNK = 1 << 20  # bytes a read moves where the kernel cannot copy


def unpack_tar(name: str, directory: Path) -> None:
    """Extract the stored tar `name` into `directory`, which exists; raises what storage or
    tarfile raise (a name reaching outside among them)."""
    if not isinstance(default_storage, FileSystemStorage):  # its files are on no local disk
        with default_storage.open(name, "rb") as fh, tarfile.open(fileobj=fh, mode="r|") as tar:
            tar.extractall(directory, filter="data")
        return
    with open(default_storage.path(name), "rb") as src, tarfile.open(fileobj=src,
                                                                     mode="r:") as tar:
        for member in tar:
            _extract(tar, member, src, directory)


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, src: BinaryIO,
             directory: Path) -> None:
    safe = tarfile.data_filter(member, str(directory))  # raises for what "data" refuses
    if not safe.isreg() or safe.issparse():
        tar.extract(member, directory, filter="data")
        return
    target = directory / safe.name
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as dst:
        _copy(src.fileno(), dst.fileno(), member.offset_data, member.size)
    if safe.mode is not None:
        target.chmod(safe.mode)


def _copy(src: int, dst: int, offset: int, size: int) -> None:
    """`size` bytes of `src` from `offset` to where `dst` stands: in the kernel, or by hand
    where it cannot (across file systems on some kernels)."""
    end, kernel = offset + size, True
    while offset < end:
        if kernel:
            try:
                moved = os.copy_file_range(src, dst, end - offset, offset)
            except OSError:
                kernel = False
                continue
        else:
            moved = os.write(dst, os.pread(src, min(_CHUNK, end - offset), offset))
        if moved == 0:
            raise tarfile.ReadError(f"the tar ends inside a file, {end - offset} bytes short")
        offset += moved
