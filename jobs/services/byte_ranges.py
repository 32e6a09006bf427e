"""One byte range of a file, as HTTP's Range and If-Range ask for it (RFC 9110, 14): what a
client resuming a large download after a cut asks for, instead of the whole file again."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

# at most 19 digits: any file size fits, and int() never refuses them; more is unreadable
_ONE_RANGE = re.compile(r"bytes=([0-9]{0,19})-([0-9]{0,19})")
UNSATISFIABLE = (-1, -1)
CHUNK = 1 << 20


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """(first, last) byte of the one range `header` asks of a file of `size` bytes;
    UNSATISFIABLE when it starts past the end; None for the whole file (no header, several
    ranges, or one that cannot be read: a server may answer those whole)."""
    match = _ONE_RANGE.fullmatch((header or "").replace(" ", ""))
    if match is None or match.groups() == ("", ""):
        return None
    first, last = match.groups()
    if not first:  # the last `last` bytes
        return (max(0, size - int(last)), size - 1) if int(last) and size else UNSATISFIABLE
    if int(first) >= size:
        return UNSATISFIABLE
    end = size - 1 if not last else min(int(last), size - 1)
    return (int(first), end) if end >= int(first) else None


def chunks(file: BinaryIO, first: int, last: int) -> Iterator[bytes]:
    """The bytes first..last of `file`, a chunk at a time; the file is closed at the end."""
    with file:
        file.seek(first)
        left = last - first + 1
        while left > 0:
            chunk = file.read(min(CHUNK, left))
            if not chunk:
                return
            left -= len(chunk)
            yield chunk
