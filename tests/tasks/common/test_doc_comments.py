"""A file's opening doc comment off its syntax tree, per language; licence text is the caller's to drop."""

from __future__ import annotations

import pytest

from ctxrag.tasks.common.doc_comments import comment_lines
from ctxrag.tasks.common.syntax import outline


def opening(text: str, path: str) -> tuple[str, ...] | None:
    found = outline(text, path)
    assert found is not None
    return found.opening


def words(lines: tuple[str, ...] | None) -> str:
    return " ".join(line for line in lines or () if line)


def test_python_module_docstring_not_the_comments_before_it() -> None:
    text = '#!/usr/bin/env python\n# -*- coding: utf-8 -*-\nr"""Shapes and areas.\n\n    More here.\n"""\nimport os\n'
    assert opening(text, "m.py") == ("Shapes and areas.", "", "More here.")
    assert opening("# A comment only.\nimport os\n", "m.py") is None  # no docstring: the comment heuristics decide


@pytest.mark.parametrize("path", ["a.js", "a.ts", "a.tsx"])
def test_javascript_jsdoc_after_use_strict_a_licence_banner_and_imports(path: str) -> None:
    text = (
        "/*! lib v1 | MIT */\n'use strict';\nimport x from 'y';\n/**\n * @fileoverview Money helpers.\n"
        " * @author Someone\n */\nexport function money(v) {\n  return v;\n}\n"
    )
    assert words(opening(text, path)) == "Money helpers."


def test_javascript_comments_after_the_first_statement_are_not_the_opening() -> None:
    assert opening("const a = 1;\n/** Later. */\nfunction f() {}\n", "a.js") is None


def test_go_package_comment_not_the_licence_before_it() -> None:
    text = (
        "// Copyright 2020 The Authors. All rights reserved.\n// Use of this source code is governed by a BSD licence.\n\n"
        "// Package server serves HTTP.\n// It retries.\npackage server\n"
    )
    assert words(opening(text, "server.go")) == "Package server serves HTTP. It retries."
    assert opening("// Copyright 2020.\n\npackage server\n", "server.go") == ()


def test_rust_inner_doc_comments() -> None:
    text = "// Licensed under MIT.\n//! The crate's docs.\n//! Line two.\n#![allow(dead_code)]\nuse std::fmt;\n"
    assert words(opening(text, "src/lib.rs")) == "The crate's docs. Line two."
    assert opening("// Plain.\nfn main() {}\n", "src/main.rs") is None


def test_java_class_javadoc_after_package_and_imports() -> None:
    text = (
        "/*\n * Licensed under the Apache License.\n */\npackage p;\n\nimport java.util.List;\n\n"
        "/**\n * The shape registry.\n *\n * @since 1.0\n */\n@Deprecated\npublic class Registry {}\n"
    )
    assert words(opening(text, "Registry.java")) == "The shape registry."


def test_languages_without_a_rule_leave_it_to_the_heuristics() -> None:
    assert opening("/* A header. */\nint main(void) { return 0; }\n", "main.c") is None
    assert opening("#!/bin/sh\n# Deploys.\nset -e\n", "deploy.sh") is None


def test_comment_markers_are_taken_off() -> None:
    assert comment_lines("/**\n * One.\n *   Two.\n */") == ["", "One.", "Two.", ""]
    assert comment_lines("//! Crate.") == ["Crate."] and comment_lines("# Shell.") == ["Shell."]
