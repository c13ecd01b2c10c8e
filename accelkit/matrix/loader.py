"""Safe YAML loading for matrix files: line numbers, no duplicate keys, bounded aliases.

Built on `yaml.SafeLoader`, so only plain data (mappings, sequences, scalars) is ever
constructed. On top of it:

- every mapping is a `LocatedMap` that remembers the line of each key, and every sequence a
  `LocatedList` that remembers the line of each item, so later errors can say `file:line`;
- a key written twice in one mapping is an error (PyYAML silently keeps the last one);
- before anything is constructed, the composed node graph is measured as if every alias
  were expanded. PyYAML shares aliased nodes, so a "billion laughs" file composes into a
  few dozen nodes, but anything that walks the result (validation, `json.dumps`) would
  visit 10**9 of them. Measuring with memoisation costs one visit per distinct node, so such
  a file is rejected in microseconds, with the line of the node that crossed the limit.
  Recursive aliases (`&a [*a]`) are rejected too.
"""

from __future__ import annotations

import os
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from accelkit.errors import ConfigError

# A 50-leg matrix file is a few thousand nodes; real files stay far below these limits.
MAX_FILE_BYTES = 1024 * 1024
MAX_EXPANDED_NODES = 100_000
MAX_DEPTH = 64

_MERGE_TAG = "tag:yaml.org,2002:merge"


class LocatedMap(dict[str, Any]):
    """A YAML mapping with the (1-based) line of the mapping and of each of its keys."""

    line: int
    key_lines: dict[str, int]

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.key_lines = {}

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


class LocatedList(list[Any]):
    """A YAML sequence with the (1-based) line of the sequence and of each item."""

    line: int
    item_lines: list[int]

    def __init__(self, line: int) -> None:
        super().__init__()
        self.line = line
        self.item_lines = []

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if 0 <= index < len(self.item_lines) else self.line


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1


class _MatrixLoader(yaml.SafeLoader):
    """SafeLoader that checks the composed graph before constructing located containers."""

    source_path: str = "<matrix>"

    def get_single_data(self) -> Any:
        node = self.get_single_node()
        if node is None:
            return None
        _check_expansion(node, self.source_path)
        return self.construct_document(node)


def _construct_map(loader: _MatrixLoader, node: MappingNode) -> LocatedMap:
    # Duplicate keys are looked for among the keys written here, before merge keys (`<<`)
    # are flattened in: an explicit key may override a merged one, as YAML specifies.
    seen: dict[object, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG or not isinstance(key_node, ScalarNode):
            continue
        if key_node.value in seen:
            raise ConfigError(
                f"key {key_node.value!r} appears twice in one mapping "
                f"(first at line {seen[key_node.value]})",
                path=loader.source_path,
                line=_line(key_node),
            )
        seen[key_node.value] = _line(key_node)
    loader.flatten_mapping(node)
    data = LocatedMap(_line(node))
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            raise ConfigError(
                f"mapping keys must be strings, not {type(key).__name__} {key!r}",
                path=loader.source_path,
                line=_line(key_node),
            )
        data[key] = loader.construct_object(value_node, deep=True)
        data.key_lines[key] = _line(key_node)
    return data


def _construct_list(loader: _MatrixLoader, node: SequenceNode) -> LocatedList:
    data = LocatedList(_line(node))
    for item in node.value:
        data.append(loader.construct_object(item, deep=True))
        data.item_lines.append(_line(item))
    return data


_MatrixLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
_MatrixLoader.add_constructor("tag:yaml.org,2002:seq", _construct_list)


def _check_expansion(root: Node, path: str) -> None:
    """Reject graphs that are cyclic, too deep, or too large once aliases are expanded."""
    sizes: dict[int, int] = {}
    on_stack: set[int] = set()

    def size(node: Node, depth: int) -> int:
        key = id(node)
        known = sizes.get(key)
        if known is not None:
            return known
        if key in on_stack:
            raise ConfigError("recursive YAML alias", path=path, line=_line(node))
        if depth > MAX_DEPTH:
            raise ConfigError(
                f"YAML nested more than {MAX_DEPTH} levels deep", path=path, line=_line(node)
            )
        total = 1
        if isinstance(node, (SequenceNode, MappingNode)):
            on_stack.add(key)
            children: list[Node] = []
            if isinstance(node, SequenceNode):
                children = list(node.value)
            else:
                for key_node, value_node in node.value:
                    children.extend((key_node, value_node))
            for child in children:
                total += size(child, depth + 1)
                if total > MAX_EXPANDED_NODES:
                    raise ConfigError(
                        f"YAML aliases expand to more than {MAX_EXPANDED_NODES} nodes "
                        "(an alias bomb?); refusing to load",
                        path=path,
                        line=_line(node),
                    )
            on_stack.discard(key)
        sizes[key] = total
        return total

    size(root, 0)


def load_yaml(path: str | os.PathLike[str]) -> Any:
    """The plain data of one YAML document, with located containers; ConfigError on trouble."""
    shown = os.fspath(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError("no such file", path=shown) from None
    except IsADirectoryError:
        raise ConfigError("is a directory, not a matrix file", path=shown) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", path=shown) from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"larger than {MAX_FILE_BYTES} bytes; not a matrix file", path=shown)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError("not valid UTF-8", path=shown, line=line) from None
    loader = _MatrixLoader(text)
    loader.source_path = shown
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        mark_line = int(mark.line) + 1 if mark is not None else None
        problem = " ".join(str(part) for part in (exc.context, exc.problem) if part)
        raise ConfigError(f"invalid YAML: {problem}", path=shown, line=mark_line) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {' '.join(str(exc).split())}", path=shown) from None
    except RecursionError:
        raise ConfigError("YAML nested too deeply", path=shown) from None
    finally:
        loader.dispose()
