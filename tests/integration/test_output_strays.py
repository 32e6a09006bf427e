"""A report whose connection is cut after it copied the output, before it committed (a
failover in the middle of a job's end): the copy is left behind. However the job then ends,
its output folder holds only the output it names (jobs/services/output_strays.py); the
sweep clears the folders of jobs that ended before that, and leaves live jobs' alone."""

from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.db import OperationalError
from django.utils import timezone

from jobs.models import Attempt, Job
from jobs.services.outputs import output_folder, output_name
from tests.support.database_cuts import cut, own_pid
from tests.support.factories import VIDEO, make_job, make_node, run_to_success, start_placed
from tests.support.storage import ProbingStorage
from workers.agent.outages import answer_within_a_lease
from workers.services.attempts import AttemptResult, attempt_finish
from workers.services.reaper import reap_expired_attempts, release_due_retries

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cut_at_the_copy(settings, tmp_path):
    """Storage that, while it saves, cuts the saving thread's connection the first time."""
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "tests.support.storage.ProbingStorage",
        "OPTIONS": {"location": str(tmp_path / "media")}}}
    pids = [own_pid()]
    ProbingStorage.probe, ProbingStorage.results = lambda: pids and cut(pids.pop()), []
    yield
    ProbingStorage.probe = None


def _folder(job: Job) -> list[str]:
    return sorted(default_storage.listdir(output_folder(job.pk))[1])


def _report(attempt: Attempt, workdir) -> Job:
    made = workdir / "out.y4m"
    made.write_bytes(VIDEO)
    return attempt_finish(attempt_id=attempt.pk, token=attempt.token,
                          result=AttemptResult("SUCCEEDED", 0, output_path=made))


def test_a_report_sent_again_after_a_cut_leaves_one_copy(alice, tmp_path, cut_at_the_copy):
    make_node("n1", gpus=1)
    job = make_job(alice)
    attempt = start_placed(job)
    job = answer_within_a_lease(lambda: _report(attempt, tmp_path), "report", attempt.pk)
    assert len(ProbingStorage.results) == 2  # copied twice: the first report was cut off
    assert job.state == "SUCCEEDED"
    kept = Job.objects.get(pk=job.pk).output
    assert _folder(job) == [kept.name.rsplit("/", 1)[1]]
    assert kept.read() == VIDEO


def test_the_copy_of_a_try_lost_after_its_cut_goes_when_the_job_ends(alice, tmp_path,
                                                                   cut_at_the_copy):
    make_node("n1", gpus=1)
    job = make_job(alice)
    attempt = start_placed(job)
    with pytest.raises(OperationalError):
        _report(attempt, tmp_path)  # and the node went with it: nothing sends it again
    from django.db import connection

    connection.close()
    assert len(_folder(job)) == 1 and Job.objects.get(pk=job.pk).output.name == ""
    later = timezone.now() + timedelta(hours=1)
    assert reap_expired_attempts(now=later) == 1
    assert release_due_retries(now=later + timedelta(hours=1)) == 1
    again = tmp_path / "again"
    again.mkdir()
    job = run_to_success(Job.objects.get(pk=job.pk), again)
    assert Attempt.objects.filter(job=job).count() == 2
    assert _folder(job) == [job.output.name.rsplit("/", 1)[1]]


def _stray(job_id: int, name: str) -> str:
    return default_storage.save(output_name(job_id, name), ContentFile(b"half a video"))


def test_the_sweep_deletes_what_ended_jobs_do_not_name_and_only_that(alice, tmp_path,
                                                                     capsys):
    make_node("n1", gpus=1)
    ended = run_to_success(make_job(alice), tmp_path)
    strays = [_stray(ended.pk, "out.y4m"), _stray(ended.pk + 1000, "out.y4m")]  # and one gone
    live = make_job(alice)
    start_placed(live)
    copying = _stray(live.pk, "out.y4m")  # its report may not have committed yet
    default_storage.save("outputs/notes.txt", ContentFile(b"an operator's"))
    call_command("outputs_sweep", "--dry-run")
    *listed, said, _ = capsys.readouterr().out.split("\n")
    assert sorted(listed) == sorted(strays) and said == "would delete 2 file(s) no job names"
    assert all(default_storage.exists(name) for name in strays)
    call_command("outputs_sweep")
    assert not any(default_storage.exists(name) for name in strays)
    assert default_storage.exists(copying) and default_storage.exists("outputs/notes.txt")
    assert Job.objects.get(pk=ended.pk).output.read() == VIDEO
