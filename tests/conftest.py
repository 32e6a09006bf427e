"""Shared fixtures: named tenants (alice's org, bob's org) and real worker processes."""

from __future__ import annotations

import pytest

from tests.support.processes import ProcessGroup


@pytest.fixture(autouse=True)
def storage_of_its_own(settings, tmp_path):
    """Each test its own storage (outputs, checkpoints' copies, logs), shared with the
    processes it starts (child_env): job ids restart with every test database, and the two
    lanes of the suite run at once, so a folder named after a job would be another's too."""
    settings.MEDIA_ROOT = str(tmp_path / "media")


@pytest.fixture
def clean_cache():
    """A tick publishes a backlog, a line and more to the cache, which admission and the API
    read: nothing a test published may reach another test."""
    from tests.support.broker import purge_broker_and_cache

    purge_broker_and_cache()
    yield
    purge_broker_and_cache()


@pytest.fixture
def tiers(db):
    from jobs.services.tenancy import tiers_ensure_defaults

    return {t.name: t for t in tiers_ensure_defaults()}


@pytest.fixture
def alice(tiers):
    """An organization on the paid tier, with an API key."""
    from jobs.services.tenancy import api_key_issue, organization_create

    org = organization_create(slug="alice", tier="paid")
    org.raw_key = api_key_issue(organization=org, name="ci")[1]
    return org


@pytest.fixture
def bob(tiers):
    """Another organization: must never see alice's jobs."""
    from jobs.services.tenancy import api_key_issue, organization_create

    org = organization_create(slug="bob", tier="free")
    org.raw_key = api_key_issue(organization=org, name="ci")[1]
    return org


@pytest.fixture
def api(alice):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.raw_key}")
    return client


@pytest.fixture
def olga(alice):
    """An owner of alice's organization, a dashboard user."""
    from jobs.models import Membership
    from tests.support.factories import make_member

    user = make_member(alice, "olga")
    Membership.objects.filter(user=user).update(role=Membership.Role.OWNER)
    return user


@pytest.fixture
def owner(client, olga):
    """The dashboard, logged in as olga."""
    client.force_login(olga)
    return client


@pytest.fixture
def receiver(settings):
    """A webhook receiver listening on loopback (tests/support/receiver.py)."""
    from tests.support.receiver import Receiver

    settings.GPUSCHED_WEBHOOK_ALLOW_PRIVATE = True
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def agent(settings, tmp_path):
    """A node agent run in the test's process (`run_by_agent`): quick beats, its files and
    the service's storage under the test's folder."""
    settings.GPUSCHED_WORK_ROOT = tmp_path / "work"
    settings.GPUSCHED_HEARTBEAT_SECONDS = 0.1
    settings.GPUSCHED_KILL_GRACE_S = 1
    settings.GPUSCHED_LOG_PUBLISH_S = 0.2


@pytest.fixture
def processes():
    group = ProcessGroup()
    yield group
    group.stop_all()
