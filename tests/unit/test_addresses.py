"""The address rules every outgoing fetch goes through (app/tools/core/addresses.py), and the check
that applies them (app/tools/net/address.py) on IP literals, which need no DNS."""

import asyncio
import socket

import pytest

from app.tools.core.addresses import refusal
from app.tools.net.address import AddressRefused, check_url


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("10.0.0.1", "private"),
        ("10.255.255.254", "private"),
        ("192.168.1.20", "private"),
        ("172.16.0.5", "private"),
        ("169.254.169.254", "cloud metadata"),
        ("169.254.1.1", "link-local"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.0.0.1", "private"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("100.127.255.254", "carrier-grade NAT"),
        ("100.100.100.200", "cloud metadata"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("fe80::1", "link-local"),
        ("fd00:ec2::254", "cloud metadata"),
        ("fc00::1", "private"),
        ("0.0.0.0", "private or reserved"),
        ("::", "private or reserved"),
        ("240.0.0.1", "private or reserved"),
    ],
)
def test_refused_addresses_say_why(address, kind):
    reason = refusal(address)
    assert reason is not None and kind in reason, reason


@pytest.mark.parametrize("address", ["93.184.215.14", "1.1.1.1", "100.128.0.1", "2606:4700:4700::1111"])
def test_public_addresses_pass(address):
    assert refusal(address) is None


def test_not_an_address():
    assert "not an IP address" in refusal("example.com")


def _check(url: str, allow=()):
    return asyncio.run(check_url(url, allow=allow))


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://10.0.0.1:8080/x",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "https://100.64.1.2/",
        "http://224.0.0.1/",
    ],
)
def test_check_url_refuses_private_literals(url):
    with pytest.raises(AddressRefused, match="is not fetched"):
        _check(url)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://1.1.1.1/file", "Only http and https"),
        ("file:///etc/passwd", "Only http and https"),
        ("http://user:pw@1.1.1.1/", "user name or password"),
        ("http:///path", "no host"),
        ("http://1.1.1.1/" + "a" * 3000, "longer than"),
    ],
)
def test_check_url_refuses_other_urls(url, message):
    with pytest.raises(AddressRefused, match=message):
        _check(url)


def test_check_url_pins_the_public_literal():
    checked = _check("https://1.1.1.1/dns")
    assert (checked.scheme, checked.host, checked.port, checked.address) == (
        "https",
        "1.1.1.1",
        443,
        "1.1.1.1",
    )


def test_allowed_host_passes_the_address_rules():
    checked = _check("http://127.0.0.1:9000/", allow=("127.0.0.1",))
    assert (checked.address, checked.port) == ("127.0.0.1", 9000)
    # Allowing one loopback address lets through that one only.
    with pytest.raises(AddressRefused):
        _check("http://127.0.0.2:9000/", allow=("127.0.0.1",))


def test_a_name_resolving_to_loopback_is_refused():
    with pytest.raises(AddressRefused, match="localhost .*loopback"):
        _check("http://localhost/")


def _check_resolving(url: str, addresses: list[str]):
    """check_url with the event loop's resolver answering `addresses` for every name: what a DNS
    record pointing a public-looking name at an inside address gives (no such record exists here)."""

    async def run():
        loop = asyncio.get_running_loop()

        async def getaddrinfo(host, port, **_kwargs):
            return [
                (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in addresses
            ]

        loop.getaddrinfo = getaddrinfo
        return await check_url(url)

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("addresses", "kind"),
    [
        (["10.1.2.3"], "private"),
        (["169.254.169.254"], "cloud metadata"),
        (["::1"], "loopback"),
        (["127.0.0.1"], "loopback"),
        # One inside address among public ones is enough: the connection could be made to it.
        (["93.184.215.14", "10.0.0.7"], "private"),
    ],
)
def test_a_name_resolving_to_an_inside_address_is_refused(addresses, kind):
    with pytest.raises(AddressRefused, match=rf"news\.example\.com \(.*\) is not fetched: .*{kind}"):
        _check_resolving("https://news.example.com/today", addresses)


def test_a_name_resolving_to_public_addresses_is_pinned_to_the_first():
    checked = _check_resolving("https://news.example.com/today", ["93.184.215.14", "2606:4700:4700::1111"])
    assert (checked.host, checked.address) == ("news.example.com", "93.184.215.14")
