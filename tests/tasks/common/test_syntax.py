"""A file's outline from its syntax tree: the definitions of each covered language, how they nest, their headers, the
definitions around a stretch of lines, and when there is no outline (no grammar, a syntax error)."""

from __future__ import annotations

import pytest

from ctxrag.tasks.common.grammars import GRAMMARS, grammars_for, loaded
from ctxrag.tasks.common.syntax import Outline, outline


def tree(text: str, path: str) -> Outline:
    found = outline(text, path)
    assert found is not None
    return found


def paths(found: Outline) -> list[str]:
    """Every definition as its chain of headers."""
    out = []
    for definition in found.definitions:
        chain = [definition.header]
        parent = definition.parent
        while parent >= 0:
            chain.insert(0, found.definitions[parent].header)
            parent = found.definitions[parent].parent
        out.append(" > ".join(chain))
    return out


@pytest.mark.parametrize("name", sorted(GRAMMARS))
def test_every_grammar_loads_with_its_queries(name: str) -> None:
    assert loaded(name).query.pattern_count == len(GRAMMARS[name].patterns)


@pytest.mark.parametrize(
    "path, grammars",
    [
        ("src/app.py", ("python",)),
        ("web/app.jsx", ("javascript",)),
        ("web/app.ts", ("typescript",)),
        ("web/App.tsx", ("tsx",)),
        ("cmd/main.go", ("go",)),
        ("src/Main.java", ("java",)),
        ("src/lib.rs", ("rust",)),
        ("bin/run.sh", ("shell",)),
        ("src/x.c", ("c",)),
        ("include/x.h", ("cpp", "c")),
        ("src/x.cc", ("cpp",)),
        ("lib/x.rb", ()),
        ("doc_1", ()),
        ("notes.txt", ()),
    ],
)
def test_a_files_grammars_come_from_its_name(path: str, grammars: tuple[str, ...]) -> None:
    assert grammars_for(path) == grammars


def test_python_classes_methods_and_decorated_definitions_nest() -> None:
    found = tree(
        '"""Doc."""\nclass A(B):\n    x = 1\n\n    @property\n    def b(self):\n        def inner():\n'
        "            pass\n        return 1\n\n\nasync def c():\n    pass\n",
        "m.py",
    )
    assert paths(found) == [
        "class A(B)",
        "class A(B) > def b(self)",
        "class A(B) > def b(self) > def inner()",
        "async def c()",
    ]
    method = found.definitions[1]
    assert (method.lead, method.start, method.header_line, method.end) == (3, 4, 5, 8)  # the blank line and decorator


JAVASCRIPT = """'use strict';
const isThing = (v) => v != null;
export const f = function () {
  return 1;
};
export default cond && function named(a) {
  return a;
};
export class K extends B {
  m() { abort(); call(); }
  handle = () => { const type = 1; };
}
export const config = { retries: 3 };
const Comp = () => <div>{call()}</div>;
"""


def test_javascript_constants_holding_functions_exported_objects_and_classes_are_definitions() -> None:
    found = tree(JAVASCRIPT, "web/app.jsx")
    assert paths(found) == [
        "const isThing = (v)",
        "export const f = function ()",
        "export class K extends B",
        "export class K extends B > m()",
        "export class K extends B > handle = ()",
        "export const config",
        "const Comp = ()",
    ]
    assert "named" not in [
        definition.name for definition in found.definitions
    ]  # a function expression in `cond && ...`


def test_code_after_a_function_expression_is_not_inside_it() -> None:
    found = tree(JAVASCRIPT, "web/app.js")
    line = JAVASCRIPT.splitlines().index("export class K extends B {")
    assert [definition.header for definition in found.enclosing(line + 1, line + 1)] == [
        "export class K extends B",
        "m()",
    ]
    assert found.enclosing(5, 7) == []  # the `export default cond && function named` statement


def test_typescript_and_tsx_types_interfaces_enums_and_namespaces() -> None:
    text = (
        "export interface Shape { area(): number }\nexport type Id = string | number;\nenum Color { Red }\n"
        "export abstract class Base<T> implements Shape {\n  public static make(): Base<number> { return null as any; }\n}\n"
        "namespace NS { export function q() {} }\n"
    )
    assert paths(tree(text, "a.ts")) == [
        "export interface Shape",
        "export type Id",
        "enum Color",
        "export abstract class Base<T> implements Shape",
        "export abstract class Base<T> implements Shape > public static make(): Base<number>",
        "namespace NS",
        "namespace NS > export function q()",
    ]
    assert paths(tree("export const App = () => <main className='x'>{1}</main>;\n", "App.tsx")) == [
        "export const App = ()"
    ]


def test_go_methods_name_their_receiver_type() -> None:
    text = (
        "// Package server serves.\npackage server\n\ntype Server struct {\n\taddr string\n}\n\n"
        "// Start starts it.\nfunc (s *Server) Start() error {\n\treturn nil\n}\n"
    )
    found = tree(text, "server.go")
    assert paths(found) == ["type Server struct", "func (s *Server) Start() error"]
    assert found.definitions[1].name == "Start" and found.definitions[1].lead == 6  # its comment and the blank line


def test_rust_impl_blocks_enclose_their_functions() -> None:
    text = "/// A bar.\n#[derive(Debug)]\npub struct Bar;\n\nimpl Foo for Bar {\n    fn go(&self) -> i32 {\n        1\n    }\n}\n"
    found = tree(text, "src/lib.rs")
    assert paths(found) == ["pub struct Bar", "impl Foo for Bar", "impl Foo for Bar > fn go(&self) -> i32"]
    assert found.definitions[0].lead == 0 and found.definitions[1].name == "Bar"
    assert [definition.header for definition in found.enclosing(6, 6)] == ["impl Foo for Bar", "fn go(&self) -> i32"]


def test_java_classes_constructors_and_methods_without_their_annotations() -> None:
    text = (
        "package p;\n\n/** Registry. */\n@Deprecated\npublic class Registry {\n    @Override\n"
        '    public String toString() { return ""; }\n    Registry() {}\n}\n'
    )
    assert paths(tree(text, "Registry.java")) == [
        "public class Registry",
        "public class Registry > public String toString()",
        "public class Registry > Registry()",
    ]


def test_c_cpp_and_shell_functions() -> None:
    assert paths(tree("static int\nadd(int a, int b)\n{\n    return a + b;\n}\n", "x.c")) == [
        "static int add(int a, int b)"
    ]
    assert paths(tree("namespace ns {\nclass Box {\n  int get() const { return 1; }\n};\n}\n", "x.cpp")) == [
        "namespace ns",
        "namespace ns > class Box",
        "namespace ns > class Box > int get() const",
    ]
    assert paths(tree("#!/bin/sh\nbuild() {\n  echo hi\n}\n", "run.sh")) == ["build()"]


def test_a_header_is_read_as_cpp_or_else_as_c() -> None:
    assert tree("class Box {\n public:\n  int get();\n};\n", "box.h").grammar == "cpp"
    assert tree("int add(a)\nint a;\n{\n    return a;\n}\n", "old.h").grammar == "c"  # a K&R definition: not C++


def test_no_outline_without_a_grammar_or_with_syntax_errors_over_much_of_it() -> None:
    assert outline("def f(:\n  )]}\n  )]}\n", "broken.py") is None
    assert outline("class A; end\n", "a.rb") is None
    assert outline("def f(): pass\n", "doc_1") is None


def test_the_code_a_chunk_shows_whole_and_goes_past_does_not_enclose_it() -> None:
    found = tree("class C:\n    def a(self):\n        pass\n\n    def b(self):\n        pass\n", "c.py")
    assert [d.header for d in found.enclosing(1, 2)] == ["class C", "def a(self)"]  # def a whole: inside it
    assert [d.header for d in found.enclosing(1, 5)] == ["class C"]  # a and b: beside them, inside C
    assert [d.header for d in found.enclosing(2, 5)] == ["class C", "def a(self)"]  # a's tail, then b


def test_a_small_syntax_error_is_tolerated_but_the_definition_it_is_in_is_left_out() -> None:
    header = (
        '#ifdef __cplusplus\nextern "C" {\n#endif\n\n'
        + "".join(f"int f{n}(int a);\n" for n in range(30))
        + "\nint add(int a, int b)\n{\n    return a + b;\n}\n\n#ifdef __cplusplus\n}\n#endif\n"
    )
    assert [d.name for d in tree(header, "api.h").definitions] == ["add"]  # the unclosed extern "C" block: one error
    text = "def ok():\n    return 1\n\n\ndef broken():\n    return )\n" + "".join(
        f"\n\ndef f{n}():\n    return {n}\n" for n in range(20)
    )
    assert [d.name for d in tree(text, "legacy.py").definitions] == ["ok", *(f"f{n}" for n in range(20))]
