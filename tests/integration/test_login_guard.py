"""Password guessing on the dashboard's and admin's login is stopped: past the failures a
username may have, its logins are refused, the right password too, and the page says why;
other users log in as before; a login that succeeds forgets earlier failures; one address
trying many usernames is stopped too."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from jobs.models import Membership

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_cache")]


@pytest.fixture
def users(alice, settings):
    settings.GPUSCHED_LOGIN_MAX_FAILURES = 3
    # a quick hasher: the guard is under test, not the hashing of forty passwords
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    made = {}
    for name in ("ann", "bea"):
        made[name] = get_user_model().objects.create_user(name, password=f"pw-{name}-1")
        Membership.objects.create(user=made[name], organization=alice)
    get_user_model().objects.create_superuser("root", email="", password="pw-root-1")
    return made


def _log_in(client: Client, username: str, password: str, path: str = "/accounts/login/"):
    return client.post(path, {"username": username, "password": password})


def _logged_in(client: Client) -> bool:
    return client.get("/dashboard/").status_code == 200


def test_a_username_is_locked_after_its_failures_and_others_are_not(users):
    guesser = Client()
    for guess in ("a", "b", "c"):
        assert "did not match" in _log_in(guesser, "ann", guess).content.decode()
    refused = _log_in(guesser, "ann", "pw-ann-1")  # the right one, too late
    assert "Too many failed logins" in refused.content.decode()
    assert not _logged_in(guesser)
    # someone else, from another address, locked out of ann too
    other = Client(REMOTE_ADDR="10.9.9.9")
    _log_in(other, "ann", "pw-ann-1")
    assert not _logged_in(other)
    bea = Client()
    _log_in(bea, "bea", "pw-bea-1")
    assert _logged_in(bea)


def test_a_login_that_succeeds_forgets_the_failures_before_it(users):
    client = Client()
    for guess in ("a", "b"):
        _log_in(client, "ann", guess)
    _log_in(client, "ann", "pw-ann-1")
    assert _logged_in(client)
    client.logout()
    for guess in ("c", "d"):  # two more: under the limit again
        _log_in(client, "ann", guess)
    _log_in(client, "ann", "pw-ann-1")
    assert _logged_in(client)


def test_one_address_guessing_many_usernames_is_stopped(users):
    guesser = Client(REMOTE_ADDR="203.0.113.7")
    for i in range(30):  # ten times a username's limit, each name tried once
        _log_in(guesser, f"nobody{i}", "x")
    _log_in(guesser, "bea", "pw-bea-1")
    assert not _logged_in(guesser)
    elsewhere = Client(REMOTE_ADDR="198.51.100.1")
    _log_in(elsewhere, "bea", "pw-bea-1")
    assert _logged_in(elsewhere)


def test_the_admin_login_is_guarded_as_well(users):
    guesser = Client()
    for guess in ("a", "b", "c"):
        _log_in(guesser, "root", guess, "/admin/login/")
    refused = _log_in(guesser, "root", "pw-root-1", "/admin/login/")
    assert "Too many failed logins" in refused.content.decode()
    assert guesser.get("/admin/").status_code == 302  # still asked to log in


def test_behind_a_proxy_the_guesser_is_stopped_not_everyone(users, settings):
    """Every request reaches the service from its TLS proxy's address; the proxy appends
    the address it was reached from. A guesser's many failures lock its own address, not
    the proxy's, which would lock every user out; what a guesser writes there itself is
    not read."""
    settings.GPUSCHED_PROXY_HOPS = 1
    proxy = "10.0.0.2"
    guesser = Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="203.0.113.7")
    for i in range(30):
        _log_in(guesser, f"nobody{i}", "x")
    _log_in(guesser, "bea", "pw-bea-1")
    assert not _logged_in(guesser)
    spoofing = Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="198.51.100.1, 203.0.113.7")
    _log_in(spoofing, "bea", "pw-bea-1")
    assert not _logged_in(spoofing)  # the address the proxy saw, not the one it was told
    elsewhere = Client(REMOTE_ADDR=proxy, HTTP_X_FORWARDED_FOR="198.51.100.1")
    _log_in(elsewhere, "bea", "pw-bea-1")
    assert _logged_in(elsewhere)
