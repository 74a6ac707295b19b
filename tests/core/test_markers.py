"""One marker syntax: written on Spark's own last line, read only there, never forged by quoted text."""

from __future__ import annotations

import pytest

from bot.core import markers


def test_a_marker_round_trips_on_the_last_line() -> None:
    body = markers.append("Done.\n\n", "reply", "fix-12-0123abcd")
    assert body == "Done.\n\n<!-- spark:reply=fix-12-0123abcd -->"
    assert markers.trailing(body, "reply") == "fix-12-0123abcd"
    assert markers.carries(body + "\n", "reply", "fix-12-0123abcd")
    assert markers.append(body, "reply", "fix-12-0123abcd") == body
    assert markers.trailing(body, "finding") is None


def test_an_empty_body_is_the_marker_alone() -> None:
    assert markers.append("", "reply", "k") == markers.tag("reply", "k")


@pytest.mark.parametrize(
    "body",
    [
        "quoted <!-- spark:reply=k -->",  # not alone on its line
        "<!-- spark:reply=k -->\nthen text",  # not the last line
        "text <!-- spa<!-- spark:x -->rk:reply=k -->",  # nested
        "<!--spark:reply=k-->",  # not the form Spark writes
    ],
)
def test_only_spark_s_own_last_line_counts(body: str) -> None:
    assert markers.trailing(body, "reply") is None


def test_values_lists_every_marker_of_a_name_in_order() -> None:
    body = f"{markers.tag('finding', 'a1')}\ntext {markers.tag('reply', 'r')}\n<!--  spark:finding=b2  -->"
    assert markers.values(body, "finding") == ["a1", "b2"]


@pytest.mark.parametrize(("name", "value"), [("nope", "x"), ("reply", "x --> <img>"), ("reply", "")])
def test_an_unknown_name_or_a_value_that_is_not_one_word_is_refused(name: str, value: str) -> None:
    with pytest.raises(ValueError, match="not a"):
        markers.tag(name, value)


def test_strip_removes_every_spark_marker_well_formed_or_not() -> None:
    text = "a <!-- spark:reply=k --> b <!-- spark:whatever\n--> c <!-- other -->"
    assert markers.strip(text) == "a  b  c <!-- other -->"
