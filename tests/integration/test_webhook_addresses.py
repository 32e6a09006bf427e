"""Where a tenant's webhook may go: never the service's own network, neither by its URL, nor
by a redirect its receiver answers, nor by a name that resolves elsewhere after its check; a
name is posted to the address checked, with its own Host and, over TLS, its own certificate;
and a refusal never says what a name resolves to."""

import shutil
import socket
import ssl
import subprocess

import pytest

from jobs.models import WebhookDelivery, WebhookEndpoint
from jobs.services.cancellation import job_cancel
from jobs.services.webhooks import url_refusal, webhook_deliver
from tests.support.factories import make_job
from tests.support.receiver import Receiver

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/hook", "http://169.254.169.254/latest",
                                 "http://10.0.0.7/hook", "http://[::1]/hook"])
def test_a_tenants_webhook_can_not_reach_the_services_own_network(api, alice, url):
    refused = api.post("/api/v1/webhooks", {"url": url}, format="json")
    assert (refused.status_code, refused.json()["error"]["code"]) == (
        400, "webhook_url_not_allowed")
    # nor one an operator made before: it is checked again at each delivery
    WebhookEndpoint.objects.create(organization=alice, url=url)
    job_cancel(job=make_job(alice))
    delivery = WebhookDelivery.objects.get()
    assert webhook_deliver(delivery.pk) == "PENDING"
    delivery.refresh_from_db()
    assert delivery.last_error.startswith("refused:")


def _sent(alice, url: str) -> WebhookDelivery:
    """A job's end sent once to an endpoint at `url`, as recorded after."""
    WebhookEndpoint.objects.create(organization=alice, url=url)
    job_cancel(job=make_job(alice))
    delivery = WebhookDelivery.objects.get()
    webhook_deliver(delivery.pk)
    delivery.refresh_from_db()
    return delivery


@pytest.fixture
def inside():
    """A server of the service's own network, which no tenant's URL may reach."""
    r = Receiver()
    yield r
    r.close()


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirect_is_a_failed_delivery_and_never_followed(alice, receiver, inside, code):
    receiver.status, receiver.headers = code, {"Location": inside.url}
    delivery = _sent(alice, receiver.url)
    assert (delivery.status, delivery.last_error) == (
        "PENDING", f"HTTP {code}: redirects are not followed")
    assert len(receiver.posts) == 1 and inside.seen == []


class Dns:
    """Stands in for the resolver for the names a test gives: each look-up of one gets its
    next answer (its last from then on); `asked` lists them. Other names resolve as ever."""

    def __init__(self, monkeypatch) -> None:
        self.answers: dict[str, list[str]] = {}
        self.asked: list[str] = []
        resolve = socket.getaddrinfo

        def getaddrinfo(host, *args, **kwargs):
            if host not in self.answers:
                return resolve(host, *args, **kwargs)
            self.asked.append(host)
            answers = self.answers[host]
            return resolve(answers.pop(0) if len(answers) > 1 else answers[0], *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def dns(monkeypatch) -> Dns:
    return Dns(monkeypatch)


def test_a_name_that_rebinds_after_its_check_reaches_only_what_was_checked(alice, receiver,
                                                                           dns, settings):
    settings.GPUSCHED_WEBHOOK_ALLOW_PRIVATE = False
    # public to the check, loopback (the receiver) from then on. 233.252.0.1 is global, and
    # no TCP connection goes to a multicast address: refused at once, nothing leaves
    dns.answers["rebind.invalid"] = ["233.252.0.1", "127.0.0.1"]
    delivery = _sent(alice, f"http://rebind.invalid:{receiver.port}/hook")
    assert delivery.last_error.startswith("unreachable:")
    assert receiver.seen == [] and dns.asked == ["rebind.invalid"]  # resolved once


def test_a_name_is_posted_to_the_address_checked_with_its_own_host(alice, receiver, dns):
    dns.answers["hooks.invalid"] = ["127.0.0.1"]
    delivery = _sent(alice, f"http://hooks.invalid:{receiver.port}/hook?v=1")
    assert (delivery.status, delivery.last_error) == ("DELIVERED", "")
    assert receiver.seen == ["POST /hook?v=1"] and dns.asked == ["hooks.invalid"]
    assert receiver.posts[0][0]["Host"] == f"hooks.invalid:{receiver.port}"


@pytest.fixture
def certificate(tmp_path, monkeypatch):
    """A server context whose certificate names hooks.invalid, and clients that trust it."""
    if not shutil.which("openssl"):
        pytest.skip("no openssl to make a certificate with")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=hooks.invalid", "-addext", "subjectAltName=DNS:hooks.invalid",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # read by each default context
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def test_https_checks_the_certificate_of_the_name_at_the_address_checked(alice, settings,
                                                                         certificate, dns):
    settings.GPUSCHED_WEBHOOK_ALLOW_PRIVATE = True
    server = Receiver(tls=certificate)
    try:
        dns.answers["hooks.invalid"] = dns.answers["other.invalid"] = ["127.0.0.1"]
        delivery = _sent(alice, f"https://hooks.invalid:{server.port}/hook")
        assert (delivery.status, delivery.last_error) == ("DELIVERED", "")
        assert server.posts[0][0]["Host"] == f"hooks.invalid:{server.port}"
        WebhookDelivery.objects.all().delete()
        WebhookEndpoint.objects.all().delete()
        # the same server under a name its certificate does not give
        delivery = _sent(alice, f"https://other.invalid:{server.port}/hook")
        assert delivery.last_error.startswith("unreachable:")
        assert "certificate" in delivery.last_error and len(server.posts) == 1
    finally:
        server.close()


def test_a_refusal_does_not_say_what_a_name_resolves_to(api, dns):
    dns.answers["postgres.invalid"] = ["172.18.0.3"]
    refusal = "'postgres.invalid' resolves to a non-public address"
    assert url_refusal("http://postgres.invalid:5432/") == refusal
    refused = api.post("/api/v1/webhooks", {"url": "http://postgres.invalid:5432/"},
                       format="json")
    assert refused.json()["error"]["message"] == refusal
    assert "172.18" not in refused.content.decode()
