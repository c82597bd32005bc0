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


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for (mapped, NAT64, 6to4, Teredo), if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
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
