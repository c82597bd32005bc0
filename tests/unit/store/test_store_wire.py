"""The store's own attribute-value converters agree with boto3's, both ways."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from hypothesis import given
from hypothesis import strategies as st

from punctual.store.table import from_wire as _from_wire
from punctual.store.table import to_wire as _to_wire

scalars = st.one_of(
    st.text(max_size=20),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-(10**9), max_value=10**9),
    st.none(),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
items = st.dictionaries(st.text(min_size=1, max_size=8), values, max_size=6)


def normalised(value: Any) -> Any:
    """What DynamoDB gives back: every number a Decimal."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | Decimal):
        return Decimal(value)
    if isinstance(value, dict):
        return {k: normalised(v) for k, v in value.items()}
    return [normalised(v) for v in value]


@given(items)
def test_an_item_written_as_boto3_would_reads_back_the_same(item: dict[str, Any]) -> None:
    # Given any item / When converted to the wire format and back
    wire = _to_wire(item)
    # Then boto3's serializer writes the same attribute values, and the item reads back unchanged
    serializer, deserializer = TypeSerializer(), TypeDeserializer()
    assert wire == {k: serializer.serialize(v) for k, v in item.items()}
    assert _from_wire(wire) == {k: deserializer.deserialize(v) for k, v in wire.items()} == normalised(item)
