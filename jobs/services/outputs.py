"""A job's output, handed only to its own organization: through the API with one of its keys,
or the dashboard to one of its members. Storage paths are never published, since they name
the job and could be guessed. Outputs are kept GPUSCHED_OUTPUT_RETENTION_DAYS after the job
ends, then deleted (a video a client never fetched would fill the store); the job keeps its
end, its result says when its output went. Each job's outputs go to a folder of its own
(services/output_strays.py clears it of what the job does not name)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import PurePosixPath

from django.conf import settings
from django.core.files.storage import default_storage
from django.db import transaction
from django.http import FileResponse, HttpResponse, JsonResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header

from jobs.models import Job
from jobs.services.byte_ranges import UNSATISFIABLE, byte_range, chunks
from jobs.services.errors import ServiceError, StorageUnavailable

log = logging.getLogger(__name__)
EXPIRE_BATCH = 500  # outputs deleted per sweep at most: a sweep stays short, the next goes on
FOLDER = "outputs"


class OutputMissing(ServiceError):
    code = "output_missing"
    status = 410


def output_folder(job_id: int) -> str:
    """The job's folder in storage: its outputs, and nothing of another job's."""
    return f"{FOLDER}/job-{job_id}"


def output_name(job_id: int, filename: str) -> str:
    """Where in storage a job's output named `filename` is copied (storage may change the
    name's end to make it unique)."""
    return f"{output_folder(job_id)}/{filename}"


def output_path(job: Job) -> str | None:
    """Where the organization's clients fetch the output (with their API key)."""
    return f"/api/v1/jobs/{job.pk}/output" if job.output else None


def output_response(job: Job, headers: Mapping[str, str] | None = None
                    ) -> HttpResponse | None:
    """The output as a download, or None if the job has none. A request's `Range` (one range
    of bytes) gets that part (206), so a client cut off halfway through a large video resumes
    where it stopped; with `If-Range`, only while the output is still the one its ETag names
    (else the whole, 200)."""
    if not job.output:
        return None
    size = _opened(job)
    try:
        return _download(job, headers or {}, size)
    except BaseException:  # no response took the open file: it is ours to close
        job.output.close()
        raise


def _download(job: Job, headers: Mapping[str, str], size: int) -> HttpResponse:
    name = PurePosixPath(job.output.name).name
    etag = f'"{job.pk}-{size}"'  # an output is written once, at the job's end
    same = headers.get("If-Range", etag) == etag  # resuming another file: it gets the whole
    asked = byte_range(headers.get("Range"), size) if same else None
    if asked is None:
        response: HttpResponse = FileResponse(job.output, as_attachment=True, filename=name)
    elif asked == UNSATISFIABLE:
        job.output.close()
        response = JsonResponse({"error": {
            "code": "range_not_satisfiable",
            "message": f"the output has {size} bytes; the range asked starts past them"}},
            status=416)
        response["Content-Range"] = f"bytes */{size}"
    else:
        response = _part(job, *asked, size=size, name=name)
    response["Accept-Ranges"] = "bytes"
    response["ETag"] = etag
    return response


def _opened(job: Job) -> int:
    """Open the job's output; its size. A file storage does not hold is lost (410); storage
    that did not answer holds it still (503, try again)."""
    try:
        job.output.open("rb")
        return job.output.size
    except OSError as exc:
        job.output.close()
        if not isinstance(exc, FileNotFoundError):
            log.warning("output %s could not be read", job.output.name, exc_info=True)
            raise StorageUnavailable("storage did not give the output; ask again shortly"
                                     ) from exc
        log.error("job %s names output %s, which storage does not hold", job.pk,
                  job.output.name)
        raise OutputMissing(f"job {job.pk}'s output is missing from storage: it was "
                            "lost, and no try of the job will make it again") from exc


def _part(job: Job, first: int, last: int, *, size: int, name: str) -> HttpResponse:
    response = StreamingHttpResponse(chunks(job.output, first, last), status=206,
                                     content_type="application/octet-stream")
    response["Content-Range"] = f"bytes {first}-{last}/{size}"
    response["Content-Length"] = str(last - first + 1)
    response["Content-Disposition"] = content_disposition_header(True, name)
    return response


def output_expired(job: Job) -> str | None:
    """Why the job's output is gone, if it expired."""
    at = job.result.get("output_expired_at")
    return f"the output was deleted at {at}, past its retention after the job ended" if (
        at) else None


def expire_outputs(*, now: datetime) -> int:
    """Delete the outputs of jobs that ended more than the retention ago; returns how many.
    The job forgets its output before the file goes: a failed delete leaves a file no job
    names, never a job naming a file that is gone."""
    days = settings.GPUSCHED_OUTPUT_RETENTION_DAYS
    if days <= 0:
        return 0
    old = Job.objects.filter(finished_at__lt=now - timedelta(days=days)).exclude(output="")
    expired = 0
    for job_id, name, result in old.values_list("pk", "output", "result")[:EXPIRE_BATCH]:
        with transaction.atomic():
            if not Job.objects.filter(pk=job_id, output=name).update(
                    output="", result={**result, "output_expired_at": now.isoformat()}):
                continue
            transaction.on_commit(lambda name=name: output_delete(name))
        expired += 1
    return expired


def output_delete(name: str) -> None:
    """Delete a stored output; a failure is logged, not raised (nothing names it any more)."""
    try:
        default_storage.delete(name)
    except OSError:
        log.exception("deleting output %s", name)
