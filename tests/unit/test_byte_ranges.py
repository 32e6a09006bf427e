"""The one byte range a Range header asks of a file, as RFC 9110 reads it."""

import io

import pytest

from jobs.services.byte_ranges import UNSATISFIABLE, byte_range, chunks


@pytest.mark.parametrize("header, size, expected", [
    (None, 10, None),
    ("bytes=0-0", 10, (0, 0)),
    ("bytes=2-5", 10, (2, 5)),
    ("bytes=2-", 10, (2, 9)),
    ("bytes=8-20", 10, (8, 9)),
    ("bytes=-3", 10, (7, 9)),
    ("bytes=-30", 10, (0, 9)),  # more than there is: all of it
    ("bytes = 2 - 5", 10, (2, 5)),
    ("bytes=10-", 10, UNSATISFIABLE),
    ("bytes=-0", 10, UNSATISFIABLE),
    ("bytes=0-", 0, UNSATISFIABLE),
    ("bytes=-", 10, None),
    ("bytes=5-2", 10, None),
    ("bytes=0-1,4-5", 10, None),
    ("bytes=a-b", 10, None),
    ("items=0-1", 10, None),
    ("bytes=" + "9" * 19 + "-", 10, UNSATISFIABLE),
    ("bytes=" + "9" * 4301 + "-", 10, None),  # past any file, and past what int() reads
    ("bytes=-" + "9" * 20, 10, None),
])
def test_a_range_is_read_as_the_rfc_says(header, size, expected):
    assert byte_range(header, size) == expected


def test_the_chunks_are_the_bytes_asked_and_the_file_is_closed(monkeypatch):
    monkeypatch.setattr("jobs.services.byte_ranges.CHUNK", 3)
    data = io.BytesIO(bytes(range(20)))
    assert b"".join(chunks(data, 4, 13)) == bytes(range(4, 14))
    assert data.closed
