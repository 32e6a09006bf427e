"""A report whose connection is cut after it copied the output, before it committed (a
failover in the middle of a job's end): the copy is left behind. However the job then ends,
its output folder holds only the output it names."""

from datetime import timedelta

import pytest
from django.core.files.storage import default_storage
from django.db import OperationalError
from django.utils import timezone

from jobs.models import Attempt, Job
from jobs.services.outputs import output_name
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
    return sorted(default_storage.listdir(output_name(job.pk, ""))[1])


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
