"""Change parsing: what operators type becomes one Change, or one clear error."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowdeck.engine.change import Change, Setting, parse_change
from flowdeck.engine.errors import SpecError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("inflight=200", Change(Setting.INFLIGHT, 200)),
        ("prefetch = 60", Change(Setting.PREFETCH, 60)),
        ("ack-every=6", Change(Setting.ACK_EVERY, 6)),
        ("qos=10", Change(Setting.PREFETCH, 10)),
        ("rate=2.5", Change(Setting.RATE, 2.5)),
        ("publishers=+10", Change(Setting.PUBLISHERS, 10, relative=True)),
        ("consumers=-2", Change(Setting.CONSUMERS, -2, relative=True)),
        ("pause", Change(Setting.PAUSE)),
        ("RESUME", Change(Setting.RESUME)),
        ('mark "after warm-up"', Change(Setting.MARK, label="after warm-up")),
        ("mark", Change(Setting.MARK)),
    ],
)
def test_parse(text: str, expected: Change) -> None:
    assert parse_change(text) == expected


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("prefetch=70000", "prefetch", "prefetch must be 0..65535, got 70000"),
        ("inflight=2.5", "inflight", "inflight must be a whole number"),
        ("inflight", "inflight", "inflight needs a value, e.g. inflight=100"),
        ("prefetch=lots", "prefetch", "prefetch needs a number, got 'lots'"),
        ("pause=3", "pause", "pause takes no value"),
        ("speed=3", "change", "unknown setting 'speed'"),
        ("", "change", "empty change"),
    ],
)
def test_bad_changes(text: str, field: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_change(text)
    assert caught.value.field == field
    assert message in caught.value.message


def test_relative_changes_resolve_and_clamp() -> None:
    assert Change(Setting.PUBLISHERS, 10, relative=True).resolved(5) == Change(
        Setting.PUBLISHERS, 15
    )
    assert Change(Setting.CONSUMERS, -10, relative=True).resolved(3) == Change(Setting.CONSUMERS, 0)


def test_describe_round_trips() -> None:
    for text in ("inflight=200", "publishers=+10", "rate=2.5", "pause", "mark 'two words'"):
        change = parse_change(text)
        assert parse_change(change.describe()) == change


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_any_text_is_a_change_or_a_spec_error(text: str) -> None:
    try:
        change = parse_change(text)
    except SpecError as exc:
        assert exc.field and exc.message
    else:
        assert isinstance(change, Change)
