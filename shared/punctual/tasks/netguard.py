"""The outbound address guard: one reading of an outbound URL, and the refusal of private, loopback,
link-local and other non-public targets.

Every URL Punctual calls out to (an `http` task's, after its references are substituted; a webhook
notification's target) is read by `parse_url` alone, and the connection goes where that reading
says: no second parser can see another host in the same text. The parser takes one spelling of
each thing and refuses the rest rather than rewrite them, so that the URL stored is the URL given.

Every address a host resolves to is checked (a name with one public and one private address is
refused), and the connection then goes to an address that was checked, so a second lookup cannot
swap in another (DNS rebinding).
"""

from __future__ import annotations

import ipaddress
import re
import socket
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from urllib.parse import quote

Resolver = Callable[[str, int], list[str]]


class AddressRefused(Exception):
    """The target's address (literal, or a name's after a lookup) is one webhooks may not reach."""


class BadUrl(ValueError):
    """Not an absolute http or https URL that Punctual can send to exactly as written."""


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


# How to let a refused address through, said with each refusal.
REFUSAL_HINT = (
    " (the local stack allows loopback, 127.0.0.1 and localhost; a deployed stack allows the networks "
    "in its webhook_allowed_networks setting: cdk deploy -c webhook_allowed_networks=10.0.0.0/8)"
)


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
            + REFUSAL_HINT
        )
    return addresses


# --- the URL parser -------------------------------------------------------------------------------

MAX_URL_LENGTH = 2048
_DEFAULT_PORTS = {"http": 80, "https": 443}
# RFC 3986's characters for a path and a query: unreserved, sub-delims, ":", "@", "/", "?" and the
# "%" of an escape. Everything else is refused, not escaped on the caller's behalf: an escape added
# here would make the stored URL differ from the one given.
_PATH_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-._~" + "!$&'()*+,;=" + ":@/?%")
# Brackets enclose an IPv6 host; "#" is read only to say that a fragment is refused.
_URL_CHARACTERS = _PATH_CHARACTERS | frozenset("[]#")
_NAME_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-_.")
# WHATWG's URL parser (browsers, pydantic) reads a host whose last label is a number as an IPv4
# address, in decimal, octal (`012`) or hexadecimal (`0xa`), with fewer than four parts (`10.1`,
# `167772161`); the C library's resolver reads those spellings too. Such a host is taken only in the
# usual form, four decimal numbers, which every reader takes for the same address.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")
_BROKEN_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_PORT = re.compile(r"[0-9]{1,5}")


@dataclass(frozen=True)
class OutboundUrl:
    """An outbound URL as `parse_url` read it: what the guard checks and where the connection goes."""

    scheme: str  # http or https
    host: str  # a name as written, or an IP address (an IPv6 one without its brackets)
    port: int  # as written, or the scheme's default
    target: str  # the request target: the path as written ("/" when there is none), then any query
    address: str | None  # the host when it is an IP address, in its usual form

    @property
    def is_https(self) -> bool:
        return self.scheme == "https"


def parse_url(url: str) -> OutboundUrl:
    """Read an absolute http or https URL; raises BadUrl, saying what is wrong, for anything else.

    Refused rather than rewritten: characters RFC 3986 does not allow (control characters,
    whitespace, backslashes, non-ASCII, `<>"{}|^` and backquotes), a scheme other than lowercase
    `http` or `https`, user information (`user:password@`), an empty host, a port outside 1-65535,
    an IPv4 address in any but its four-decimal form, an IPv6 zone, a fragment and a `%` that does
    not start an escape.
    """
    if len(url) > MAX_URL_LENGTH:
        raise BadUrl(f"{len(url):,} characters; a URL takes at most {MAX_URL_LENGTH:,}")
    for position, char in enumerate(url):
        if char not in _URL_CHARACTERS:
            raise BadUrl(_character_problem(char, position))
    scheme, separator, rest = url.partition("://")
    if not separator or scheme not in _DEFAULT_PORTS:
        raise BadUrl("not an absolute http or https URL: it must start with http:// or https://")
    if "#" in rest:
        raise BadUrl("a fragment (#...) is never sent to the server: leave it out")
    end = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, target = rest[:end], rest[end:]
    if "@" in authority:
        raise BadUrl(
            "user information before the host (user:password@) is not taken: it would be stored and "
            "shown with the job; authenticate with a header or the job's signing secret"
        )
    if not authority:
        raise BadUrl("the URL names no host (nothing between // and the path)")
    host, address, port_text = _authority(authority)
    for char in "[]":
        if char in target:
            raise BadUrl(f"{char!r} in the path or query: percent-encode it ({quote(char, safe='')})")
    broken = _BROKEN_ESCAPE.search(target)
    if broken is not None:
        raise BadUrl(
            f"'%' at position {len(url) - len(target) + broken.start()} does not start an escape "
            "(% and two hexadecimal digits): write a % itself as %25"
        )
    return OutboundUrl(
        scheme=scheme,
        host=host,
        port=_port(port_text, _DEFAULT_PORTS[scheme]),
        target=target if target.startswith("/") else "/" + target,
        address=address,
    )


def _character_problem(char: str, position: int) -> str:
    where = f"at position {position}"
    if char == "\\":
        return f"a backslash {where}: some URL parsers read it as '/' and others do not; write '/' or %5C"
    if ord(char) < 0x20 or ord(char) == 0x7F:
        return f"control character U+{ord(char):04X} {where}: a URL holds none"
    if char.isspace():
        return (
            f"whitespace (U+{ord(char):04X}) {where}: percent-encode it in a path or query (%20 for a space)"
        )
    if ord(char) > 0x7F:
        return (
            f"non-ASCII character {char!r} {where}: percent-encode it in a path or query "
            f"({quote(char, safe='')}), and write an international host name in its ASCII form (xn--...)"
        )
    return f"{char!r} {where} is not allowed in a URL: percent-encode it ({quote(char, safe='')})"


def _authority(authority: str) -> tuple[str, str | None, str | None]:
    """The host, its address if it is an IP address, and the port as written (None: none given)."""
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            raise BadUrl("an IPv6 host without its closing ']'")
        host, after = authority[1:close], authority[close + 1 :]
        if after and not after.startswith(":"):
            raise BadUrl(f"{after!r} after the IPv6 address: only a port (:443) may follow it")
        return host, _ipv6(host), after[1:] if after else None
    host, colon, port_text = authority.partition(":")
    if ":" in port_text:
        raise BadUrl("more than one ':' after the host: write an IPv6 address in brackets ([2001:db8::1])")
    return host, _ipv4_or_name(host), port_text if colon else None


def _ipv6(text: str) -> str:
    if "%" in text:
        raise BadUrl(f"[{text}]: an IPv6 zone (%...) is not taken")
    try:
        return str(ipaddress.IPv6Address(text))
    except ValueError:
        raise BadUrl(f"[{text}] is not an IPv6 address") from None


def _ipv4_or_name(host: str) -> str | None:
    """The address when the host is an IPv4 address; None for a name."""
    if not host:
        raise BadUrl("the URL names no host (nothing between // and the port)")
    for char in host:
        if char not in _NAME_CHARACTERS:
            raise BadUrl(
                f"{char!r} in the host {host!r}: a host is a name (letters, digits, '-', '_' and '.') "
                "or an IP address"
            )
    name = host.removesuffix(".")
    labels = name.split(".")
    if _NUMERIC_LABEL.fullmatch(labels[-1]):
        address = _usual_ipv4(host)
        if address is None:
            raise BadUrl(
                f"{host!r} is not an IPv4 address in its usual form: write four decimal numbers from 0 "
                "to 255, without leading zeros or a final dot (10.0.0.1)"
            )
        return address
    if not all(labels):
        raise BadUrl(f"{host!r} has an empty label (a leading dot, or two dots in a row)")
    if any(len(label) > 63 for label in labels) or len(name) > 253:
        raise BadUrl(f"{host!r} is not a host name: a label takes at most 63 characters, a name 253")
    return None


def _usual_ipv4(host: str) -> str | None:
    # (The ipaddress module takes four decimal numbers and nothing else: no leading zero, no final dot.)
    try:
        return str(ipaddress.IPv4Address(host))
    except ValueError:
        return None


def _port(text: str | None, default: int) -> int:
    if text is None:
        return default
    if not _PORT.fullmatch(text) or not 1 <= int(text) <= 65535:
        raise BadUrl(f"port {text!r} is not a number from 1 to 65535")
    return int(text)


# --- the guard, for a URL -------------------------------------------------------------------------


def check_url(url: str, allowed_networks: Iterable[str]) -> OutboundUrl:
    """`url` read by `parse_url`, with what can be refused without a lookup refused: an IP address
    the deployment does not allow, or a name that always means this machine. (Other names are
    checked when they are resolved, at each call: their addresses may change.) Raises BadUrl or
    AddressRefused."""
    networks = tuple(allowed_networks)
    parsed = parse_url(url)
    if parsed.address is not None and not is_allowed(parsed.address, networks):
        raise AddressRefused(f"{parsed.host} is a private, loopback or link-local address")
    if parsed.address is None and is_loopback_name(parsed.host) and not loopback_allowed(networks):
        raise AddressRefused(
            f"{parsed.host} names this machine (a loopback address), which webhooks may not call"
        )
    return parsed


def resolve_url(
    url: str, allowed_networks: Iterable[str], resolver: Resolver
) -> tuple[OutboundUrl, list[str]]:
    """`check_url`, then the host's addresses, all of them allowed: where a call to `url` may connect.
    Raises BadUrl or AddressRefused."""
    networks = tuple(allowed_networks)
    parsed = check_url(url, networks)
    return parsed, resolve_checked(parsed.host, parsed.port, networks, resolver)
