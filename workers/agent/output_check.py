"""Whether a try's output is one the job's owner may be given: a whole file, where the agent
told the binary to put it (workers/agent/runner.py judges the try by it)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings


def output_ok(path: Path) -> bool:
    """A non-empty file at `path`, reached through no link; a video that is whole."""
    if not _where_put(path) or not path.is_file() or path.stat().st_size == 0:
        return False
    if path.suffix == ".y4m":
        from workers.fakegen.video import validate_y4m

        return validate_y4m(path)
    return True


def _where_put(path: Path) -> bool:
    """Whether the output is where the agent told the binary to put it: not a link, nor
    under one (a work directory the binary made one). Either could lead to a file of no
    try's (another job's output, the node's own files) that the job's owner would get."""
    root = Path(settings.GPUSCHED_WORK_ROOT)
    try:
        return not path.is_symlink() and path.resolve() == root.resolve() / path.relative_to(
            root)
    except (OSError, RuntimeError, ValueError):  # a loop of links: RuntimeError before 3.13
        return False
