"""The node agent's calls against a database that does not answer (workers/agent/outages.py):
a cut connection, or one used after it broke, is an outage to ride through; an error in the
query itself is not. Against the real PostgreSQL: its own backend terminated, or the socket
closed under Django. And a report whose copy of the output failed (a full disk) copies it
again, its try kept."""

import pytest
from django.core.files.storage import default_storage
from django.db import ProgrammingError, connection

from jobs.services.outputs import output_folder
from tests.support.database_cuts import cut_own
from tests.support.factories import run_by_agent
from tests.support.storage import FullStorage
from workers.agent.outages import answer_or_none, answer_within_a_lease
from workers.fakegen.video import validate_y4m
from workers.models import Node

pytestmark = pytest.mark.django_db(transaction=True)


def _closed_underneath() -> None:
    """The socket gone under Django (InterfaceError: connection already closed)."""
    connection.ensure_connection()
    connection.connection.close()


@pytest.mark.parametrize("breaks", [cut_own, _closed_underneath])
def test_an_unanswered_call_is_none_and_the_next_one_reconnects(breaks):
    breaks()
    assert answer_or_none(Node.objects.count, "heartbeat", 1) is None
    assert answer_or_none(Node.objects.count, "heartbeat", 1) == 0


@pytest.mark.parametrize("breaks", [cut_own, _closed_underneath])
def test_a_report_is_sent_again_until_the_database_answers(breaks):
    calls = []

    def report() -> int:
        calls.append(1)
        if len(calls) < 3:
            breaks()
        return Node.objects.count()

    assert answer_within_a_lease(report, "report", 1) == 0 and len(calls) == 3


def test_an_error_in_the_query_itself_is_no_outage():
    def wrong() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT no_such_column FROM workers_node")

    with pytest.raises(ProgrammingError):
        answer_or_none(wrong, "heartbeat", 1)


def test_an_output_whose_copy_failed_is_copied_again_and_its_try_kept(alice, agent, settings):
    settings.STORAGES = {**settings.STORAGES, "default": {
        "BACKEND": "tests.support.storage.FullStorage",
        "OPTIONS": {"location": settings.MEDIA_ROOT}}}
    FullStorage.fails = 2
    job = run_by_agent(alice, run_seconds=0.5, progress_interval=0.1)
    assert FullStorage.fails == 0 and job.state == "SUCCEEDED"
    assert list(job.attempts.values_list("outcome", flat=True)) == ["SUCCEEDED"]
    assert validate_y4m(default_storage.path(job.output.name))
    # the two halves went with the job's end
    assert default_storage.listdir(output_folder(job.pk))[1] == [job.output.name.split("/")[-1]]
