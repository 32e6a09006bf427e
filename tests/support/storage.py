"""File storages for tests: one that runs a probe while it saves, to see what is locked
meanwhile; one whose disk is full for a while; one that does not answer for a while; one
that will not delete some files."""

from __future__ import annotations

import errno
import threading

from django.core.files.storage import FileSystemStorage, InMemoryStorage
from django.db import connection


class ProbingStorage(FileSystemStorage):
    probe = None  # a callable run in another thread (its own connection) during each save
    results: list = []

    def _save(self, name, content):
        if ProbingStorage.probe is not None:
            def run():
                try:
                    ProbingStorage.results.append(ProbingStorage.probe())
                finally:
                    connection.close()

            thread = threading.Thread(target=run)
            thread.start()
            thread.join()
        return super()._save(name, content)


class FullStorage(FileSystemStorage):
    """A file storage whose disk is full for its first `fails` saves of outputs; it leaves
    what it wrote before it filled, as a real one does."""
    fails = 0

    def _save(self, name, content):
        if name.startswith("outputs/") and FullStorage.fails > 0:
            FullStorage.fails -= 1
            with self.open(name, "wb") as half:  # what a write that ran out of room left
                half.write(content.read(4))
            raise OSError(errno.ENOSPC, "No space left on device", name)
        return super()._save(name, content)


class AwayStorage(InMemoryStorage):
    """Object storage (no local path) that does not answer its first `fails` reads; counts
    every read."""
    fails = 0
    reads = 0

    def _open(self, name, mode="rb"):
        AwayStorage.reads += 1
        if AwayStorage.fails > 0:
            AwayStorage.fails -= 1
            raise ConnectionRefusedError(errno.ECONNREFUSED, "the storage did not answer")
        return super()._open(name, mode)


class StubbornStorage(FileSystemStorage):
    """A file storage that refuses to delete the files named in `kept`, as a shared file
    system refuses a file of another owner."""
    kept: set[str] = set()

    def delete(self, name):
        if name in StubbornStorage.kept:
            raise PermissionError(errno.EACCES, "Permission denied", name)
        return super().delete(name)
