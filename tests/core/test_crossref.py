"""Choosing context from other files: callers of what a change touches, definitions of what it uses."""

from __future__ import annotations

from collections.abc import Iterable

from bot.core.crossref import CodeIndex, Located, choose, shown_at, touched
from bot.core.diff import format_patch, parse_diff
from bot.core.symbols import FileSymbols, extract

TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
BEFORE = {
    "pkg/headers.py": (
        "from pkg.util import normalize\n\n\ndef parse_header(line):\n    '''Split one header line.'''\n"
        "    return line.split(':', 1)\n"
    ),
    "pkg/util.py": (
        "def normalize(text, *, lower=True):\n    '''Strip and fold a header value.'''\n    return text\n"
    ),
    "pkg/reader.py": (
        "from pkg.headers import parse_header\n\n\ndef read(lines):\n    out = []\n    for line in lines:\n"
        "        out.append(parse_header(line))\n    return out\n"
    ),
    "app/main.py": (
        f"TOKEN = '{TOKEN}'\n\n\ndef main(raw):\n    from pkg.headers import parse_header\n"
        "    return parse_header(raw)\n"
    ),
    "tests/test_headers.py": (
        "from pkg.headers import parse_header\n\n\ndef test_parse():\n    assert parse_header('a: b')\n"
    ),
}
AFTER_HEADERS = (
    "from pkg.util import normalize\n\n\ndef parse_header(line, sep=':'):\n    '''Split one header line.'''\n"
    "    name, value = line.split(sep, 1)\n    return name, normalize(value)\n"
)


class MemoryIndex:
    """The ``CodeIndex`` of a dict of files, extracted here."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.found = {p: s for p, t in files.items() if (s := extract(p, t)) is not None}

    def paths_naming(self, names: Iterable[str], *, defines: bool | None = None) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for name in names:
            paths = [
                p
                for p, s in sorted(self.found.items())
                if (defines is not False and s.defines(name))
                or (defines is not True and name in s.references)
            ]
            if paths:
                out[name] = paths
        return out

    def symbols(self, paths: Iterable[str]) -> dict[str, FileSymbols]:
        return {p: self.found[p] for p in paths if p in self.found}

    def texts(self, paths: Iterable[str]) -> dict[str, str]:
        return {p: self.files[p] for p in paths if p in self.files}


def change() -> tuple[list, MemoryIndex, MemoryIndex]:  # type: ignore[type-arg]
    after = {**BEFORE, "pkg/headers.py": AFTER_HEADERS}
    diff = parse_diff(format_patch("pkg/headers.py", BEFORE["pkg/headers.py"], AFTER_HEADERS))
    return list(diff.files), MemoryIndex(after), MemoryIndex(BEFORE)


def test_a_changed_signature_shows_its_callers_in_other_files_and_the_definitions_it_uses() -> None:
    files, head, base = change()
    index: CodeIndex = head
    what = touched(files, head.symbols(["pkg/headers.py"]), base.symbols(["pkg/headers.py"]))
    assert what.changed == {"parse_header": "signature changed"}
    assert "normalize" in what.used
    context = choose(files, what, index, 2000)
    # Each caller inside its enclosing function, verbatim; the test file's too; the definition used.
    assert (
        "def read(lines):\n    out = []\n    for line in lines:\n        out.append(parse_header(line))"
        in context.text
    )
    assert "def main(raw):" in context.text
    assert "def test_parse():\n    assert parse_header('a: b')" in context.text
    assert "def normalize(text, *, lower=True):\n    '''Strip and fold a header value.'''" in context.text
    assert context.references == {"parse_header": (6, 6)}
    assert context.notes == ()
    # Same package first, tests last.
    order = [line for line in context.text.splitlines() if line.startswith("File: ")]
    assert order[0].startswith("File: app/main.py")  # files render in path order...
    assert context.shown["pkg/reader.py"] == ((1, 8),)  # the import and the call
    # ... but a small budget keeps the same package's caller and drops the test's, and says so.
    small = choose(files, what, index, 110)
    assert "out.append(parse_header(line))" in small.text
    assert "test_parse" not in small.text
    # The calls inside functions come before the imports.
    assert small.shown == {"pkg/reader.py": ((4, 8),), "app/main.py": ((4, 6),)}
    assert small.references == {"parse_header": (3, 6)}
    assert small.notes == (
        "`parse_header` (signature changed): 3 of 6 references in other files shown; "
        "3 left out for the budget",
        "`normalize`: its definition was left out for the budget",
    )


def test_context_is_redacted_and_never_line_numbered() -> None:
    files, head, base = change()
    what = touched(files, head.symbols(["pkg/headers.py"]), base.symbols(["pkg/headers.py"]))
    context = choose(files, what, head, 2000)
    assert TOKEN not in context.text
    assert all(not line[:1].isdigit() for line in context.text.splitlines())


def test_a_removed_definition_shows_the_callers_left_behind() -> None:
    after = {**BEFORE, "pkg/headers.py": "from pkg.util import normalize\n"}
    diff = parse_diff(format_patch("pkg/headers.py", BEFORE["pkg/headers.py"], after["pkg/headers.py"]))
    head, base = MemoryIndex(after), MemoryIndex(BEFORE)
    what = touched(list(diff.files), head.symbols(["pkg/headers.py"]), base.symbols(["pkg/headers.py"]))
    assert what.changed == {"parse_header": "removed"}
    context = choose(list(diff.files), what, head, 2000)
    assert context.references == {"parse_header": (6, 6)}


def test_a_body_change_inside_a_method_touches_the_method_not_its_class() -> None:
    before = "class Reader:\n    def read(self):\n        return 1\n\n    def close(self):\n        pass\n"
    after = before.replace("return 1", "return 2")
    diff = parse_diff(format_patch("r.py", before, after))
    now, old = extract("r.py", after), extract("r.py", before)
    assert now is not None and old is not None
    assert touched(list(diff.files), {"r.py": now}, {"r.py": old}).changed == {"read": "body changed"}


def test_nothing_touched_or_no_budget_is_no_context() -> None:
    files, head, _ = change()
    what = touched(files, {}, {})
    assert choose(files, what, head, 2000).empty
    what = touched(files, head.symbols(["pkg/headers.py"]), {})
    assert choose(files, what, head, 0).empty


def test_a_changed_constructor_is_a_change_to_how_its_class_is_called() -> None:
    before = "class Reader:\n    def __init__(self, path):\n        self.path = path\n"
    after = before.replace("path)", "path, mode)")
    diff = parse_diff(format_patch("r.py", before, after))
    now, old = extract("r.py", after), extract("r.py", before)
    assert now is not None and old is not None
    assert touched(list(diff.files), {"r.py": now}, {"r.py": old}).changed == {"Reader": "signature changed"}


def test_a_line_a_finding_names_is_found_only_where_the_context_showed_it() -> None:
    files, head, base = change()
    what = touched(files, head.symbols(["pkg/headers.py"]), base.symbols(["pkg/headers.py"]))
    context = choose(files, what, head, 110)  # pkg/reader.py lines 4-8 and app/main.py lines 4-6 shown
    call = "        out.append(parse_header(line))"
    assert shown_at(context, "pkg/reader.py", 7, 7) == Located("pkg/reader.py", 7, 7, call)
    assert shown_at(context, "reader.py", 7, 20) == Located(  # a trailing part; the end kept in the window
        "pkg/reader.py", 7, 8, call + "\n    return out"
    )
    assert shown_at(context, "pkg/reader.py", 1, 1) is None  # the import was not shown
    assert shown_at(context, "tests/test_headers.py", 5, 5) is None  # left out for the budget
    assert shown_at(context, "pkg/headers.py", 4, 4) is None  # the file under review is not context
    # What is located is what the model saw: a redacted line stays redacted.
    secret = f"def main(raw):\n    return parse_header(raw, auth='{TOKEN}')\n"
    index = MemoryIndex({**head.files, "app/main.py": secret})
    main = shown_at(choose(files, what, index, 2000), "app/main.py", 2, 2)
    assert main is not None and "parse_header(raw, auth=" in main.code and TOKEN not in main.code


def test_callers_on_lines_naming_what_the_change_took_out_come_first() -> None:
    """A keyword the new signature drops: the calls passing it are shown before any other caller."""
    before = {
        "pkg/send.py": "def send(message, retries=3):\n    return message\n",
        **{
            f"pkg/caller_{i}.py": (
                f"from pkg.send import send\n\n\ndef call_{i}(m):\n    return send(m)\n"
                if i != 7
                else "from pkg.send import send\n\n\ndef call_7(m):\n    return send(m, retries=5)\n"
            )
            for i in range(12)
        },
    }
    after = {**before, "pkg/send.py": "def send(message, attempts=3):\n    return message\n"}
    diff = parse_diff(format_patch("pkg/send.py", before["pkg/send.py"], after["pkg/send.py"]))
    head, base = MemoryIndex(after), MemoryIndex(before)
    what = touched(list(diff.files), head.symbols(["pkg/send.py"]), base.symbols(["pkg/send.py"]))
    assert what.changed == {"send": "signature changed"} and what.gone == {"send": frozenset({"retries"})}
    context = choose(list(diff.files), what, head, 60)  # room for about one caller
    assert list(context.shown) == ["pkg/caller_7.py"]
    assert "return send(m, retries=5)" in context.text


def test_a_file_that_imports_the_changed_module_comes_before_one_with_a_name_of_its_own() -> None:
    """Two files use ``parse``: one imports it from the changed module, the other imports another module's
    ``parse``; the importer is shown first, and only it when the budget holds one."""
    before = {
        "lib/headers.py": "def parse(line):\n    return line\n",
        "lib/a_other.py": "from json import loads as parse\n\n\ndef load(raw):\n    return parse(raw)\n",
        "lib/b_reader.py": "from lib.headers import parse\n\n\ndef read(raw):\n    return parse(raw)\n",
    }
    after = {**before, "lib/headers.py": "def parse(line, sep):\n    return line\n"}
    diff = parse_diff(format_patch("lib/headers.py", before["lib/headers.py"], after["lib/headers.py"]))
    head, base = MemoryIndex(after), MemoryIndex(before)
    what = touched(list(diff.files), head.symbols(["lib/headers.py"]), base.symbols(["lib/headers.py"]))
    context = choose(list(diff.files), what, head, 45)
    assert list(context.shown) == ["lib/b_reader.py"]
    both = choose(list(diff.files), what, head, 2000)
    assert set(both.shown) == {"lib/a_other.py", "lib/b_reader.py"}  # with room, both are shown


def test_what_a_body_took_out_counts_only_where_the_repository_defines_it() -> None:
    """A method's body stops calling ``compute_old`` and drops a local ``value``: a caller naming
    ``compute_old`` comes first; one that merely has a ``value`` of its own on the line does not."""
    before = {
        "pkg/calc.py": "def compute_old(order):\n    return 1\n",
        "pkg/model.py": (
            "class Order:\n    def total(self):\n        value = compute_old(self)\n        return value\n"
        ),
        "pkg/a_caller.py": "def show(order):\n    value = order.total()\n    return value\n",
        "pkg/b_caller.py": "def check(order):\n    return compute_old(order) == order.total()\n",
    }
    after = {
        **before,
        "pkg/model.py": "class Order:\n    def total(self):\n        return compute_new(self)\n",
    }
    diff = parse_diff(format_patch("pkg/model.py", before["pkg/model.py"], after["pkg/model.py"]))
    head, base = MemoryIndex(after), MemoryIndex(before)
    what = touched(list(diff.files), head.symbols(["pkg/model.py"]), base.symbols(["pkg/model.py"]))
    assert what.changed == {"total": "body changed"}
    assert what.gone_body == {"total": frozenset({"value", "compute_old"})} and what.gone == {}
    context = choose(list(diff.files), what, head, 40)
    assert list(context.shown) == ["pkg/b_caller.py"]


def test_calls_passing_a_number_of_arguments_the_new_signature_refuses_come_first() -> None:
    """``send`` no longer takes a third argument: the one call passing three is shown before the others."""
    before = {
        "pkg/send.py": "def send(message, retries=3, delay=1):\n    return message\n",
        **{
            f"pkg/caller_{i}.py": f"from pkg.send import send\n\n\ndef call_{i}(m):\n    return send(m%s)\n"
            % (", 2, 5" if i == 7 else "")
            for i in range(12)
        },
    }
    after = {**before, "pkg/send.py": "def send(message, retries=3):\n    return message\n"}
    diff = parse_diff(format_patch("pkg/send.py", before["pkg/send.py"], after["pkg/send.py"]))
    head, base = MemoryIndex(after), MemoryIndex(before)
    what = touched(list(diff.files), head.symbols(["pkg/send.py"]), base.symbols(["pkg/send.py"]))
    assert what.arity == {"send": (1, 2)}
    context = choose(list(diff.files), what, head, 60)  # room for about one caller
    assert list(context.shown) == ["pkg/caller_7.py"]
    assert "return send(m, 2, 5)" in context.text
