"""The outbound address guard and its URL parser. Resolution is always stubbed: nothing here looks up
or connects to anything."""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pydantic import AnyHttpUrl, TypeAdapter

from punctual.tasks.netguard import (
    AddressRefused,
    BadUrl,
    OutboundUrl,
    check_url,
    is_allowed,
    is_loopback_name,
    loopback_allowed,
    parse_url,
    resolve_checked,
    resolve_url,
)
from tests.hostile_urls import (
    KEPT_AS_GIVEN,
    LOCAL_STACK_NETWORKS,
    MALFORMED,
    PRIVATE_SPELLINGS,
    PublicForAnyName,
)
from tests.stubs import StubResolver
from tests.stubs import no_lookups as never_called

PRIVATE = [
    "10.0.0.1",
    "10.255.255.254",
    "172.16.0.1",
    "172.31.255.254",
    "192.168.1.1",
    "127.0.0.1",
    "127.255.255.254",
    "169.254.169.254",  # the EC2/ECS metadata service
    "169.254.170.2",  # ECS task credentials
    "100.64.0.1",  # CGNAT
    "100.127.255.254",
    "0.0.0.0",
    "255.255.255.255",
    "224.0.0.1",
    "::1",
    "::",
    "fe80::1",
    "fe80::1%eth0",
    "fc00::1",
    "fd00:ec2::254",  # the EC2 metadata service over IPv6
    "::ffff:127.0.0.1",
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "::ffff:0:7f00:1",  # IPv4-translated (SIIT, ::ffff:0:127.0.0.1)
    "::ffff:0:a00:1",
    "::7f00:1",  # IPv4-compatible (::127.0.0.1)
    "::a9fe:a9fe",
    "64:ff9b:1::a00:1",  # NAT64's local-use prefix
    "64:ff9b:1::5db8:d822",
    "ff02::1",
]
PUBLIC = [
    "93.184.216.34",
    "8.8.8.8",
    "1.1.1.1",
    "172.32.0.1",
    "100.128.0.1",
    "2606:4700::1111",
    "2001:4860:4860::8888",
    "::ffff:0:5db8:d822",  # 93.184.216.34, IPv4-translated
    "::808:808",  # 8.8.8.8, IPv4-compatible
]


@pytest.mark.parametrize("address", PRIVATE)
def test_name_resolving_to_a_non_public_address_is_refused(address: str) -> None:
    # Given a name that resolves to a private/loopback/link-local/... address
    resolver = StubResolver({"hook.example.com": [address]})

    # When it is checked / Then it is refused, naming the address
    with pytest.raises(AddressRefused, match="refused") as caught:
        resolve_checked("hook.example.com", 443, (), resolver)
    assert address in str(caught.value)
    assert resolver.asked == [("hook.example.com", 443)]


@pytest.mark.parametrize("address", PRIVATE)
def test_non_public_address_is_not_allowed(address: str) -> None:
    assert not is_allowed(address, ())


@pytest.mark.parametrize("address", PUBLIC)
def test_name_resolving_to_public_addresses_is_allowed(address: str) -> None:
    resolver = StubResolver({"hook.example.com": [address]})
    assert resolve_checked("hook.example.com", 443, (), resolver) == [address]


@pytest.mark.parametrize("private", ["10.0.0.1", "::1", "169.254.169.254"])
@pytest.mark.parametrize("position", [0, 1, 2])
def test_name_with_one_private_address_among_public_ones_is_refused(private: str, position: int) -> None:
    # Given a name with several addresses, one of them private (wherever it comes in the answer)
    addresses = ["93.184.216.34", "2606:4700::1111"]
    addresses.insert(position, private)
    resolver = StubResolver({"hook.example.com": addresses})

    # When checked / Then refused, since the connection could go to any of them
    with pytest.raises(AddressRefused) as caught:
        resolve_checked("hook.example.com", 443, (), resolver)
    assert private in str(caught.value)


def test_allowed_networks_let_loopback_through() -> None:
    resolver = StubResolver({"localhost": ["127.0.0.1"]})
    assert resolve_checked("localhost", 8765, ("127.0.0.0/8",), resolver) == ["127.0.0.1"]


def test_allowed_networks_let_through_only_what_they_contain() -> None:
    # Given loopback allowed / Then other private ranges are still refused
    resolver = StubResolver({"mixed.example": ["127.0.0.1", "10.0.0.1"]})
    with pytest.raises(AddressRefused, match=r"10\.0\.0\.1"):
        resolve_checked("mixed.example", 80, ("127.0.0.0/8",), resolver)
    assert not is_allowed("169.254.169.254", ("127.0.0.0/8", "10.0.0.0/8"))
    assert is_allowed("10.1.2.3", ("127.0.0.0/8", "10.0.0.0/8"))
    assert is_allowed("::1", ("::1/128",))


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("93.184.216.34", "93.184.216.34"),
        ("[2606:4700::1111]", "2606:4700::1111"),
        ("2606:4700::1111", "2606:4700::1111"),
    ],
)
def test_literal_public_address_is_used_without_resolving(host: str, expected: str) -> None:
    assert resolve_checked(host, 443, (), never_called) == [expected]


@pytest.mark.parametrize("host", ["127.0.0.1", "10.0.0.1", "[::1]", "169.254.169.254", "[::ffff:127.0.0.1]"])
def test_literal_private_address_is_refused_without_resolving(host: str) -> None:
    with pytest.raises(AddressRefused):
        resolve_checked(host, 80, (), never_called)


def test_literal_loopback_is_allowed_when_its_network_is() -> None:
    assert resolve_checked("127.0.0.1", 80, ("127.0.0.0/8",), never_called) == ["127.0.0.1"]


def _raising(exc: Exception) -> Callable[[str, int], list[str]]:
    def resolver(host: str, port: int) -> list[str]:
        raise exc

    return resolver


@pytest.mark.parametrize(
    "resolver",
    [_raising(OSError("Name or service not known")), StubResolver({"nowhere.example": []})],
    ids=["lookup-fails", "no-address"],
)
def test_name_that_does_not_resolve_is_refused(resolver: Callable[[str, int], list[str]]) -> None:
    with pytest.raises(AddressRefused, match=r"nowhere\.example"):
        resolve_checked("nowhere.example", 443, (), resolver)


def idna_encoding_resolver(host: str, port: int) -> list[str]:
    # What socket.getaddrinfo does first with a name: encode it with IDNA, which raises UnicodeError
    # for an empty or over-long label, before any lookup.
    host.encode("idna")
    return ["93.184.216.34"]


@pytest.mark.parametrize("host", ["a..example.com", "x" * 64 + ".example.com"])
def test_name_that_cannot_be_encoded_for_lookup_is_refused(host: str) -> None:
    with pytest.raises(AddressRefused):
        resolve_checked(host, 443, (), idna_encoding_resolver)


@pytest.mark.parametrize("address", ["64:ff9b::a9fe:a9fe", "64:ff9b::a00:1", "64:ff9b::7f00:1"])
def test_nat64_address_embedding_a_private_ipv4_is_refused(address: str) -> None:
    assert not is_allowed(address, ())


def test_nat64_address_embedding_a_public_ipv4_is_allowed() -> None:
    # The fix for the above must not refuse NAT64 as a whole: it is how IPv6-only subnets reach the web.
    assert is_allowed("64:ff9b::5db8:d822", ())  # 93.184.216.34


@pytest.mark.parametrize(
    "host",
    ["localhost", "LOCALHOST.", "localhost..", "x.localhost", "a.b.LocalHost", "localhost.localdomain"],
)
def test_loopback_names_are_known_without_resolving(host: str) -> None:
    assert is_loopback_name(host)


@pytest.mark.parametrize("host", ["localhost.example.com", "mylocalhost", "localhostx", "example.com", ""])
def test_names_that_only_look_like_loopback_are_not_loopback_names(host: str) -> None:
    assert not is_loopback_name(host)


def test_loopback_names_pass_when_either_loopback_address_would() -> None:
    assert not loopback_allowed(())
    assert not loopback_allowed(("10.0.0.0/8",))
    assert loopback_allowed(("127.0.0.0/8",)) and loopback_allowed(("::1/128",))


# --- the URL parser and the guard's reading of a URL ----------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://hooks.example.com", OutboundUrl("https", "hooks.example.com", 443, "/", None)),
        (
            "http://hooks.example.com:8080/a/../b?x=1&y",
            OutboundUrl("http", "hooks.example.com", 8080, "/a/../b?x=1&y", None),
        ),
        ("http://hooks.example.com?x=1", OutboundUrl("http", "hooks.example.com", 80, "/?x=1", None)),
        ("http://Hooks.Example.com./x", OutboundUrl("http", "Hooks.Example.com.", 80, "/x", None)),
        ("http://93.184.216.34:81/", OutboundUrl("http", "93.184.216.34", 81, "/", "93.184.216.34")),
        (
            "https://[2606:4700:0::1111]/",
            OutboundUrl("https", "2606:4700:0::1111", 443, "/", "2606:4700::1111"),
        ),
        (
            "https://[2606:4700::1111]:8443",
            OutboundUrl("https", "2606:4700::1111", 8443, "/", "2606:4700::1111"),
        ),
        (
            "http://hook_1.example.com:65535/%41%2f",
            OutboundUrl("http", "hook_1.example.com", 65535, "/%41%2f", None),
        ),
    ],
)
def test_a_url_is_read_into_its_host_port_and_request_target_as_written(
    url: str, expected: OutboundUrl
) -> None:
    assert parse_url(url) == expected


@pytest.mark.parametrize("url", PRIVATE_SPELLINGS)
def test_every_spelling_of_a_private_address_is_refused_even_where_loopback_is_allowed(url: str) -> None:
    # Given the local stack's allowed networks (loopback), and a URL that some parser reads as a
    # private address (10.0.0.1, 192.168.1.1, 169.254.169.254)
    # When the guard checks it / Then it is refused, as a bad URL or a private address
    with pytest.raises((BadUrl, AddressRefused)):
        check_url(url, LOCAL_STACK_NETWORKS)


@pytest.mark.parametrize("url", PRIVATE_SPELLINGS)
def test_every_spelling_of_a_private_address_is_refused_before_any_lookup(url: str) -> None:
    # Given a resolver that would answer a public address for any name
    resolver = PublicForAnyName()

    # When the guard is asked where a call may connect / Then it refuses without a lookup: none of
    # these is a name
    with pytest.raises((BadUrl, AddressRefused)):
        resolve_url(url, (), resolver)
    assert resolver.asked == []


@pytest.mark.parametrize(("url", "says"), MALFORMED)
def test_what_is_not_an_absolute_http_url_is_refused_saying_why(url: str, says: str) -> None:
    with pytest.raises(BadUrl, match=re.escape(says)):
        parse_url(url)


@pytest.mark.parametrize("url", KEPT_AS_GIVEN)
def test_a_valid_url_passes_the_guard(url: str) -> None:
    assert check_url(url, ()).host


def test_a_url_at_a_public_name_connects_to_the_addresses_it_resolves_to() -> None:
    resolver = StubResolver({"hooks.example.com": ["93.184.216.34", "2606:4700::1111"]})
    url, addresses = resolve_url("https://hooks.example.com:8443/x", (), resolver)
    assert (url.host, url.port, url.target) == ("hooks.example.com", 8443, "/x")
    assert addresses == ["93.184.216.34", "2606:4700::1111"]
    assert resolver.asked == [("hooks.example.com", 8443)]


@pytest.mark.parametrize("url", ["http://localhost:8080/x", "http://127.0.0.1:8080/x", "http://[::1]:8080/x"])
def test_loopback_urls_pass_only_where_loopback_is_allowed(url: str) -> None:
    # The local stack calls its own webhooks on loopback (webhook_allowed_networks)
    with pytest.raises(AddressRefused, match="loopback"):
        check_url(url, ())
    assert check_url(url, LOCAL_STACK_NETWORKS).port == 8080


def test_a_loopback_name_is_looked_up_and_checked_when_loopback_is_allowed() -> None:
    resolver = StubResolver({"localhost": ["127.0.0.1", "::1"]})
    assert resolve_url("http://localhost:8080/x", LOCAL_STACK_NETWORKS, resolver)[1] == ["127.0.0.1", "::1"]
    with pytest.raises(AddressRefused, match="::1"):
        resolve_url("http://localhost:8080/x", ("127.0.0.0/8",), resolver)


_NUMBERS = st.sampled_from(["0", "1", "10", "010", "0x0a", "0XA", "127", "255", "256", "4294967295", ""])
_HOSTS = st.one_of(
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(lambda a: f"[{a}]"),
    st.lists(_NUMBERS, min_size=1, max_size=5).map(".".join),
    st.text(alphabet="ab0x1.-_%:@[]\\\uff10\u3002", max_size=12),
    st.sampled_from(
        ["hooks.example.com", "Hooks.Example.COM", "localhost", "a.localhost", "127.0.0.1.nip.io"]
    ),
)
# Mostly well-formed pieces, so that many URLs are taken and compared; a few of each kind of trouble.
_URLS = st.builds(
    "".join,
    st.tuples(
        st.sampled_from(["http://", "https://"] * 4 + ["HTTP://", "http:/", "http:\\\\", "http:"]),
        st.sampled_from([""] * 6 + ["u@", "u:p@", "10.0.0.1\\@"]),
        _HOSTS,
        st.sampled_from([""] * 4 + [".", "\\@10.0.0.1", "@10.0.0.1", "%2e", "\uff0e1"]),
        st.sampled_from([""] * 4 + [":80", ":8443", ":", ":0", ":65536", ":1_0", ": 1"]),
        st.one_of(
            st.sampled_from(["", "/", "/a/../b?c=%41&d", "?x=1", "/@10.0.0.1"]),
            st.text("/?#%:@a.\\ \r[]", max_size=8),
        ),
    ),
)
_WHATWG = TypeAdapter(AnyHttpUrl)


@settings(max_examples=250, deadline=None)
@given(_URLS)
def test_a_url_the_parser_takes_names_the_same_host_and_port_to_every_reader(url: str) -> None:
    # Given any text built from the pieces that make readers disagree
    try:
        parsed = parse_url(url)
    except BadUrl:
        event("refused")
        return  # (nothing to disagree about)
    event("taken")

    # Then Python's own reader (urllib, as http.client's callers use) and a WHATWG reader (pydantic,
    # as browsers) find the same host and port in it
    split = urlsplit(url)
    whatwg = _WHATWG.validate_python(url)
    default = 443 if parsed.is_https else 80
    assert (split.hostname, split.port or default) == (parsed.host.lower(), parsed.port)
    assert whatwg.port == parsed.port
    if parsed.address is not None:
        assert ipaddress.ip_address((whatwg.host or "").strip("[]")) == ipaddress.ip_address(parsed.address)
    else:
        assert whatwg.host == parsed.host.lower()
        # and a name is not an address to the C library's reader either
        with pytest.raises(OSError):
            socket.inet_aton(parsed.host)
