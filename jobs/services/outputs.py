"""A job's output, handed only to its own organization: through the API with one of its keys,
or the dashboard to one of its members. Storage paths are never published, since they name
the job and could be guessed."""

from __future__ import annotations

from pathlib import PurePosixPath

from django.http import FileResponse

from jobs.models import Job


def output_path(job: Job) -> str | None:
    """Where the organization's clients fetch the output (with their API key)."""
    return f"/api/v1/jobs/{job.pk}/output" if job.output else None


def output_response(job: Job) -> FileResponse | None:
    """The output as a download, or None if the job has none."""
    if not job.output:
        return None
    return FileResponse(job.output.open("rb"), as_attachment=True,
                        filename=PurePosixPath(job.output.name).name)
