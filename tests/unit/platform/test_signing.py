"""Standard Webhooks signatures: the reference vector, rotation, and what a receiver checks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from punctual.platform import signing

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
# The reference vector of the Standard Webhooks libraries' tests.
REFERENCE_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
REFERENCE = ("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}')


def test_the_signature_is_the_standard_webhooks_one() -> None:
    key = signing.key_of(REFERENCE_SECRET)
    assert signing.signature(key, *REFERENCE) == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


@pytest.mark.parametrize(
    ("secret", "why"),
    [
        ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_"),  # no prefix
        ("whsec_c2hvcnQ=", "decodes to 5 bytes"),  # too short
        ("whsec_" + "QUFB" * 30, "decodes to 90 bytes"),  # too long
        ("whsec_not*base64", "whsec_"),
        ("whsec_", "decodes to 0 bytes"),
    ],
)
def test_a_secret_that_is_not_one_is_refused_saying_what_one_is(secret: str, why: str) -> None:
    with pytest.raises(ValueError, match=why) as refused:
        signing.key_of(secret)
    assert "24 to 64 random bytes" in str(refused.value)
    assert signing.key_of(signing.new_secret())  # and a new one is one


@pytest.mark.parametrize(
    "secret",
    ["whsec_" + "QUFB" * 8 + "=", "whsec_" + "QUFB" * 8 + "====", "whsec_" + "QUFB" * 8 + "QUF="],
)
def test_a_secret_given_must_be_its_keys_base64_as_written(secret: str) -> None:
    # (Python reads the extra padding away; a receiver's library may not, and no signature would verify)
    signing.key_of(secret)
    with pytest.raises(ValueError, match="padding"):
        signing.check_secret(secret)
    signing.check_secret(REFERENCE_SECRET)
    signing.check_secret(signing.new_secret())


def test_a_rotation_signs_with_both_secrets_for_a_day_then_the_new_one() -> None:
    first, second = signing.new_secret(), signing.new_secret()
    keys = signing.SigningKeys(current=first).rotated(second, NOW)
    assert keys.active(NOW) == (signing.key_of(second), signing.key_of(first))
    headers = signing.headers(keys.active(NOW), "msg_1", NOW, b"{}")
    assert len(headers[signing.SIGNATURE_HEADER].split()) == 2
    for secret in (first, second):  # a receiver with either secret accepts it
        assert signing.verify(secret, headers, b"{}", NOW) == "msg_1"
    later = NOW + signing.PREVIOUS_SECRET_VALID
    assert keys.active(later) == (signing.key_of(second),)
    # (two valid at once, not three: rotating again drops the oldest)
    third = signing.new_secret()
    assert keys.rotated(third, NOW).previous == second
    assert keys.rotated(second, NOW) is keys  # the same secret again changes nothing


def test_a_receiver_refuses_a_changed_body_a_wrong_secret_and_an_old_timestamp() -> None:
    secret = signing.new_secret()
    headers = signing.headers([signing.key_of(secret)], "msg_2", NOW, b'{"a": 1}')
    with pytest.raises(signing.InvalidSignature, match="no signature matches"):
        signing.verify(secret, headers, b'{"a": 2}', NOW)
    with pytest.raises(signing.InvalidSignature, match="no signature matches"):
        signing.verify(signing.new_secret(), headers, b'{"a": 1}', NOW)
    with pytest.raises(signing.InvalidSignature, match="from now"):
        signing.verify(secret, headers, b'{"a": 1}', NOW + timedelta(minutes=6))
    with pytest.raises(signing.InvalidSignature, match="missing"):
        signing.verify(secret, {}, b"", NOW)
    # (header names ignore case, as HTTP's do)
    assert signing.verify(secret, {k.upper(): v for k, v in headers.items()}, b'{"a": 1}', NOW) == "msg_2"
