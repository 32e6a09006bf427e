"""YUV4MPEG2 (.y4m) writing and validation.

Y4M is the simplest real video container: a text header line, then per frame a
``FRAME`` line followed by raw planar YUV bytes. Any video tool (ffmpeg, mpv) can
read it, and it can be validated byte-exactly without third-party libraries.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MAGIC = b"YUV4MPEG2"
FRAME_TAG = b"FRAME"
# A header line longer than this is garbage, not a y4m header.
MAX_HEADER_BYTES = 4096
_CHUNK = 1 << 20

# Bytes per pixel of the two chroma planes relative to the luma plane, per colour space.
_CHROMA_FACTORS = {
    "420jpeg": (2, 2),
    "420paldv": (2, 2),
    "420mpeg2": (2, 2),
    "420": (2, 2),
    "422": (2, 1),
    "444": (1, 1),
}


@dataclass(frozen=True)
class Y4mInfo:
    """What :func:`read_y4m_info` learned about a well-formed file."""

    width: int
    height: int
    fps: str
    colorspace: str
    frames: int


def render_y4m(prompt: str, seed: int, width: int, height: int, fps: int, frames: int) -> bytes:
    """Return a complete y4m video that depends only on the arguments.

    Content is a background colour plus a vertical bar sweeping across the frame; colours and
    bar width come from a hash of prompt+seed, so the same inputs give byte-identical output.
    """
    if width <= 0 or height <= 0 or width % 2 or height % 2:
        raise ValueError("width and height must be positive and even (4:2:0 chroma)")
    if fps <= 0 or frames <= 0:
        raise ValueError("fps and frames must be positive")
    digest = hashlib.sha256(f"{seed}\0{prompt}".encode()).digest()
    header = f"YUV4MPEG2 W{width} H{height} F{fps}:1 Ip A1:1 C420jpeg\n".encode()
    parts = [header]
    for index in range(frames):
        parts.append(FRAME_TAG + b"\n")
        parts.append(_render_frame(digest, width, height, index, frames))
    return b"".join(parts)


def _render_frame(digest: bytes, width: int, height: int, index: int, frames: int) -> bytes:
    bg_y, bg_u, bg_v, bar_y, bar_u, bar_v = digest[:6]
    # Keep the bar visible against the background even when the hash picks similar lumas.
    bar_y = (bg_y + 64 + bar_y % 128) % 256
    bar_width = max(2, (width * (1 + digest[6] % 4)) // 16) & ~1
    bar_x = ((width - bar_width) * index // max(1, frames - 1)) & ~1
    luma_row = _row(width, bar_x, bar_width, bg_y, bar_y)
    cw, ch = width // 2, height // 2
    u_row = _row(cw, bar_x // 2, bar_width // 2, bg_u, bar_u)
    v_row = _row(cw, bar_x // 2, bar_width // 2, bg_v, bar_v)
    return luma_row * height + u_row * ch + v_row * ch


def _row(length: int, start: int, span: int, background: int, value: int) -> bytes:
    span = min(span, length - start)
    tail = length - start - span
    return bytes([background]) * start + bytes([value]) * span + bytes([background]) * tail


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` so that ``path`` either holds all of it or is untouched.

    The temp file lives next to the target so the final rename never crosses filesystems.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_y4m_info(path: str | os.PathLike[str]) -> Y4mInfo:
    """Parse and fully check a y4m file; raise ``ValueError`` describing the first defect."""
    with open(path, "rb") as handle:
        header = _read_line(handle, "stream header")
        width, height, fps, colorspace = _parse_header(header)
        frame_bytes = _frame_size(width, height, colorspace)
        frames = 0
        while True:
            first = handle.read(1)
            if not first:
                break
            line = first + _read_line(handle, f"frame {frames} header")
            if not line.startswith(FRAME_TAG):
                raise ValueError(f"frame {frames}: expected FRAME marker, got {line[:16]!r}")
            _skip_exact(handle, frame_bytes, frames)
            frames += 1
    if frames == 0:
        raise ValueError("no frames")
    return Y4mInfo(width, height, fps, colorspace, frames)


def validate_y4m(path: str | os.PathLike[str]) -> bool:
    """True if ``path`` is a complete, well-formed y4m file with at least one frame."""
    try:
        read_y4m_info(path)
    except (OSError, ValueError):
        return False
    return True


def _read_line(handle: BinaryIO, what: str) -> bytes:
    line = handle.readline(MAX_HEADER_BYTES)
    if not line.endswith(b"\n"):
        raise ValueError(f"{what}: missing or overlong line")
    return line[:-1]


def _parse_header(header: bytes) -> tuple[int, int, str, str]:
    tokens = header.split(b" ")
    if tokens[0] != MAGIC:
        raise ValueError("not a YUV4MPEG2 stream")
    fields = {
        tok[:1].decode("ascii", "replace"): tok[1:].decode("ascii", "replace")
        for tok in tokens[1:]
        if tok
    }
    try:
        width, height = int(fields["W"]), int(fields["H"])
    except (KeyError, ValueError) as exc:
        raise ValueError("header lacks valid W/H") from exc
    fps = fields.get("F", "")
    num, _, den = fps.partition(":")
    if not (num.isdigit() and den.isdigit() and int(num) > 0 and int(den) > 0):
        raise ValueError(f"bad frame rate {fps!r}")
    if width <= 0 or height <= 0:
        raise ValueError("non-positive dimensions")
    return width, height, fps, fields.get("C", "420jpeg")


def _frame_size(width: int, height: int, colorspace: str) -> int:
    if colorspace == "mono":
        return width * height
    try:
        fx, fy = _CHROMA_FACTORS[colorspace]
    except KeyError as exc:
        raise ValueError(f"unsupported colourspace {colorspace!r}") from exc
    chroma = -(-width // fx) * -(-height // fy)
    return width * height + 2 * chroma


def _skip_exact(handle: BinaryIO, count: int, frame: int) -> None:
    remaining = count
    while remaining:
        chunk = handle.read(min(remaining, _CHUNK))
        if not chunk:
            raise ValueError(f"frame {frame}: truncated ({count - remaining}/{count} bytes)")
        remaining -= len(chunk)
