"""How a call fits a signature: positional arguments accepted (Python, JS/TS, Go) and passed on a line."""

from __future__ import annotations

import pytest

from bot.core.calls import accepts, breaks, passes


@pytest.mark.parametrize(
    ("signature", "language", "method", "expected"),
    [
        ("def f(a, b=1, *args, c, **kw):", "python", False, (1, None)),
        ("def f(self, a, b=2):", "python", True, (1, 2)),
        ("def f(a, /, b, *, c):", "python", False, (2, 2)),
        ("def f(a, **kw):", "python", False, (1, 1)),
        (
            "def __init__(\n    self, choices: Sequence[str], case: bool = True\n) -> None:",
            "python",
            True,
            (1, 2),
        ),
        ("function f(a: Map<string, number>, b?: T, c = 1, ...rest: U[])", "typescript", False, (1, None)),
        ("export function f(cb: (x: number) => void, o: {a: 1, b: 2})", "typescript", False, (2, 2)),
        ("function f(this: Window, a)", "typescript", False, (1, 1)),
        ("function f(a, b = 2)", "javascript", False, (1, 2)),
        ("func (c *Command) Run(a, b int, rest ...string) error {", "go", True, (2, None)),
        ("func Name[T any](x T, y string) {", "go", False, (2, 2)),
        ("func F() {", "go", False, (0, 0)),
        ("fn f(a: i32)", "rust", False, None),
    ],
)
def test_what_a_signature_accepts(
    signature: str, language: str, method: bool, expected: tuple[int, int | None] | None
) -> None:
    assert accepts(signature, language, method=method) == expected


def test_what_a_line_passes_and_what_breaks() -> None:
    line = "    return send(m, retries=5) + send(*args) + x.send(a, b < c, d) + resend(1)"
    assert passes(line, "send") == [1, None, 3]  # a keyword is not positional; a spread is any number
    assert passes('    foo(bar(1, 2), [3, 4], "a,b")', "foo") == [3]
    assert passes("  foo(a,", "foo") == [None]  # the call goes on past the line: not known
    assert breaks((1, 2), 3) and breaks((2, 2), 1)
    assert not breaks((1, 2), 2) and not breaks((1, None), 9) and not breaks((1, 2), None)
