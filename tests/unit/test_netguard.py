"""The webhook address guard. Resolution is always stubbed: nothing here looks up or connects to anything."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from punctual.netguard import AddressRefused, is_allowed, is_loopback_name, loopback_allowed, resolve_checked
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
