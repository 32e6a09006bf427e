"""A file storage that runs a probe while it saves, to see what is locked meanwhile."""

from __future__ import annotations

import threading

from django.core.files.storage import FileSystemStorage
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
