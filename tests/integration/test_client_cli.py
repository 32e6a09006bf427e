"""`gpusched`, the client's command line, against the service over real HTTP."""

import json
import subprocess
import sys

import pytest

from gpusched_client.cli import main
from jobs.models import Job
from jobs.scheduler.tick import scheduler_tick_run
from tests.support.factories import VIDEO, make_member, make_node, run_to_success
from tests.support.processes import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shell(live_server, alice, monkeypatch, capsys, clean_cache):
    """Runs `gpusched ARGS` as the shell would: (exit status, stdout, stderr)."""
    monkeypatch.setenv("GPUSCHED_URL", live_server.url)
    monkeypatch.setenv("GPUSCHED_API_KEY", alice.raw_key)

    def run(*args: str) -> tuple[int, str, str]:
        status = main(args)
        out, err = capsys.readouterr()
        return status, out, err
    return run


def test_a_job_is_submitted_found_held_released_and_cancelled(shell):
    status, out, _ = shell("submit", "a fox", "--gpus", "2", "--label", "run:7",
                           "--param", "expected_duration_s=90", "--param", "style=noir")
    job = Job.objects.get(pk=json.loads(out)["id"])
    assert status == 0 and job.gpus == 2 and job.labels == {"run": "7"}
    assert job.params == {"expected_duration_s": 90, "style": "noir"}
    status, out, _ = shell("list", "--label", "run:7")
    assert status == 0 and [j["id"] for j in json.loads(out)] == [job.pk]
    assert json.loads(shell("summary", "--label", "run:7")[1])["states"] == {"QUEUED": 1}
    usage = json.loads(shell("usage", "--label", "run:7")[1])
    assert (usage["spent"], usage["gpu_hours"]) == (0, 0)  # it has not run yet
    status, _, err = shell("usage", "--month", "26-13")
    assert status == 2 and "400 " in err
    status, out, _ = shell("submit", "stitch", "--after", str(job.pk), "--after-end")
    stitch = Job.objects.get(pk=json.loads(out)["id"])
    assert (stitch.state, stitch.after_mode) == ("HELD", "ended")
    shell("cancel", str(stitch.pk))
    assert json.loads(shell("hold", str(job.pk))[1])["state"] == "HELD"
    assert json.loads(shell("release", str(job.pk))[1])["state"] == "QUEUED"
    assert json.loads(shell("show", str(job.pk))[1])["state"] == "QUEUED"
    assert json.loads(shell("queue")[1])["waiting"] == 1
    assert json.loads(shell("credits")[1])["held"] == 0
    assert [k["name"] for k in json.loads(shell("keys")[1])] == ["ci"]
    assert json.loads(shell("audit")[1]) == []  # nothing changed in the organization yet
    status, out, _ = shell("cancel", str(job.pk))
    assert status == 0 and json.loads(out)["state"] == "CANCELLED"
    moves = [(e["from_state"], e["to_state"]) for e in json.loads(shell("history",
                                                                        str(job.pk))[1])]
    assert moves == [("QUEUED", "CANCELLED"), ("HELD", "QUEUED"), ("QUEUED", "HELD"),
                     ("", "QUEUED")]  # newest first
    status, out, _ = shell("wait", str(job.pk))  # ended, but not as it was asked to
    assert status == 1 and json.loads(out)["state"] == "CANCELLED"


def test_a_refusal_exits_2_and_names_its_code(shell):
    status, out, err = shell("submit", "a fox", "--gpus", "65")
    assert (status, out) == (2, "") and err.startswith("error: 400 ")
    assert not Job.objects.exists()
    status, _, err = shell("show", "999999")
    assert status == 2 and "404 not_found" in err
    assert shell("submit", "a fox", "--param", "=1")[0] == 2  # the shell's own mistake
    status, out, err = shell("wait", str(_queued(shell)), "--timeout", "0.2")
    assert status == 3 and json.loads(out)["state"] == "QUEUED" and "still QUEUED" in err


def _queued(shell, *options: str) -> int:
    return json.loads(shell("submit", "a hare", *options)[1])["id"]


def test_a_finished_job_s_output_and_log_are_saved(shell, alice, tmp_path):
    make_node("n1", gpus=1)
    job = _queued(shell)
    run_to_success(Job.objects.get(pk=job), tmp_path)
    assert shell("wait", str(job))[0] == 0
    status, out, _ = shell("output", str(job), str(tmp_path / "saved.y4m"))
    assert status == 0 and (tmp_path / "saved.y4m").read_bytes() == VIDEO
    status, _, err = shell("output", "999999", str(tmp_path / "none.y4m"))
    assert status == 2 and "404" in err
    assert not [p for p in tmp_path.iterdir() if "none" in p.name]  # nor a part of it
    assert shell("log", str(job)) == (0, "", "")  # nothing was published for this try


def test_the_module_runs_as_a_command(live_server, alice):
    env = {"PATH": "/usr/bin:/bin", "GPUSCHED_URL": live_server.url,
           "GPUSCHED_API_KEY": alice.raw_key}
    done = subprocess.run([sys.executable, "-m", "gpusched_client", "submit", "a fox"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert Job.objects.get().pk == json.loads(done.stdout)["id"]


def test_a_file_of_jobs_is_submitted_and_again_makes_none(shell, tmp_path):
    lines = tmp_path / "jobs.jsonl"
    lines.write_text("".join(json.dumps({"prompt": f"frame {i}", "labels": {"shot": str(i)}})
                             + "\n" for i in range(3)))
    status, out, _ = shell("batch", str(lines), "--idempotency-key", "shots")
    assert status == 0 and [j["id"] for j in json.loads(out)] == sorted(
        Job.objects.values_list("pk", flat=True))
    assert shell("batch", str(lines), "--idempotency-key", "shots")[1] == out
    lines.write_text('{"prompt": "a fox"}\nnot json\n')
    assert shell("batch", str(lines))[0] == 2 and Job.objects.count() == 3


def test_jobs_are_held_released_cancelled_and_erased_by_their_labels(shell, alice):
    from credits.models import GpuPrice
    from credits.services.grants import credits_grant

    GpuPrice.objects.create(gpu_type="H100", credits_per_gpu_hour=3600)  # 1 credit a second
    credits_grant(organization=alice, amount=1200)
    batch = [_queued(shell, "--label", "batch:b7", "--time-limit", "600") for _ in range(2)]
    status, out, _ = shell("hold", "--label", "batch:b7")
    assert status == 0 and json.loads(out) == {"held": batch, "stopping": [], "left": 0}
    other = _queued(shell, "--time-limit", "1200")  # takes the credits the batch gave back
    status, out, err = shell("release", "--label", "batch:b7")
    answer = json.loads(out)
    assert (status, answer["released"], answer["refused"]["code"]) == (
        2, [], "insufficient_credits")
    assert "402 insufficient_credits" in err
    assert set(Job.objects.filter(pk__in=batch).values_list("state", flat=True)) == {"HELD"}
    shell("cancel", str(other))
    status, out, _ = shell("release", "--label", "batch:b7")
    assert status == 0 and json.loads(out) == {"released": batch, "left": 0, "refused": None}
    status, out, _ = shell("cancel", "--label", "batch:b7")
    assert status == 0 and json.loads(out)["cancelled"] == batch
    assert shell("cancel")[0] == 2 and shell("cancel", str(other), "--label", "b")[0] == 2
    status, _, err = shell("erase", "--label", "batch:b7")
    assert status == 2 and "--yes" in err and Job.objects.get(pk=batch[0]).prompt
    status, out, _ = shell("erase", "--label", "batch:b7", "--yes")
    assert status == 0 and json.loads(out) == {"erased": batch, "left": 0, "not_ended": 0}
    status, out, _ = shell("erase", str(other), "--yes")
    assert status == 0 and json.loads(out)["erased_at"]


def test_a_waiting_job_takes_the_relaxation_it_is_offered(shell):
    make_node("h", gpus=4)
    make_node("a", gpus=8, gpu_type="A100")
    shell("submit", "a heron", "--gpus", "4", "--gpu-type", "H100")
    scheduler_tick_run()  # it takes the only H100 node
    blocked = _queued(shell, "--gpus", "4", "--gpu-type", "H100")
    assert shell("relax", str(blocked))[0] == 1  # no round has looked at it yet
    scheduler_tick_run()
    status, out, _ = shell("relax", str(blocked))
    assert status == 0 and json.loads(out)["gpu_types"] == ["H100", "A100"]
    status, out, _ = shell("amend", str(blocked), "--gpus", "2", "--urgency", "60")
    assert status == 0 and Job.objects.get(pk=blocked).gpus == 2
    assert shell("amend", str(blocked))[0] == 2  # nothing to change


def test_projects_and_members_are_made_set_and_taken_out(shell, alice):
    make_member(alice, "mia")
    status, out, _ = shell("make-project", "render", "--cap", "4", "--budget", "900")
    assert status == 0 and json.loads(out)["running_gpu_cap"] == 4
    status, out, _ = shell("set-project", "render", "--cap", "none", "--weight", "2")
    assert status == 0 and (json.loads(out)["running_gpu_cap"], json.loads(out)["weight"]) == (
        None, 2.0)
    assert [p["name"] for p in json.loads(shell("projects")[1])] == ["default", "render"]
    status, out, _ = shell("set-member", "mia", "--budget", "70")
    assert status == 0 and json.loads(out)["monthly_limit"] == 70
    assert shell("set-member", "mia")[0] == 2  # nothing to set
    assert json.loads(shell("members")[1])[0]["monthly_limit"] == 70
    status, out, _ = shell("remove-member", "mia")
    assert status == 0 and json.loads(out)["keys_revoked"] == 0
    status, _, err = shell("remove-member", "mia")
    assert status == 2 and "404 not_found" in err
    actions = [e["action"] for e in json.loads(shell("audit")[1])]
    assert actions[0] == "member.removed" and "project.made" in actions  # newest first


def test_the_organization_is_read_and_set_and_its_gpu_types_listed(shell, alice):
    from workers.services.dedication import nodes_dedicate

    nodes_dedicate([make_node("n1", gpus=8)], alice)
    status, out, _ = shell("set-organization", "--budget", "5000", "--erase-after-hours", "24")
    settings = json.loads(out)["settings"]
    assert status == 0 and (settings["monthly_limit"], settings["erase_after_hours"]) == (
        5000, 24)
    status, out, _ = shell("set-organization", "--erase-after-hours", "none")
    assert status == 0 and json.loads(out)["settings"]["erase_after_hours"] is None
    assert shell("set-organization")[0] == 2  # nothing to set
    status, _, err = shell("set-organization", "--erase-after-hours", "0")
    assert status == 2 and "400 retention_out_of_range" in err
    organization = json.loads(shell("organization")[1])
    assert [n["node"] for n in organization["dedicated_nodes"]] == ["n1"]
    assert organization["settings"]["monthly_limit"] == 5000
    types = json.loads(shell("gpu-types")[1])
    assert (types[0]["gpu_type"], types[0]["dedicated_gpus"]) == ("H100", 8)


def test_a_wait_on_several_jobs_exits_by_the_worst_of_them(shell):
    first, second = _queued(shell), _queued(shell)
    status, out, err = shell("wait", str(first), str(second), "--timeout", "0.2")
    assert status == 3 and len(json.loads(out)) == 2 and "and 1 more" in err
    shell("cancel", str(first))
    shell("cancel", str(second))
    status, out, _ = shell("wait", str(first), str(second))
    assert status == 1 and [j["id"] for j in json.loads(out)] == [first, second]
