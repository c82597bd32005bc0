"""Make moto's DynamoDB and SQS cheaper per call, for the local stack. Never used on AWS.

Under a burst, moto's DynamoDB was the local stack's bottleneck: an UpdateItem on an execution cost
7 to 13 ms of moto's one core (a PutItem about 1.6 ms), so some forty executions a second used all
of it and left nothing for creating jobs. Where that time went, and what is done about it here:

- Serialising the answer through the service model (`moto.core.serialize`), member by member, was a
  quarter of an UpdateItem that returns its item and most of a GetItem. The item operations' results
  are DynamoDB JSON already, so they are written with `json.dumps`; what the two give is checked
  equal in tests/local/moto/test_speedups.py.
- moto's validator walks the update expression's tree once per check (ten of them), and one check
  (at most one SET, one REMOVE...) counted the clauses again under every node of a SET's chain of
  actions, which grows with the square of the expression's length: a claim that stores its
  execution sets some twenty attributes. That check is made once, on the whole expression (the
  counts under a node are never more than the whole's), and each walk looks up which nodes it
  handles once rather than at every node. A tree is walked, and copied for the validator, by code that
  asks each node's class once whether it is a node (moto's nodes have an ABC metaclass, whose
  isinstance is slow) instead of by `copy.deepcopy` and isinstance at every node.
- Every UpdateItem parsed its update expression twice (once to validate the request, once to apply
  it). Parsing depends on the expression's text alone and moto's validator works on a deep copy of
  the tree, so one parse per distinct expression is kept.
- Even so, validating and applying the update that ends a run (a SET of a dozen attributes, a
  REMOVE of a few) was 70 % of its UpdateItem, about 12 ms of moto's core, and the ends after an
  instant took moto's slots from the creations. An update that only sets top-level attributes to
  given values and removes top-level attributes is applied directly, once the checks moto's
  validator would make are known to pass (`_apply_plain_updates`); any other goes through moto's
  validator, which decides as before. About 4 ms.
- A condition expression is split into its tokens on every write (a third of parsing a condition,
  which was a tenth of moto's CPU under a creation flood): the tokens depend on its text alone and
  are kept per distinct expression; what follows (names, values, the check) is moto's as before.

- A projection read the whole item into plain JSON once per projected path and built the result
  back from it: a quarter of a millisecond an item, most of the BatchGetItem every execution makes at
  its instant (whether its job changed: three attributes of up to a hundred jobs). A projection of
  top-level attributes only takes them from the item as they are; one with nested paths is moto's.

- moto 5's Table.query sorted every item of the table before keeping the partition's
  (`query_only_the_partition`); on an index, it sorted every item, kept those of the queried key,
  and sorted them again, comparing moto's typed values in Python (`query_only_the_partition` too):
  at a data directory of 34,000 items a page of `GET /jobs` took 1.5 s of moto's time.
- moto's SQS receive checked each message's retention by counting the whole queue
  (`lighten_sqs_receives`).
- Every DynamoDB and SQS request matched its operation four or five times
  (`route_each_request_once`), and every request listed its handler class's methods
  (`list_actions_once`).

Conditions and the write are moto's own code, unchanged; so are the checks, but for a plain update's.
"""

from __future__ import annotations

import base64
import functools
import importlib
import json
import re
import threading
import time
from collections import deque
from typing import Any

from punctual_local.moto.items import all_items as iter_items

# Operations whose results hold items, keys and counts only (no timestamps, no shapes to apply).
_JSON_AS_IS = frozenset(
    {
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "BatchGetItem",
        "BatchWriteItem",
        "Query",
        "Scan",
        "TransactWriteItems",
        "TransactGetItems",
    }
)
_PARSES_KEPT = 4096


def _module(name: str) -> Any:
    """(moto's expression modules have no types: taken as Any)"""
    return importlib.import_module(name)


_PATCHED = False


def speed_up_dynamodb() -> None:
    global _PATCHED
    if _PATCHED:
        return
    _write_item_results_as_json()
    _parse_each_update_expression_once()
    _lex_each_condition_once()
    _validate_in_one_pass_per_processor()
    _walk_trees_faster()
    _project_top_level_attributes_directly()
    _apply_plain_updates()
    _PATCHED = True


def _write_item_results_as_json() -> None:
    from moto.core.responses import ActionResult
    from moto.dynamodb.responses import DynamoHandler

    serialized = DynamoHandler.serialized

    def fast(self: Any, action_result: ActionResult) -> Any:
        result = action_result.result
        if isinstance(result, dict) and self._get_action() in _JSON_AS_IS:
            if "ConsumedCapacity" in result:
                result = {**result, "ConsumedCapacity": _as_doubles(result["ConsumedCapacity"])}
            body = json.dumps(result, separators=(",", ":"), default=_blob)
            headers = {"Content-Type": "application/x-amz-json-1.0", **self.response_headers}
            return 200, headers, body
        return serialized(self, action_result)

    DynamoHandler.serialized = fast  # type: ignore[method-assign]


def _as_doubles(capacity: Any) -> Any:
    """Capacity units as the service model's Double writes them (3.0, not 3)."""
    if isinstance(capacity, list):
        return [_as_doubles(entry) for entry in capacity]
    if isinstance(capacity, dict):
        return {
            name: float(value)
            if name in ("CapacityUnits", "ReadCapacityUnits", "WriteCapacityUnits")
            else _as_doubles(value)
            for name, value in capacity.items()
        }
    return capacity


def _blob(value: Any) -> str:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _parse_each_update_expression_once() -> None:
    models = _module("moto.dynamodb.models")
    responses = _module("moto.dynamodb.responses")
    make = _module("moto.dynamodb.parsing.expressions").UpdateExpressionParser.make

    @functools.lru_cache(maxsize=_PARSES_KEPT)
    def parsed(expression: str) -> Any:
        return make(expression)

    class _Parser:
        @staticmethod
        def make(expression: str) -> Any:
            tree = parsed(expression)
            _parsed_here.last = (tree, _plain_plan(expression))
            return tree

    # (both modules imported the class by name)
    models.UpdateExpressionParser = _Parser
    responses.UpdateExpressionParser = _Parser


# The tree this thread parsed last, and its expression's plan if plain (`_apply_plain_updates`).
_parsed_here = threading.local()
_PLAIN_NAME = r"(?:#[A-Za-z0-9_]+|[A-Za-z_][A-Za-z0-9_]*)"
_PLAIN_SET = re.compile(rf"\s*({_PLAIN_NAME})\s*=\s*(:[A-Za-z0-9_]+)\s*")
_PLAIN_REMOVE = re.compile(rf"\s*({_PLAIN_NAME})\s*")
_CLAUSE = re.compile(r"\b(SET|REMOVE)\b", re.IGNORECASE)


@functools.lru_cache(maxsize=_PARSES_KEPT)
def _plain_plan(expression: str) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...]] | None:
    """A SET of top-level attributes to values and a REMOVE of top-level attributes, each clause at
    most once: its (name, value) pairs and its names. None for anything else (paths into maps and
    lists, functions, arithmetic, ADD, DELETE), which moto applies itself. Only called on an
    expression moto parsed: its syntax is valid."""
    parts = _CLAUSE.split(expression)
    if parts[0].strip():
        return None
    reserved = _module("moto.dynamodb.parsing.reserved_keywords").ReservedKeywords.get_reserved_keywords()
    sets: list[tuple[str, str]] = []
    removes: list[str] = []
    seen: set[str] = set()
    for keyword, body in zip(parts[1::2], parts[2::2], strict=True):
        clause = keyword.upper()
        if clause in seen:
            return None
        seen.add(clause)
        for action in body.split(","):
            if clause == "SET":
                match = _PLAIN_SET.fullmatch(action)
                if match is None:
                    return None
                sets.append((match.group(1), match.group(2)))
            else:
                match = _PLAIN_REMOVE.fullmatch(action)
                if match is None:
                    return None
                removes.append(match.group(1))
    # (a name written as itself that is a reserved word is refused by moto's validator)
    if any(not n.startswith("#") and n.upper() in reserved for n in [*(n for n, _ in sets), *removes]):
        return None
    return tuple(sets), tuple(removes)


class _PlainUpdate:
    """A plain update's attributes resolved: what is set (to DynamoDB JSON values) and removed."""

    def __init__(self, sets: dict[str, Any], removes: list[str]) -> None:
        self.sets = sets
        self.removes = removes

    def normalize(self) -> None:
        pass


def _resolve_plain(
    plan: tuple[tuple[tuple[str, str], ...], tuple[str, ...]],
    names: dict[str, str] | None,
    values: dict[str, Any] | None,
    table: Any,
) -> _PlainUpdate | None:
    """The plan's attributes and values, or None where any of moto's checks could refuse it (a name
    or value not given, an attribute twice, a key of the table, an index's key given an empty string
    or a type other than its own): moto's validator then decides, as it always did."""
    names, values = names or {}, values or {}

    def name_of(token: str) -> str | None:
        return names.get(token) if token.startswith("#") else token

    sets: dict[str, Any] = {}
    removes: list[str] = []
    touched: set[str] = set()
    table_keys = set(table.table_key_attrs)
    index_keys = set(table.attribute_keys)
    defined = {d["AttributeName"]: d["AttributeType"] for d in table.attr}
    for token, value_token in plan[0]:
        name, value = name_of(token), values.get(value_token)
        if name is None or value is None or name in touched or name in table_keys:
            return None
        kind = next(iter(value)) if isinstance(value, dict) and len(value) == 1 else None
        if kind is None:
            return None
        if name in index_keys or token in defined or name in defined:
            if kind in ("S", "B") and not value[kind]:
                return None
            if defined.get(token, kind) != kind or defined.get(name, kind) != kind:
                return None
        touched.add(name)
        sets[name] = value
    for token in plan[1]:
        name = name_of(token)
        if name is None or name in touched or name in table_keys:
            return None
        touched.add(name)
        removes.append(name)
    return _PlainUpdate(sets, removes)


def _apply_plain_updates() -> None:
    """moto validates an update expression by walking its tree ten times and applies it by walking
    it again: 70 % of an UpdateItem that ends a run (a SET of a dozen attributes and a REMOVE of a
    few), which took moto's slots from the creations after each instant. An update that only sets
    top-level attributes to given values and removes top-level attributes is applied directly, once
    the checks moto would make are known to pass (`_resolve_plain`); the rest is moto's, as is every
    update that is not so plain. The condition, the item's creation, its size limit and the stream
    record stay moto's own code (its UpdateItem calls these two in turn)."""
    models = _module("moto.dynamodb.models")
    DynamoType = _module("moto.dynamodb.models.dynamo_type").DynamoType
    Validator, Executor = models.UpdateExpressionValidator, models.UpdateExpressionExecutor

    def validator(
        ast: Any,
        expression_attribute_names: Any,
        expression_attribute_values: Any,
        item: Any,
        table: Any,
    ) -> Any:
        last = getattr(_parsed_here, "last", None)
        if last is not None and last[0] is ast and last[1] is not None:
            plain = _resolve_plain(last[1], expression_attribute_names, expression_attribute_values, table)
            if plain is not None:
                return _Validated(plain)
        return Validator(
            ast,
            expression_attribute_names=expression_attribute_names,
            expression_attribute_values=expression_attribute_values,
            item=item,
            table=table,
        )

    class _Validated:
        def __init__(self, plain: _PlainUpdate) -> None:
            self._plain = plain

        def validate(self) -> _PlainUpdate:
            return self._plain

    def executor(validated: Any, item: Any, expression_attribute_names: Any) -> Any:
        if isinstance(validated, _PlainUpdate):
            return _Applied(validated, item)
        return Executor(validated, item, expression_attribute_names)

    class _Applied:
        def __init__(self, plain: _PlainUpdate, item: Any) -> None:
            self._plain = plain
            self._item = item

        def execute(self) -> None:
            attrs = self._item.attrs
            for name, value in self._plain.sets.items():
                attrs[name] = DynamoType(value)
            for name in self._plain.removes:
                attrs.pop(name, None)

    models.UpdateExpressionValidator = validator
    models.UpdateExpressionExecutor = executor


def _lex_each_condition_once() -> None:
    parser = _module("moto.dynamodb.comparisons").ConditionExpressionParser
    lex = parser._lex_condition_expression
    lexed: dict[str, tuple[Any, ...]] = {}

    def lex_once(self: Any) -> deque[Any]:
        expression = self.condition_expression
        nodes = lexed.get(expression)
        if nodes is None:
            nodes = tuple(lex(self))
            if len(lexed) < _PARSES_KEPT:
                lexed[expression] = nodes
        # (the tokens are named tuples, never changed; the parse consumes the deque it is given)
        return deque(nodes)

    parser._lex_condition_expression = lex_once


def _validate_in_one_pass_per_processor() -> None:
    ast_nodes = _module("moto.dynamodb.parsing.ast_nodes")
    DepthFirstTraverser, UpdateExpression = ast_nodes.DepthFirstTraverser, ast_nodes.UpdateExpression
    ActionCountValidator = _module("moto.dynamodb.parsing.validators").ActionCountValidator

    def count_once(self: Any, node: Any) -> Any:
        if isinstance(node, UpdateExpression):
            self.verify_action_counts(node)
        return node

    ActionCountValidator.traverse = count_once

    def processing_map(self: Any) -> dict[type, Any]:
        kept = self.__dict__.get("_punctual_map")
        if kept is None:
            kept = self.__dict__["_punctual_map"] = self._processing_map()
        return kept

    def nodes_to_be_processed(self: Any) -> tuple[type, ...]:
        kept = self.__dict__.get("_punctual_types")
        if kept is None:
            kept = self.__dict__["_punctual_types"] = tuple(processing_map(self))
        return kept

    def process(self: Any, node: Any) -> Any:
        for class_key, processor in processing_map(self).items():
            if isinstance(node, class_key):
                return processor(node)
        return None

    # (subclasses that define their own keep theirs)
    DepthFirstTraverser.nodes_to_be_processed = nodes_to_be_processed
    DepthFirstTraverser.process = process


def _walk_trees_faster() -> None:
    import copy

    validators = _module("moto.dynamodb.parsing.validators")
    ast_nodes = _module("moto.dynamodb.parsing.ast_nodes")
    DepthFirstTraverser, Node = ast_nodes.DepthFirstTraverser, ast_nodes.Node

    is_node: dict[type, bool] = {}

    def node_class(kind: type) -> bool:
        known = is_node.get(kind)
        if known is None:
            known = is_node[kind] = issubclass(kind, Node)
        return known

    def clone(node: Any, parent: Any) -> Any:
        """A deep copy of a tree of moto's nodes (whose attributes are type, children and parent)."""
        new = object.__new__(type(node))
        attributes = node.__dict__.copy()
        attributes["parent"] = parent
        children = attributes.get("children")
        if children is not None:
            copied = []
            for child in children:
                kind = type(child)
                # (names and tokens, nearly half a tree's children: immutable, kept as they are)
                if kind in _IMMUTABLE:
                    copied.append(child)
                elif node_class(kind):
                    copied.append(clone(child, new))
                else:
                    copied.append(copy.deepcopy(child))
            attributes["children"] = copied
        new.__dict__ = attributes
        return new

    def deepcopy(value: Any, memo: Any = None) -> Any:
        if (
            memo is None
            and node_class(type(value))
            and value.parent is None
            and set(value.__dict__) <= _NODE_ATTRS
        ):
            return clone(value, None)
        return copy.deepcopy(value, memo)

    validators.deepcopy = deepcopy

    plain_pre = DepthFirstTraverser.pre_processing_of_child

    def traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
        if not node_class(type(node)):
            return node
        handled = self.__dict__.get("_punctual_handled")
        if handled is None:
            handled = self.__dict__["_punctual_handled"] = {}
        parent_node = node.parent
        children = node.children
        if children is not None:
            pre = None if type(self).pre_processing_of_child is plain_pre else self.pre_processing_of_child
            for i, child_node in enumerate(children):
                if pre is not None:
                    pre(node, i)
                self.traverse_node_recursively(child_node, i)
        kind = type(node)
        handles = handled.get(kind)
        if handles is None:
            handles = handled[kind] = issubclass(kind, self.nodes_to_be_processed())
        if handles:
            node = self.process(node)
            node.parent = parent_node
            if parent_node:
                parent_node.children[child_id] = node
        return node

    DepthFirstTraverser.traverse_node_recursively = traverse_node_recursively


_NODE_ATTRS = frozenset({"type", "children", "parent"})
_IMMUTABLE = frozenset({str, int, float, bool, type(None)})


def _project_top_level_attributes_directly() -> None:
    from moto.dynamodb.models.dynamo_type import Item

    project = Item.project

    def fast(self: Any, projection_expressions: list[list[str]]) -> Any:
        if not all(len(path) == 1 and "[" not in path[0] for path in projection_expressions):
            return project(self, projection_expressions)
        projected = Item(self.hash_key, self.range_key, {})
        for (name,) in projection_expressions:
            if name in self.attrs:
                # Shared with the stored item (a projection is only ever read, to answer the call), and
                # set past the size check, which sums the whole item again on every attribute set:
                # the stored item passed it.
                dict.__setitem__(projected.attrs, name, self.attrs[name])
        return projected

    Item.project = functools.wraps(project)(fast)  # type: ignore[method-assign]


_partition = threading.local()


_QUERY_INDEX_NAME_ARG = 6  # Table.query(hash_key, range_comparison, ..., index_name, ...): its place


def query_only_the_partition() -> None:
    """Answer a query on the table's own key from that partition's items, as DynamoDB does.

    moto 5's Table.query sorts every item of the table (all_items) and then keeps the partition's,
    so each of the scanner's queries (shards x minutes, every tick) cost more as the table grew:
    a tick took seconds at the precision benchmark's 7,000 items, and moto was busy for the handlers
    meanwhile. While a thread runs such a query, all_items returns only the partition's items, in
    the order all_items would. Queries on an index, and everything else, are left as they are.
    """
    from moto.dynamodb.models.table import Table

    if getattr(Table, "_punctual_partition_queries", False):
        return
    original_query, original_all_items = Table.query, Table.all_items

    original_sorted_items = Table.sorted_items

    def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = args[_QUERY_INDEX_NAME_ARG] if len(args) > _QUERY_INDEX_NAME_ARG else None
        index_name = index_name or kwargs.get("index_name")
        if index_name is not None:
            # (moto keeps the items whose index key matches, and sorts those: the others need not
            # come, nor in order)
            _partition.index_key = [
                (name, value.type, value.cast_value)
                for name, value in kwargs.get("hash_key_conditions") or ()
            ]
            try:
                return original_query(self, hash_key, *args, **kwargs)
            finally:
                _partition.index_key = None
        if hash_key is None:
            return original_query(self, hash_key, *args, **kwargs)
        _partition.key = hash_key
        try:
            return original_query(self, hash_key, *args, **kwargs)
        finally:
            _partition.key = None

    def all_items(self: Any) -> Any:
        wanted = getattr(_partition, "index_key", None)
        if wanted:
            return [item for item in iter_items(self) if _has_all(item.attrs, wanted)]
        key = getattr(_partition, "key", None)
        if key is None or not self.range_key_attr:
            return original_all_items(self)
        return sorted(self.items.get(key, {}).values(), key=lambda item: item.range_key)

    def sorted_items(self: Any, hash_key_attrs: Any, range_key_attrs: Any, items: list[Any]) -> list[Any]:
        # (the same order, by the typed values moto's own comparisons read, compared as they are)
        names = self._generate_attr_to_sort_by(hash_key_attrs, range_key_attrs)
        try:
            items.sort(key=lambda item: tuple(item.attrs[name].cast_value for name in names))
        except (KeyError, TypeError):
            return original_sorted_items(self, hash_key_attrs, range_key_attrs, items)
        return items

    Table.query = query  # type: ignore[method-assign]
    Table.all_items = all_items  # type: ignore[method-assign]
    Table.sorted_items = sorted_items  # type: ignore[method-assign]
    Table._punctual_partition_queries = True  # type: ignore[attr-defined]


def _has_all(attrs: dict[str, Any], wanted: list[tuple[str, str, Any]]) -> bool:
    for name, kind, value in wanted:
        have = attrs.get(name)
        if have is None or have.type != kind or have.cast_value != value:
            return False
    return True


def lighten_sqs_receives() -> None:
    """Two costs of moto's ReceiveMessage that grew with the queue, under a burst most of moto's time.

    - For every message it hands out, it checks the message against the queue's retention period
      by asking for all of the queue's attributes, which counts the visible, in-flight and delayed
      messages one by one: a receive cost the square of what the queue held (executions claimed
      ahead of their instant hold their messages in flight). The period is read from its field.
    - Each look at a message (visible? delayed?) read the time through moto's unix_time, which
      builds two datetimes and runs an import: the time is read as time.time(), the same clock.
    """
    import moto.sqs.models as sqs_models
    from moto.core.utils import unix_time as moto_unix_time

    def unix_time(dt: Any = None) -> float:
        return time.time() if dt is None else float(moto_unix_time(dt))

    def unix_time_millis(dt: Any = None) -> float:
        return unix_time(dt) * 1000.0

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        retention = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention + (message.sent_timestamp or 0) / 1000 > unix_time())

    sqs_models.unix_time = unix_time
    sqs_models.unix_time_millis = unix_time_millis
    sqs_models.SQSBackend.is_message_valid_based_on_retention_period = (  # type: ignore[method-assign]
        is_message_valid_based_on_retention_period
    )


def route_each_request_once() -> None:
    """moto's DynamoDB and SQS handlers work out a request's operation each time they ask for it:
    four or five times a request, each a match of the request's method, path and target against the
    service's routes. The answer depends on the request alone. So it is kept on the handler, with
    the request it was for and the path parameters the match set (those two services have none).
    Other services' handlers are left as they are."""
    from moto.dynamodb.responses import DynamoHandler
    from moto.sqs.responses import SQSResponse

    handlers: tuple[Any, ...] = (DynamoHandler, SQSResponse)
    for handler in handlers:
        if getattr(handler, "_punctual_routed_once", False):
            continue
        get_action = handler._get_action

        def action_of(self: Any, get_action: Any = get_action) -> Any:
            request = self.normalized_request
            kept = self.__dict__.get("_punctual_action")
            if kept is not None and kept[0] is request:
                self.uri_match = kept[2]
                return kept[1]
            action = get_action(self)
            self.__dict__["_punctual_action"] = (request, action, getattr(self, "uri_match", {}))
            return action

        handler._get_action = action_of
        handler._punctual_routed_once = True


def list_actions_once() -> None:
    """moto finds which actions a service's handler answers by listing the class's members on every
    request (inspect.getmembers: a few percent of each DynamoDB call). A class's members do not change
    while it serves: listed once per class."""
    import moto.core.responses as core_responses

    if getattr(core_responses, "_punctual_actions_listed_once", False):
        return
    core_responses.method_names_from_class = functools.lru_cache(maxsize=None)(
        core_responses.method_names_from_class
    )
    core_responses._punctual_actions_listed_once = True  # type: ignore[attr-defined]
