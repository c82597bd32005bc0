"""A request body's strict parse: what json.loads lets through but no store keeps is refused, read
from the text where it can be, and the same as a walk of every value would say."""

from __future__ import annotations

import json

import pytest

from punctual.api.bodies import MAX_BODY_DEPTH, strict_json


def _nested(depth: int, shape: str) -> str:
    if shape == "arrays":
        return "[" * depth + "]" * depth
    if shape == "objects":
        return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)
    # siblings: three arrays side by side inside one, each as deep as the rest allows
    inner = "[" * (depth - 1) + "]" * (depth - 1)
    return "[" + ",".join([inner] * 3) + "]"


@pytest.mark.parametrize("shape", ["arrays", "objects", "siblings"])
def test_nesting_is_refused_past_the_limit_and_taken_up_to_it(shape: str) -> None:
    assert strict_json('{"x":' + _nested(MAX_BODY_DEPTH - 1, shape) + "}")
    with pytest.raises(json.JSONDecodeError, match="nested deeper"):
        strict_json('{"x":' + _nested(MAX_BODY_DEPTH, shape) + "}")


def test_brackets_inside_strings_are_text() -> None:
    text = '{"x": "' + "[" * 200 + '", "y": "\\"]]]\\\\", "z": [1, 2.5e3, true, null, false]}'
    assert strict_json(text)["y"] == '"]]]\\'


@pytest.mark.parametrize(
    ("text", "refused"),
    [
        ('{"x":"\\ud83d\\ude00"}', False),  # a pair: an emoji as json.dumps writes it
        ('{"x":"\\ud800"}', True),
        ('{"x":"\\udc00\\ud800"}', True),  # the wrong order is no pair
        ('{"x":"\\\\ud800\\udc00"}', True),  # the first is text; the second is alone
        ('{"x":"\\\\ud800"}', False),  # text, not an escape
        ('{"x":"\ud800"}', True),  # in the text itself
        ('{"\udc00":1}', True),
    ],
)
def test_an_unpaired_surrogate_is_refused_wherever_it_comes_from(text: str, refused: bool) -> None:
    if refused:
        with pytest.raises(json.JSONDecodeError, match="unpaired surrogate"):
            strict_json(text)
    else:
        assert strict_json(text)


@pytest.mark.parametrize(
    "number",
    ["1e400", "-1e400", "1" + "0" * 309, "-" + "9" * 309, "9" * 4000, "1" + "0" * 400 + ".5"],
)
def test_a_number_no_float_holds_is_refused(number: str) -> None:
    with pytest.raises(json.JSONDecodeError, match="out of range"):
        strict_json('{"x": [1, ' + number + "]}")


@pytest.mark.parametrize("number", ["1e-400", "-2.5e-400", "0.05e-400"])
def test_a_number_too_small_for_a_float_is_refused_not_read_as_zero(number: str) -> None:
    with pytest.raises(json.JSONDecodeError, match="too small"):
        strict_json('{"x": ' + number + "}")


@pytest.mark.parametrize(
    "number",
    ["0", "-0", "0.0", "0e-400", "-0.000e5", "1" + "0" * 308, "1" + "0" * 300 + ".5", "5e-324", "1e308"],
)
def test_numbers_a_float_holds_are_taken(number: str) -> None:
    assert strict_json('{"x": ' + number + "}") == {"x": json.loads(number)}


def test_digits_in_a_string_are_text_not_a_number() -> None:
    assert strict_json('{"x": "' + "9" * 400 + '"}') == {"x": "9" * 400}
