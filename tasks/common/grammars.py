"""The tree-sitter grammars ctxrag parses code with, and what it looks for in each: definitions and their names.

One PyPI package per grammar (``tree-sitter-python``, ...), each a compiled wheel: nothing is downloaded at run time.
A file's grammar comes from its name (``grammars_for``); a language not listed here has none, and its files are cut
by the regex chunker, as are those of ``REGEX_BY_CHOICE`` (``regex_by_choice``: the chunker and the contextualizer
ask it; ``ctxrag.tasks.common.syntax.outline`` reads any file it has a grammar for). Each grammar's ``Patterns`` are tree-sitter queries that capture a definition node
(``@definition``) and its name (``@name``); ``TOP_LEVEL`` marks patterns that count only outside any other definition
(``const config = {...}`` is a definition at the top of a module, a statement inside a function).
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from ctxrag.tasks.common.languages import language_of

if TYPE_CHECKING:
    from tree_sitter import Language, Parser, Query

# Languages read by the regex heuristics by choice, though they have a grammar: Python's suite figures did not all hold
# on the tree (docs/decisions.md, "Syntax trees for code").
REGEX_BY_CHOICE: frozenset[str] = frozenset({"python"})
TOP_LEVEL = "top:"  # a pattern's prefix: only outside any other definition

_FUNCTION_VALUES = "[(arrow_function) (function_expression) (generator_function) (class)]"
_JS_COMMON = (
    "(function_declaration name: (_) @name) @definition",
    "(generator_function_declaration name: (_) @name) @definition",
    "(class_declaration name: (_) @name) @definition",
    "(method_definition name: (_) @name) @definition",
    f"(lexical_declaration (variable_declarator name: (identifier) @name value: {_FUNCTION_VALUES})) @definition",
    f"(variable_declaration (variable_declarator name: (identifier) @name value: {_FUNCTION_VALUES})) @definition",
    f"(assignment_expression left: (member_expression property: (_) @name) right: {_FUNCTION_VALUES}) @definition",
    "(pair key: (_) @name value: [(arrow_function) (function_expression)]) @definition",
    TOP_LEVEL
    + "(lexical_declaration (variable_declarator name: (identifier) @name value: [(object) (array)])) @definition",
    TOP_LEVEL
    + "(variable_declaration (variable_declarator name: (identifier) @name value: [(object) (array)])) @definition",
    TOP_LEVEL + "(assignment_expression left: (member_expression) @name right: (object)) @definition",
    TOP_LEVEL + '(export_statement "default" @name value: (object)) @definition',
)
_TS_EXTRA = (
    "(public_field_definition name: (_) @name value: [(arrow_function) (function_expression)]) @definition",
    "(abstract_class_declaration name: (_) @name) @definition",
    "(interface_declaration name: (_) @name) @definition",
    "(type_alias_declaration name: (_) @name) @definition",
    "(enum_declaration name: (_) @name) @definition",
    "(internal_module name: (_) @name) @definition",
    "(module name: (_) @name) @definition",
)
_C_FUNCTIONS = (
    "(function_definition declarator: (function_declarator declarator: (_) @name)) @definition",
    "(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator: (_) @name))) @definition",
    "(struct_specifier name: (_) @name body: (_)) @definition",
    "(union_specifier name: (_) @name body: (_)) @definition",
    "(enum_specifier name: (_) @name body: (_)) @definition",
    "(type_definition declarator: (type_identifier) @name) @definition",
)
_COMMENTS = frozenset({"comment", "line_comment", "block_comment"})


@dataclass(frozen=True)
class Grammar:
    """A grammar: where its language comes from, its definition patterns, the node types that wrap a definition
    (``export``, decorators) and those that go with the definition after them (comments, attributes)."""

    module: str
    function: str
    patterns: tuple[str, ...]
    wrappers: frozenset[str] = frozenset()
    prefixes: frozenset[str] = _COMMENTS


GRAMMARS: dict[str, Grammar] = {
    "python": Grammar(
        "tree_sitter_python",
        "language",
        (
            "(function_definition name: (identifier) @name) @definition",
            "(class_definition name: (identifier) @name) @definition",
        ),
        frozenset({"decorated_definition"}),
    ),
    "javascript": Grammar(
        "tree_sitter_javascript",
        "language",
        _JS_COMMON
        + ("(field_definition property: (_) @name value: [(arrow_function) (function_expression)]) @definition",),
        frozenset({"export_statement", "expression_statement"}),
    ),
    "typescript": Grammar(
        "tree_sitter_typescript",
        "language_typescript",
        _JS_COMMON + _TS_EXTRA,
        frozenset({"export_statement", "expression_statement", "ambient_declaration"}),
    ),
    "tsx": Grammar(
        "tree_sitter_typescript",
        "language_tsx",
        _JS_COMMON + _TS_EXTRA,
        frozenset({"export_statement", "expression_statement", "ambient_declaration"}),
    ),
    "go": Grammar(
        "tree_sitter_go",
        "language",
        (
            "(function_declaration name: (identifier) @name) @definition",
            "(method_declaration name: (field_identifier) @name) @definition",
            "(type_declaration (type_spec name: (type_identifier) @name)) @definition",
        ),
    ),
    "java": Grammar(
        "tree_sitter_java",
        "language",
        tuple(
            f"({kind} name: (identifier) @name) @definition"
            for kind in (
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
                "annotation_type_declaration",
                "method_declaration",
                "constructor_declaration",
            )
        ),
    ),
    "rust": Grammar(
        "tree_sitter_rust",
        "language",
        (
            "(function_item name: (identifier) @name) @definition",
            "(struct_item name: (type_identifier) @name) @definition",
            "(enum_item name: (type_identifier) @name) @definition",
            "(union_item name: (type_identifier) @name) @definition",
            "(trait_item name: (type_identifier) @name) @definition",
            "(impl_item type: (_) @name) @definition",
            "(mod_item name: (identifier) @name body: (_)) @definition",
            "(macro_definition name: (identifier) @name) @definition",
            "(type_item name: (type_identifier) @name) @definition",
            TOP_LEVEL + "(const_item name: (identifier) @name) @definition",
            TOP_LEVEL + "(static_item name: (identifier) @name) @definition",
        ),
        prefixes=_COMMENTS | {"attribute_item"},
    ),
    "c": Grammar("tree_sitter_c", "language", _C_FUNCTIONS, frozenset({"declaration"})),
    "cpp": Grammar(
        "tree_sitter_cpp",
        "language",
        _C_FUNCTIONS
        + (
            "(function_definition declarator: (reference_declarator (function_declarator declarator: (_) @name))) @definition",
            "(class_specifier name: (_) @name body: (_)) @definition",
            "(namespace_definition name: (_) @name) @definition",
        ),
        frozenset({"declaration", "template_declaration"}),
    ),
    "shell": Grammar("tree_sitter_bash", "language", ("(function_definition name: (word) @name) @definition",)),
}
# A language's grammars, tried in order (a header may be C++ or C): by language, then by extension where it decides.
_BY_LANGUAGE: dict[str, tuple[str, ...]] = {name: (name,) for name in GRAMMARS if name != "tsx"}
_BY_EXTENSION: dict[str, tuple[str, ...]] = {"tsx": ("tsx",), "h": ("cpp", "c")}  # C++ reads most C


def grammars_for(path: str) -> tuple[str, ...]:
    """The grammars to parse the file at ``path`` with, in order; none for a language without one."""
    language = language_of(path)
    if language is None:
        return ()
    extension = PurePosixPath(path).suffix.lower().lstrip(".")
    return _BY_EXTENSION.get(extension, _BY_LANGUAGE.get(language, ()))


def regex_by_choice(path: str) -> bool:
    """Whether the file at ``path`` is read by the regex heuristics by choice (``REGEX_BY_CHOICE``), not for want of
    a grammar or of a clean parse."""
    return language_of(path) in REGEX_BY_CHOICE


@dataclass(frozen=True)
class Loaded:
    """A grammar ready to use: its language, its compiled query and which of its patterns are top-level only."""

    language: Language
    query: Query
    top_level: frozenset[int]


_loaded: dict[str, Loaded] = {}
_local = threading.local()  # a parser per thread and grammar: a Parser is not to be shared by threads


def loaded(name: str) -> Loaded:
    """The grammar ``name``'s language and query, made once per process."""
    if name not in _loaded:
        from tree_sitter import Language, Query

        grammar = GRAMMARS[name]
        language = Language(getattr(importlib.import_module(grammar.module), grammar.function)())
        patterns = [pattern.removeprefix(TOP_LEVEL) for pattern in grammar.patterns]
        top = frozenset(index for index, pattern in enumerate(grammar.patterns) if pattern.startswith(TOP_LEVEL))
        _loaded[name] = Loaded(language, Query(language, "\n".join(patterns)), top)
    return _loaded[name]


def parser(name: str) -> Parser:
    """This thread's parser for grammar ``name``."""
    from tree_sitter import Parser

    parsers: dict[str, Parser] = _local.__dict__.setdefault("parsers", {})
    if name not in parsers:
        parsers[name] = Parser(loaded(name).language)
    return parsers[name]
