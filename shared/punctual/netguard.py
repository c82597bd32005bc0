"""The webhook address guard: refuse private, loopback, link-local and other non-public targets.

Every address a host resolves to is checked (a name with one public and one private address is
refused), and the connection then goes to an address that was checked, so a second lookup cannot
swap in another (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable

Resolver = Callable[[str, int], list[str]]


class AddressRefused(Exception):
    pass


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


# IPv6 ranges whose last 32 bits are an IPv4 address that a stack or translator may deliver to:
# NAT64's well-known prefix (RFC 6052), SIIT's IPv4-translated addresses (RFC 2765: ::ffff:0:a.b.c.d)
# and the deprecated IPv4-compatible ones (RFC 4291: ::a.b.c.d, which takes in :: and ::1, standing
# for 0.0.0.0 and 0.0.0.1: refused either way).
_EMBEDDING_IPV4 = tuple(ipaddress.ip_network(n) for n in ("64:ff9b::/96", "::ffff:0:0:0/96", "::/96"))
# NAT64's local-use prefix (RFC 8215), which the ipaddress module counts as global: it translates to
# whatever the local network decides (where the IPv4 address sits depends on the prefix length it
# uses), so none of it is taken for public.
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (mapped, NAT64, SIIT, IPv4-compatible, 6to4, Teredo),
    if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if any(address in network for network in _EMBEDDING_IPV4):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def _is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return _is_public(embedded)
        if address in _LOCAL_NAT64:
            return False
    # is_global excludes private, loopback, link-local, shared (CGNAT), reserved and unspecified ranges.
    return address.is_global and not address.is_multicast


def is_allowed(address: str, allowed_networks: Iterable[str]) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    for network in allowed_networks:
        if ip in ipaddress.ip_network(network, strict=False):
            return True
    return _is_public(ip)


def literal_address(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


# Names that stand for this machine without asking DNS: `localhost` and everything under it (RFC
# 6761 has resolvers answer loopback for them), and the other loopback names Debian's /etc/hosts
# carries. Each may have a trailing dot (a fully qualified `localhost.`) and any case.
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
# What such a name resolves to.
LOOPBACK_ADDRESSES = ("127.0.0.1", "::1")


def is_loopback_name(host: str) -> bool:
    name = host.rstrip(".").lower()
    return name in _LOOPBACK_NAMES or name.endswith(".localhost")


def loopback_allowed(allowed_networks: Iterable[str]) -> bool:
    """Whether a loopback name could pass the run-time check: one of its addresses is allowed."""
    networks = tuple(allowed_networks)
    return any(is_allowed(address, networks) for address in LOOPBACK_ADDRESSES)


def resolve_checked(host: str, port: int, allowed_networks: Iterable[str], resolver: Resolver) -> list[str]:
    """The host's addresses, all of them allowed; raises AddressRefused otherwise."""
    networks = tuple(allowed_networks)
    literal = literal_address(host)
    try:
        addresses = [literal] if literal else resolver(host, port)
    except (OSError, UnicodeError, ValueError) as exc:
        raise AddressRefused(f"cannot resolve {host!r}: {exc}") from exc
    if not addresses:
        raise AddressRefused(f"{host!r} resolves to no address")
    refused = [a for a in addresses if not is_allowed(a, networks)]
    if refused:
        raise AddressRefused(
            f"{host!r} resolves to {', '.join(refused)}: private, loopback and link-local addresses are refused"
        )
    return addresses
