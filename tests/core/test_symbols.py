"""Definitions and references of one file, per language, and the files not indexed with their reason."""

from __future__ import annotations

import pytest

from bot.core.symbols import (
    INDEXED_LANGUAGES,
    Definition,
    decode,
    encode,
    extract,
    linguist_globs,
    unindexable,
)

# One small file per language: a definition of a header parser, its use in another definition, a type.
SAMPLES = {
    "pkg/headers.py": (
        "import os\n\n@cache\ndef parse_header(line: str,\n        strict: bool = False) -> dict:\n"
        "    '''Parse.'''\n    return {}\n\nclass Reader:\n    def read(self):\n"
        "        return parse_header(os.sep)\nLIMIT = 3\n"
    ),
    "src/headers.js": (
        "export function parseHeader(line) {\n  return line;\n}\nclass Reader {\n"
        "  read() { return parseHeader('x'); }\n}\n"
    ),
    "src/headers.ts": (
        "export function parseHeader(line: string): Header {\n  return {} as Header;\n}\n"
        "interface Header { a: number }\nexport class Reader {\n"
        "  read(): Header { return parseHeader('x'); }\n}\n"
    ),
    "headers.go": (
        "package x\n\nfunc ParseHeader(line string) Header {\n\treturn Header{}\n}\n\n"
        "type Header struct{}\n\n"
        'func (r *Reader) Read() Header { return ParseHeader("") }\n'
    ),
    "src/headers.rs": (
        "pub fn parse_header(line: &str) -> Header {\n    Header {}\n}\nstruct Header;\n"
        'impl Reader { fn read(&self) -> Header { parse_header("") } }\n'
    ),
    "Reader.java": (
        "class Reader {\n  Header parseHeader(String line) {\n    return new Header();\n  }\n"
        '  void read() { parseHeader("x"); }\n}\n'
    ),
    "headers.c": (
        "#include <x.h>\nstruct header { int a; };\nint parse_header(const char *line) {\n  return 0;\n}\n"
        'int main(void) { return parse_header("x"); }\n'
    ),
    "headers.cpp": (
        "namespace n {\nclass Reader {\n public:\n  int read();\n};\n"
        "int parse_header(const char *line) { return 0; }\n"
        'int Reader::read() { return parse_header("x"); }\n}\n'
    ),
    "lib/headers.rb": (
        "module M\n  class Reader\n    def parse_header(line)\n      line\n    end\n    def read\n"
        "      parse_header('x')\n    end\n  end\nend\n"
    ),
}
# path -> (the parser's name, its definition's line span, the line its call is on)
EXPECTED = {
    "pkg/headers.py": ("parse_header", (3, 7), 11),
    "src/headers.js": ("parseHeader", (1, 3), 5),
    "src/headers.ts": ("parseHeader", (1, 3), 6),
    "headers.go": ("ParseHeader", (3, 5), 9),
    "src/headers.rs": ("parse_header", (1, 3), 5),
    "Reader.java": ("parseHeader", (2, 4), 5),
    "headers.c": ("parse_header", (3, 5), 6),
    "headers.cpp": ("parse_header", (6, 6), 7),
    "lib/headers.rb": ("parse_header", (3, 5), 7),
}


def test_every_language_spark_verifies_is_indexed() -> None:
    languages = {symbols.language for path in SAMPLES if (symbols := extract(path, "")) is not None}
    assert languages == set(INDEXED_LANGUAGES) - {"tsx"}
    assert extract("src/App.tsx", "export const App = () => <div/>;\n") is not None


@pytest.mark.parametrize("path", sorted(SAMPLES))
def test_a_definition_and_its_call_are_found(path: str) -> None:
    name, span, call = EXPECTED[path]
    symbols = extract(path, SAMPLES[path])
    assert symbols is not None
    found = [d for d in symbols.definitions if d.name == name]
    assert [(d.start, d.end) for d in found] == [span]
    # The definition's own name is not a reference; the call is, on its line.
    assert symbols.references[name] == (call,)
    assert symbols.enclosing(call) is not None
    assert symbols.enclosing(call).name in ("read", "Read", "main")  # type: ignore[union-attr]


def test_the_signature_spans_its_lines_and_skips_decorators() -> None:
    symbols = extract("pkg/headers.py", SAMPLES["pkg/headers.py"])
    assert symbols is not None
    parser = next(d for d in symbols.definitions if d.name == "parse_header")
    assert parser.signature == "def parse_header(line: str,\n        strict: bool = False) -> dict:"
    kinds = {d.name: d.kind for d in symbols.definitions}
    assert kinds == {"parse_header": "function", "Reader": "class", "read": "method", "LIMIT": "constant"}


def test_types_used_in_signatures_are_references() -> None:
    symbols = extract("src/headers.ts", SAMPLES["src/headers.ts"])
    assert symbols is not None
    assert symbols.references["Header"] == (1, 2, 6)


def test_symbols_survive_their_encoding() -> None:
    symbols = extract("headers.go", SAMPLES["headers.go"])
    assert symbols is not None
    assert decode(encode(symbols)) == symbols
    assert isinstance(decode(encode(symbols)).definitions[0], Definition)


def test_a_file_without_a_grammar_has_no_symbols() -> None:
    assert extract("README.md", "# hi\n") is None


@pytest.mark.parametrize(
    ("path", "data", "reason"),
    [
        ("a.py", b"x = 1\n", None),
        ("logo.png", b"\x89PNG", "image (*.png)"),
        ("a.py", b"x = '\0'\n", "binary file"),
        ("vendor/lib/a.go", b"package a\n", "vendored (vendor/)"),
        ("api.pb.go", b"package api\n", "generated (*.pb.go)"),
        (
            "gen/a.go",
            b"// Code generated by stringer. DO NOT EDIT.\npackage a\n",
            "generated (a generator's header)",
        ),
        ("README.md", b"# hi\n", "no grammar for its language"),
        ("big.py", b"#" * 2000, "too large (2000 bytes; the limit is 1000)"),
    ],
)
def test_unindexable_files_say_why(path: str, data: bytes, reason: str | None) -> None:
    assert unindexable(path, data, max_bytes=1000) == reason


def test_gitattributes_marks_generated_and_vendored_paths() -> None:
    attributes = (
        "# comment\n*.gen.ts linguist-generated\nthird/** linguist-vendored=true\n"
        "docs/** linguist-documentation\nkeep.gen.ts -linguist-generated\nlib/x.ts linguist-generated=false\n"
    )
    spec = linguist_globs(attributes)
    assert spec is not None
    reason = "linguist-generated or -vendored (.gitattributes)"
    assert unindexable("src/api.gen.ts", b"export const a = 1\n", generated=spec) == reason
    assert unindexable("third/x/y.ts", b"export const a = 1\n", generated=spec) == reason
    assert unindexable("lib/x.ts", b"export const a = 1\n", generated=spec) is None
    assert unindexable("docs/a.ts", b"export const a = 1\n", generated=spec) is None
    assert linguist_globs("*.md text\n") is None
