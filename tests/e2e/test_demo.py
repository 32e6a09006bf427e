"""The README's demo: a bare machine, SQLite and a server-less broker, a job through HTTP."""

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from gpusched_client import Client
from tests.support.processes import ROOT, wait_for

pytestmark = pytest.mark.e2e


def _hidden(page: str, name: str) -> str:
    return re.search(rf'name="{name}" value="([^"]+)"', page).group(1)


def _submit_on_the_dashboard(base: str, login_file) -> None:
    """Log in with the demo's printed password and submit a job through the New job form,
    CSRF cookie and all, as a browser would."""
    user, password = login_file.read_text().split()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())

    def post(path: str, form: dict) -> str:
        request = urllib.request.Request(base + path, data=urllib.parse.urlencode(
            form).encode(), headers={"Referer": base + path})
        with browser.open(request, timeout=10) as answer:
            return answer.read().decode()

    login = browser.open(f"{base}/accounts/login/", timeout=10).read().decode()
    post("/accounts/login/", {"username": user, "password": password,
                              "csrfmiddlewaretoken": _hidden(login, "csrfmiddlewaretoken")})
    form = browser.open(f"{base}/dashboard/jobs/new", timeout=10).read().decode()
    made = post("/dashboard/jobs/new", {
        "csrfmiddlewaretoken": _hidden(form, "csrfmiddlewaretoken"),
        "token": _hidden(form, "token"), "target": "demo/default", "prompt": "a grey heron",
        "gpus": "1", "params": '{"run_seconds": 1}', "preemptible": "on"})
    assert "Submitted as job #" in made and "a grey heron" in made


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "kill"])
def test_the_demo_runs_a_job_without_any_server(tmp_path, stop):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL")}
    env["GPUSCHED_VAR_DIR"] = str(tmp_path)
    port = _free_port()
    demo = subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--port", str(port), "--for-seconds", "120"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
        # as a shell that starts it in the background: with SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        key_file = tmp_path / "demo-api-key"
        wait_for(key_file.exists, 60, "the demo's API key")
        key = key_file.read_text().strip()
        wait_for(lambda: _reachable(f"http://127.0.0.1:{port}/healthz"), 60, "the web app")
        gs = Client(f"http://127.0.0.1:{port}", key)  # the client, as a user runs it
        job = gs.submit("a red fox", gpus=2, params={"run_seconds": 1, "progress_interval": 0.25},
                        labels={"batch": "b7"})
        done = gs.wait(job["id"], timeout=90, poll_s=0.25)
        assert done["state"] == "SUCCEEDED" and done["result"]["size"] > 0
        # found by its label on SQLite too, where JSON is compared otherwise
        assert [j["id"] for j in gs.jobs(labels=["batch:b7"])] == [job["id"]]
        assert gs.summary(labels=["batch:b7"])["states"] == {"SUCCEEDED": 1}
        # the output comes with the key, and from nowhere else (the demo runs with DEBUG on)
        assert gs.output(done["id"], tmp_path / "fox.y4m").stat().st_size == done["result"]["size"]
        with pytest.raises(urllib.error.HTTPError) as public:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/media/{done['result']['output']}",
                                   timeout=10)
        assert public.value.code == 404
        # what the binary printed, read through the API as it left the node
        with urllib.request.urlopen(urllib.request.Request(
                f"http://127.0.0.1:{port}/api/v1/jobs/{job['id']}/log",
                headers={"Authorization": f"Bearer {key}"}), timeout=10) as printed:
            assert printed.headers["X-Log-Final"] == "true"
            assert b"START CUDA_VISIBLE_DEVICES=" in printed.read()
        # the demo's jobs cost credits: the job paid its run and holds nothing now
        credits = gs.credits()
        assert credits["held"] == 0 and 0 < 1_000_000 - credits["available"] < 1_000
        assert [t["kind"] for t in credits["transfers"]] == ["VOID", "POST", "HOLD", "GRANT"]
        _submit_on_the_dashboard(f"http://127.0.0.1:{port}", tmp_path / "demo-login")
    finally:
        os.kill(demo.pid, stop)  # Ctrl-C or `kill`, as a person would
        # its processes write to the same pipe: the output ends once all of them are gone
        out, _ = demo.communicate(timeout=60)
    assert f"running at http://127.0.0.1:{port}" in out
    assert f"GPUSCHED_API_KEY={key}" in out  # how to use the `gpusched` command
    assert demo.returncode == 0


def _reachable(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except OSError:
        time.sleep(0.3)
        return False
