"""Run the whole product on one machine: web app, beat, scheduler and two simulated nodes."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from credits.models import GpuPrice
from credits.services.grants import credits_grant
from jobs.models import Membership, Organization
from jobs.services.tenancy import api_key_issue, organization_create, tiers_ensure_defaults

NODES = [("demo-a", 2, "H100"), ("demo-b", 4, "A100")]
DEMO_PRICES = {"H100": 7200, "A100": 3600}  # credits per GPU-hour
DEMO_GRANT = 1_000_000
DEMO_USER = "demo"


class Command(BaseCommand):
    help = ("Start the demo: web app, beat, scheduler worker, webhook worker and two simulated "
            "GPU nodes.")

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--for-seconds", type=float, default=0,
                            help="stop after this long (0: until Ctrl-C)")

    def handle(self, *args, **opts):
        call_command("migrate", interactive=False, verbosity=0)
        key, password = self._demo_key(), self._demo_login()
        procs = self._start_all(opts["port"])
        url = f"http://127.0.0.1:{opts['port']}"
        self.stdout.write(self.style.SUCCESS(f"gpusched demo running at {url}"))
        self.stdout.write(f"API key (also in {self._key_file()}): {key}")
        self.stdout.write(f"dashboard: {url}/dashboard/ and admin: {url}/admin/ as {DEMO_USER}, "
                          f"password {password} (also in {self._login_file()})")
        self.stdout.write(
            f"try: curl -s -X POST {url}/api/v1/jobs -H 'Authorization: Bearer {key}' "
            "-H 'Content-Type: application/json' -d '{\"prompt\": \"a red fox\", \"gpus\": 2}'")
        self.stdout.write(f"or: GPUSCHED_URL={url} GPUSCHED_API_KEY={key} {_client_command()} "
                          "submit 'a red fox' --gpus 2 --wait")
        self.stdout.flush()
        # Ctrl-C and `kill` both stop the demo and its processes (they run in sessions of
        # their own, so nothing else would); set explicitly, since a shell that starts the
        # demo in the background hands it SIGINT ignored
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _interrupt)
        try:
            self._wait(procs, opts["for_seconds"])
        finally:
            _stop(procs)

    def _key_file(self) -> Path:
        return settings.VAR_DIR / "demo-api-key"

    def _demo_key(self) -> str:
        tiers_ensure_defaults()
        path = self._key_file()
        if path.exists() and Organization.objects.filter(slug="demo").exists():
            return path.read_text().strip()
        org = (Organization.objects.filter(slug="demo").first()
               or organization_create(slug="demo", tier="paid", name="Demo Org"))
        _price_and_fund(org)
        raw = api_key_issue(organization=org, name="demo")[1]
        path.write_text(raw + "\n")
        path.chmod(0o600)
        return raw

    def _login_file(self) -> Path:
        return settings.VAR_DIR / "demo-login"

    def _demo_login(self) -> str:
        """The demo's dashboard user: an owner of the demo organization and an operator, with
        a password of its own, kept beside the API key."""
        path = self._login_file()
        users = get_user_model().objects
        if path.exists() and users.filter(username=DEMO_USER).exists():
            return path.read_text().split()[-1]
        password = secrets.token_urlsafe(12)
        user = users.filter(username=DEMO_USER).first() or users.create_superuser(
            DEMO_USER, email="", password=password)
        user.set_password(password)
        user.save(update_fields=["password"])
        Membership.objects.update_or_create(
            user=user, organization=Organization.objects.get(slug="demo"),
            defaults={"role": Membership.Role.OWNER})
        path.write_text(f"{DEMO_USER} {password}\n")
        path.chmod(0o600)
        return password

    def _start_all(self, port: int) -> list[subprocess.Popen]:
        manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
        celery = [sys.executable, "-m", "celery", "-A", "gpusched"]
        argvs = [
            manage + ["runserver", f"127.0.0.1:{port}", "--noreload"],
            celery + ["beat", "--loglevel=WARNING"],
            celery + ["worker", "-Q", "scheduler", "-c", "1", "--loglevel=WARNING",
                      "--hostname=scheduler@%h"],
            celery + ["worker", "-Q", "default", "-c", "1", "--loglevel=WARNING",
                      "--hostname=housekeeping@%h"],
            celery + ["worker", "-Q", "notify", "-c", "2", "--loglevel=WARNING",
                      "--hostname=notify@%h"],
        ] + [manage + ["gpu_node", "--name", name, "--gpus", str(gpus), "--gpu-type", kind,
                       "--loglevel=WARNING"] for name, gpus, kind in NODES]
        return [subprocess.Popen(argv, cwd=settings.BASE_DIR, start_new_session=True)
                for argv in argvs]

    def _wait(self, procs: list[subprocess.Popen], for_seconds: float) -> None:
        deadline = time.monotonic() + for_seconds if for_seconds else None
        try:
            while deadline is None or time.monotonic() < deadline:
                if any(p.poll() is not None for p in procs):
                    self.stderr.write("a demo process exited; stopping the demo")
                    return
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass


def _price_and_fund(org: Organization) -> None:
    """Jobs cost credits in the demo (docs/credits.md): prices for its GPU types and a grant
    that covers many jobs, given once."""
    for gpu_type, price in DEMO_PRICES.items():
        GpuPrice.objects.get_or_create(gpu_type=gpu_type,
                                       defaults={"credits_per_gpu_hour": price})
    credits_grant(organization=org, amount=DEMO_GRANT, idempotency_key="demo-welcome",
                  memo="welcome to the demo")


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


STOP_GRACE_S = 15.0  # for all of them together to stop as asked


def _stop(procs: list[subprocess.Popen]) -> None:
    """A warm shutdown of each process, as systemd's KillMode=mixed asks one: SIGTERM to its
    main process only (a signal to its pool's children too makes a worker wait for children
    it no longer has), then SIGKILL to whatever is left of its group."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
    for p in procs:
        signal_group(p, signal.SIGKILL)


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def _client_command() -> str:
    """How this installation runs `gpusched`, the client's command."""
    script = Path(sys.executable).with_name("gpusched")
    if not script.exists():
        return f"{sys.executable} -m gpusched_client"
    with contextlib.suppress(ValueError):  # inside the checkout: as the README says it
        return str(script.relative_to(Path.cwd()))
    return str(script)
