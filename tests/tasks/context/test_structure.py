"""Structure heuristics: definitions, leading comments, enclosing definitions, URL path words."""

from __future__ import annotations

import pytest

from ctxrag.tasks.context.structure import (
    Definition,
    defined_names,
    enclosing_definitions,
    find_definitions,
    leading_comment,
    mentioned_names,
    url_path_words,
)

RUST = """\
//! A tiny queue.
use std::collections::VecDeque;

pub struct Queue<T> {
    items: VecDeque<T>,
}

impl<T> Queue<T> {
    pub fn push(&mut self, item: T) {
        self.items.push_back(item);
    }
}

impl<T> Default for Queue<T> {
    fn default() -> Self { todo!() }
}

pub(crate) enum State { Idle, Busy }
trait Runner {}
"""

PYTHON = '''\
#!/usr/bin/env python
# Copyright 2024 Example Corp. All rights reserved.
# Licensed under the Apache License, Version 2.0.
"""Retry helpers for workers."""

import time


class Retry:
    def __init__(self, attempts):
        self.attempts = attempts

    async def run(self, job):
        for attempt in range(self.attempts):
            if (attempt > 1):
                time.sleep(attempt)


def backoff(n):
    return 2 ** n
'''

JAVA = """\
package com.example;

public class Worker {
    private final int size;

    public Worker(int size) {
        this.size = size;
    }

    public static void main(String[] args) {
        int count = args.length;
        if (count > 0) {
            System.out.println(args[0]);
        }
        for (int i = 0; i < count; i++) {
            run(i);
        }
        while (count > 0) {
            count--;
        }
    }
}

interface Job {
    void run();
}
"""

CPP = """\
#include <vector>

namespace tinyq {

class Store {
public:
    int get(int key) const;
};

int Store::get(int key) const {
    int result = key;
    if (key < 0) {
        return -1;
    }
    return result;
}

static std::vector<int> load_all(const char* path) {
    std::vector<int> out;
    for (int i = 0; i < 10; ++i) {
        out.push_back(i);
    }
    return out;
}

}  // namespace tinyq
"""

CONTROL = {"if", "for", "while", "switch", "return", "catch", "else", "elif"}


def names(text: str) -> list[str]:
    return [definition.name for definition in find_definitions(text)]


def assert_no_control_statements(text: str) -> None:
    for definition in find_definitions(text):
        assert definition.name not in CONTROL
        assert definition.header.split("(")[0].split()[-1] not in CONTROL
        assert not definition.header.startswith(tuple(f"{word} " for word in CONTROL))


# --- find_definitions --------------------------------------------------------------------------------------------


def test_rust_definitions() -> None:
    found = [(d.name, d.indent, d.header) for d in find_definitions(RUST)]
    assert found == [
        ("Queue", 0, "pub struct Queue<T>"),
        ("Queue", 0, "impl<T> Queue<T>"),
        ("push", 4, "pub fn push(&mut self, item: T)"),
        ("Queue", 0, "impl<T> Default for Queue<T>"),  # an impl is named after the type it is for
        ("default", 4, "fn default() -> Self { todo!() }"),
        ("State", 0, "pub(crate) enum State { Idle, Busy }"),
        ("Runner", 0, "trait Runner {}"),
    ]


def test_python_definitions() -> None:
    found = [(d.name, d.indent, d.header) for d in find_definitions(PYTHON)]
    assert found == [
        ("Retry", 0, "class Retry"),
        ("__init__", 4, "def __init__(self, attempts)"),
        ("run", 4, "async def run(self, job)"),
        ("backoff", 0, "def backoff(n)"),
    ]
    assert_no_control_statements(PYTHON)


def test_java_definitions() -> None:
    found = [(d.name, d.indent, d.header) for d in find_definitions(JAVA)]
    assert found == [
        ("Worker", 0, "public class Worker"),
        ("Worker", 4, "public Worker(int size)"),  # constructor
        ("main", 4, "public static void main(String[] args)"),
        ("Job", 0, "interface Job"),  # `void run();` is a declaration, not a definition
    ]
    assert_no_control_statements(JAVA)


def test_cpp_definitions() -> None:
    found = [(d.name, d.indent, d.header) for d in find_definitions(CPP)]
    assert found == [
        ("tinyq", 0, "namespace tinyq"),
        ("Store", 0, "class Store"),
        ("get", 0, "int Store::get(int key) const"),  # qualified name: the last part
        ("load_all", 0, "static std::vector<int> load_all(const char* path)"),
    ]
    assert_no_control_statements(CPP)


def test_definitions_are_in_order_of_appearance_with_their_offsets() -> None:
    definitions = find_definitions(PYTHON)
    assert [d.offset for d in definitions] == sorted(d.offset for d in definitions)
    for definition in definitions:
        line_start = PYTHON.rfind("\n", 0, definition.offset + 1) + 1
        assert definition.offset == line_start
        assert definition.name in PYTHON[definition.offset :].splitlines()[0]


@pytest.mark.parametrize(
    "line",
    [
        "if (ready) {\n",
        "    if (ready) {\n",
        "} else if (x) {\n",
        "    for (auto& x : items) {\n",
        "    for (int i = 0; i < n; i++) {\n",
        "    while (running) {\n",
        "    switch (kind) {\n",
        "    return compute(x)\n",
        "    if (attempt > 1):\n",
        "    elif (x):\n",
        "    } catch (Exception e) {\n",
        "    int get(int key) const;\n",
        "    total = compute(x)\n",
    ],
)
def test_control_statements_calls_and_declarations_are_not_definitions(line: str) -> None:
    assert find_definitions(line) == []


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("func Start(addr string) error {\n", "Start"),
        ("export async function fetchAll(urls) {\n", "fetchAll"),
        ("export default class App extends Base {\n", "App"),
        ("type Config struct {\n", "Config"),
        ("interface Shape {\n", "Shape"),
        ("mod storage;\n", "storage"),
        ("pub(crate) fn helper() {}\n", "helper"),
    ],
)
def test_keyword_definitions_in_other_languages(source: str, name: str) -> None:
    assert names(source)[0] == name


def test_empty_text_has_no_definitions() -> None:
    assert find_definitions("") == []
    assert find_definitions("just some prose without code\n") == []


def test_go_method_is_named_after_the_method_not_the_receiver() -> None:
    assert names("func (s *Server) Start() error {\n\treturn nil\n}\n") == ["Start"]


def test_rust_macro_rules_is_a_definition() -> None:
    assert names("macro_rules! qpush {\n    () => {};\n}\n") == ["qpush"]


def test_c_function_with_an_empty_body_does_not_swallow_the_next_one() -> None:
    source = "void start() {\n}\n\nvoid stop() {\n    running_ = false;\n}\n"
    found = [(d.name, d.header) for d in find_definitions(source)]
    assert found == [("start", "void start()"), ("stop", "void stop()")]


@pytest.mark.parametrize(
    "line",
    [
        "        raise UnknownTask(name) from None\n",
        "    await sleep(delay)\n",
        "    yield from drain(self)\n",
        "    match parse(input) {\n",
    ],
)
def test_statements_that_call_are_not_definitions(line: str) -> None:
    assert find_definitions(line) == []


# --- defined_names, mentioned_names ------------------------------------------------------------------------------


def test_defined_names_are_lowercased_once_each_and_skip_short_names() -> None:
    assert defined_names(RUST) == ["queue", "push", "default", "state", "runner"]  # Queue's impls add nothing new
    assert defined_names(JAVA) == ["worker", "main", "job"]
    assert defined_names("def fn(x):\n    return x\n\ndef __ab__(y):\n    pass\n") == []  # fn, __ab__: under 3 letters
    assert defined_names("Just prose, no code.") == []


def test_mentioned_names_are_the_questions_identifier_words() -> None:
    assert mentioned_names("How does the DefaultCredentialRetrievers class use `load_all()`?") == {
        "defaultcredentialretrievers",
        "class",
        "use",
        "load_all",
    }  # "how", "does", "the": stop words; common words stay (a chunk rarely defines them)
    assert mentioned_names("What is it?") == set()


# --- leading_comment ---------------------------------------------------------------------------------------------


def test_leading_comment_skips_shebang_and_license_and_reads_the_docstring() -> None:
    assert leading_comment(PYTHON) == "Retry helpers for workers."


def test_leading_comment_of_rust_inner_doc_comments() -> None:
    assert leading_comment(RUST) == "A tiny queue."
    assert leading_comment("//! A tiny queue.\n//! Second line.\nuse std::fmt;\n") == "A tiny queue. Second line."


def test_leading_comment_multi_line_docstring() -> None:
    assert leading_comment('"""First line.\n\nMore detail here.\n"""\nimport os\n') == "First line. More detail here."


def test_leading_comment_after_go_package_clause() -> None:
    assert leading_comment("package main\n\n// Package main runs it.\nfunc main() {}\n") == "Package main runs it."


def test_leading_comment_that_is_only_a_license_is_empty() -> None:
    source = "/*\n * Copyright (c) 2020 Example. Licensed under the MIT License.\n */\npackage com.example;\n"
    assert leading_comment(source) == ""
    assert leading_comment(JAVA) == ""


def test_leading_comment_stops_at_code() -> None:
    assert leading_comment("x = 1\n# later comment\n") == ""


def test_leading_comment_of_empty_text() -> None:
    assert leading_comment("") == ""


def test_leading_comment_is_clipped_at_a_word() -> None:
    comment = leading_comment("# " + "word " * 100, limit=50)
    assert comment.endswith("…")
    assert len(comment) <= 50
    assert comment == " ".join(["word"] * 9) + "…"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("// SPDX-License-Identifier: MIT\n//! A tiny queue.\n", "A tiny queue."),
        ('# Copyright 2024 ACME\n\n"""Retry helpers."""\n', "Retry helpers."),
    ],
)
def test_leading_comment_license_line_without_a_period(source: str, expected: str) -> None:
    assert leading_comment(source) == expected


@pytest.mark.parametrize(
    "source",
    ["/// Storage engine.\n#include <vector>\n\nint x;\n", "/*\n * Storage engine.\n */\n#include <x>\nint a;\n"],
)
def test_leading_comment_ignores_include_lines(source: str) -> None:
    assert leading_comment(source) == "Storage engine."


# --- enclosing_definitions ---------------------------------------------------------------------------------------


def test_enclosing_definitions_chain_in_python() -> None:
    definitions = find_definitions(PYTHON)

    def chain(marker: str) -> list[str]:
        return [d.name for d in enclosing_definitions(definitions, PYTHON.index(marker))]

    assert chain("self.attempts = attempts") == ["Retry", "__init__"]
    assert chain("for attempt in range") == ["Retry", "run"]
    assert chain("return 2 ** n") == ["backoff"]
    assert chain('"""Retry helpers') == []
    assert enclosing_definitions(definitions, 0) == []


def test_enclosing_definitions_chain_in_java() -> None:
    definitions = find_definitions(JAVA)
    chain = enclosing_definitions(definitions, JAVA.index("System.out.println"))
    assert [d.header for d in chain] == ["public class Worker", "public static void main(String[] args)"]


def test_enclosing_definitions_by_hand() -> None:
    a, b, c, d = (
        Definition(0, 0, "A", "class A"),
        Definition(10, 4, "b", "def b()"),
        Definition(20, 8, "c", "def c()"),
        Definition(30, 4, "d", "def d()"),
    )
    definitions = [a, b, c, d]
    assert enclosing_definitions(definitions, 25) == [a, b, c]
    assert enclosing_definitions(definitions, 35) == [a, d]  # c and b closed by d (same or deeper indent)
    assert enclosing_definitions(definitions, 10) == [a, b]  # a chunk starting at a definition is inside it
    assert enclosing_definitions(definitions, 11) == [a, b]
    assert enclosing_definitions([], 5) == []


def test_definition_starting_at_the_offset_closes_deeper_ones() -> None:
    a, b, c, d = (
        Definition(0, 0, "A", "class A"),
        Definition(10, 4, "b", "def b()"),
        Definition(20, 8, "c", "def c()"),
        Definition(30, 4, "d", "def d()"),
    )
    chain = enclosing_definitions([a, b, c, d], 30)
    assert b not in chain and c not in chain


# --- url_path_words ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("link", "words"),
    [
        ("https://docs.anthropic.com/en/docs/build-with-claude/tool-use#x", "build with claude > tool use"),
        ("https://host/en/api/messages_batches/", "messages batches"),
        ("https://host/en/docs/about-claude/models/overview#chunk_0", "about claude > models > overview"),
        ("docs.example.com/en/docs/a-b", "a b"),
        ("https://host/", ""),
        ("https://host/en/docs/", ""),
    ],
)
def test_url_path_words(link: str, words: str) -> None:
    assert url_path_words(link) == words


def test_url_path_words_of_a_link_without_a_path() -> None:
    assert url_path_words("https://docs.example.com") == ""
    assert url_path_words("https://docs.example.com#top") == ""
