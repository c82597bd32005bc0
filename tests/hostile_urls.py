"""Outbound URLs for the address guard's tests: spellings that reach private addresses, URLs that are
not valid absolute http(s) URLs, and valid ones that must be kept exactly as given.

The private spellings name 10.0.0.1, 192.168.1.1 or 169.254.169.254 (never plain loopback), so they
must be refused under the local stack's allowed networks (loopback) as much as under none.
"""

from __future__ import annotations

# The local stack's `webhook_allowed_networks`.
LOCAL_STACK_NETWORKS = ("127.0.0.0/8", "::1/128")

# The spellings an adversarial sweep found taken for notification targets and refused for tasks.
FOUND_IN_THE_SWEEP = [
    "http://0xa.0.0.1/",
    "http://167772161/",
    "http://012.0.0.1/",
    "http://10.1/",
    "http://0/x",
    "http://1\uff10.0.0.1/",  # a full-width zero
    "http://\u2460\u24ea.0.0.1/",  # circled one, circled zero
    "http://192.168.1.1./",
    "http://10.0.0.1\\@127.0.0.1:19900/",
]

PRIVATE_SPELLINGS = [
    *FOUND_IN_THE_SWEEP,
    # octal
    "http://0177.0.0.1/",
    "http://00000012.0.0.1/",
    "http://012.00.00.01/",
    "http://0300.0250.1.1/",
    # hexadecimal
    "http://0x0a000001/",
    "http://0XA.0.0.1/",
    "http://0xa.0x0.0x0.0x1/",
    "http://0x7f.1/",
    "http://0x/",
    # one decimal number
    "http://2130706433/",
    "http://3232235777/",  # 192.168.1.1
    "http://2852039166/",  # 169.254.169.254
    # fewer than four parts
    "http://10.0.1/",
    "http://127.1/",
    "http://192.168.257/",
    "http://169.254.43518/",
    # out of range, or more than four parts
    "http://10.0.0.256/",
    "http://4294967306/",  # 2**32 + 10.0.0.1's low bits: some readers wrap
    "http://10.0.0.1.0/",
    # a final dot
    "http://10.0.0.1./",
    "http://127.0.0.1../",
    "http://0xa.0.0.1./",
    # percent-encoded
    "http://%31%30.0.0.1/",
    "http://10.0.0.%31/",
    "http://10.0.0.1%2F/",
    # Unicode digits, dots and letters that IDNA maps to ASCII
    "http://\uff11\uff12\uff17.0.0.1/",  # full-width 127
    "http://10\u30020\u30020\u30021/",  # ideographic full stops
    "http://10\uff0e0\uff0e0\uff0e1/",  # full-width full stops
    "http://\U0001d7cf\U0001d7ce.0.0.1/",  # mathematical bold 10
    "http://\u0661\u0660.0.0.1/",  # Arabic-Indic 10
    "http://loc\u00adalhost/",  # a soft hyphen, which IDNA drops
    "http://\u24db\u24de\u24d2\u24d0\u24db\u24d7\u24de\u24e2\u24e3/",  # circled "localhost"
    "http://xn--10-0.0.0.1/",
    # user information
    "http://user@10.0.0.1/",
    "http://public.example.com@10.0.0.1/",
    "http://10.0.0.1@public.example.com/",
    "http://public.example.com:80@10.0.0.1/",
    "http://a:b@[::ffff:10.0.0.1]/",
    "http://10.0.0.1%40public.example.com/",
    "http://10.0.0.1#@public.example.com/",
    # backslashes
    "http:\\\\10.0.0.1\\",
    "http:/\\10.0.0.1/",
    "http://public.example.com\\@10.0.0.1/",
    "http://10.0.0.1\\.public.example.com/",
    # schemes, slashes, whitespace
    "HTTP://10.0.0.1/",
    "http:10.0.0.1/",
    "http:/10.0.0.1/",
    " http://10.0.0.1/",
    "http://10.0.0.1 /",
    "http://10.0.0.\t1/",
    "http://10.0.0.1:80:80/",
    "http://public.example.com:80:10.0.0.1/",
    # IPv6
    "http://[::ffff:10.0.0.1]/",
    "http://[::ffff:a00:1]/",
    "http://[0:0:0:0:0:ffff:10.0.0.1]/",
    "http://[::ffff:0:10.0.0.1]/",  # IPv4-translated
    "http://[::10.0.0.1]/",  # IPv4-compatible
    "http://[64:ff9b::10.0.0.1]/",  # NAT64
    "http://[64:ff9b:1::a00:1]/",  # NAT64, local use
    "http://[2002:a00:1::]/",  # 6to4
    "http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/",  # Teredo, client 10.0.0.1
    "http://[::ffff:169.254.169.254]/",
    "http://[fd00:ec2::254]/",
    "http://[fe80::1]/",
    "http://[fe80::1%25eth0]/",
    "http://[::]/",
    "http://[::ffff:012.0.0.1]/",
    "http://[::ffff:10.1]/",
    "http://[v1.10.0.0.1]/",
    "http://[10.0.0.1]/",
    "http://::ffff:10.0.0.1/",
    "http://[::ffff:10.0.0.1/",
    "http://[::ffff:10.0.0.1]x/",
]

# Not valid absolute http(s) URLs, each with a word of what the refusal says.
MALFORMED = [
    ("http:///x", "no host"),
    ("http://127.0.0.1:19900/\r\nX: y", "control character U+000D"),
    ("http://hooks.example.com/a\x00b", "control character U+0000"),
    ("http://hooks.example.com/\x7f", "control character U+007F"),
    ("http://hooks.example.com/a b", "whitespace"),
    ("http://hooks.example.com/a\u00a0b", "whitespace"),
    ("http://hooks.example.com\\x", "backslash"),
    ("http://hooks.example.com/r\u00e9sum\u00e9", "non-ASCII"),
    ("http://b\u00fccher.example/", "non-ASCII"),
    ("http://hooks.example.com/<script>", "percent-encode"),
    ("http://hooks.example.com/a|b", "percent-encode"),
    ("http://hooks.example.com/?a[]=1", "percent-encode"),
    ("http://hooks.example.com/%zz", "escape"),
    ("http://hooks.example.com/100%", "escape"),
    ("http://hooks.example.com/#top", "fragment"),
    ("http://hooks.example.com:/", "port"),
    ("http://hooks.example.com:0/", "port"),
    ("http://hooks.example.com:65536/", "port"),
    ("http://hooks.example.com:080a/", "port"),
    ("http://hooks.example.com:-1/", "port"),
    ("http://:80/", "no host"),
    ("http://?x", "no host"),
    ("https://user:secret@hooks.example.com/", "user information"),
    ("https://@hooks.example.com/", "user information"),
    ("http://hooks..example.com/", "empty label"),
    ("http://.hooks.example.com/", "empty label"),
    ("http://" + "a" * 64 + ".example.com/", "63"),
    ("http://hooks.example.com/" + "a" * 2048, "at most 2,048"),
    ("ftp://hooks.example.com/", "http"),
    ("hooks.example.com/x", "http"),
    ("", "http"),
]

# Valid, and kept exactly as written: pydantic's URL type rewrote each of these.
KEPT_AS_GIVEN = [
    "https://hooks.example.com",
    "https://Hooks.Example.COM:8443/a/../b/./c;p=1?q=a&r=%2F&s=",
    "http://hooks.example.com?x=1",
    "http://hooks.example.com./x",
    "http://[2606:4700:0::1111]:8080/x",
    "https://hooks.example.com/a%20b%2fc",
    "https://hooks.example.com/~user/(x)*!$'+,;=:@",
    "https://hooks.example.com:443/",
    "https://hooks.example.com/x?",
]


class PublicForAnyName:
    """A resolver that answers a public address for any name, and records what it was asked: were
    the guard to read a host as a name that is not one, the call would go through."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int]] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked.append((host, port))
        return ["93.184.216.34"]
