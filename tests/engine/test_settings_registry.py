"""The settings registry is the one place a steerable setting is described: every row has
a spec field, a CLI flag, a change form, a cockpit key and a docs row; and a key step and
a relative change issued while a change is pending start from the same, requested, value.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from flowdeck.cli import build_parser
from flowdeck.collectors import Broker
from flowdeck.engine import COMMANDS, STEERABLE
from flowdeck.engine.change import Change, Setting, format_number, parse_change
from flowdeck.engine.controller import Controller, apply_to_settings
from flowdeck.engine.errors import SpecError
from flowdeck.engine.settings import Scope, Step
from flowdeck.engine.snapshot import Settings
from flowdeck.engine.spec import FIELDS, RunSpec, settings_of
from flowdeck.engine.worker import _APPLY
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.keys import KEY_TABLE, step_change
from flowdeck.tui.screens.live import LiveScreen
from tests.engine.controller_fakes import FAKE_RUNTIME
from tests.tui.fakes import FakeControl

ROOT = Path(__file__).resolve().parent.parent.parent
ENGINE_PAGE = (ROOT / "docs" / "engine.md").read_text(encoding="utf-8")
COCKPIT_PAGE = (ROOT / "docs" / "cockpit.md").read_text(encoding="utf-8")


def _block(text: str, name: str) -> str:
    match = re.search(
        rf"<!-- generated: {name} \(scripts/gen-docs\) -->\n(.*?)<!-- end generated: {name} -->",
        text,
        re.DOTALL,
    )
    assert match, f"generated block {name!r} is missing"
    return match.group(1)


def test_every_setting_is_a_registry_row_or_a_command_and_the_worker_applies_it() -> None:
    covered = [row.setting for row in STEERABLE] + [c.setting for c in COMMANDS]
    assert sorted(covered) == sorted(Setting)
    # a broker change is applied on the nodes by the controller (engine/broker_changes.py);
    # the workers see the mark that opens its phase
    on_nodes = {c.setting for c in COMMANDS if c.applies_to is Scope.BROKER}
    assert on_nodes == {Setting.BROKER}
    assert set(_APPLY) == set(Setting) - on_nodes


@pytest.mark.parametrize("row", STEERABLE, ids=lambda r: r.name)
def test_row_drives_spec_field_validation_and_settings(row: object) -> None:
    from flowdeck.engine.settings import SteerableSetting

    assert isinstance(row, SteerableSetting)
    info = FIELDS[row.field]
    assert (info.kind, info.low, info.high, info.unit) == (row.kind, row.low, row.high, row.unit)
    assert row.field in Settings().values
    # prefetch 0 (unlimited) lets ack_every take its whole range
    RunSpec(**{"prefetch": 0, row.field: row.convert(row.high)})  # type: ignore[arg-type]
    with pytest.raises(SpecError, match=rf"^{row.field} must be "):
        RunSpec(**{"prefetch": 0, row.field: row.convert(row.high + 1)})  # type: ignore[arg-type]
    # the spec, the controller's settings tracking and Change agree on the new value
    spec = RunSpec(prefetch=0)
    change = Change(row.setting, row.high)
    assert spec.with_change(change).setting(row.setting) == row.high
    moved = apply_to_settings(settings_of(spec), change)
    assert moved.value(row.setting) == row.convert(row.high)
    assert type(moved.value(row.setting)) is row.kind


@pytest.mark.parametrize("row", STEERABLE, ids=lambda r: r.name)
def test_row_has_a_cli_flag_a_change_form_and_aliases(row: object) -> None:
    from flowdeck.engine.settings import SteerableSetting

    assert isinstance(row, SteerableSetting)
    flag = "--" + row.field.replace("_", "-")
    args = build_parser().parse_args(["run", flag, format_number(row.high)])
    assert getattr(args, row.field) == format_number(row.high)
    assert parse_change(f"{row.name}={format_number(row.low)}") == Change(row.setting, row.low)
    assert parse_change(f"{row.name}=+1") == Change(row.setting, 1, relative=True)
    for alias in row.aliases:
        assert parse_change(f"{alias}={format_number(max(2, row.low))}").setting is row.setting
    with pytest.raises(SpecError, match=rf"^{row.name} must be "):
        parse_change(f"{row.name}={format_number(row.high + 1)}")
    if row.kind is int:
        with pytest.raises(SpecError, match="must be a whole number"):
            parse_change(f"{row.name}=2.5")


@pytest.mark.parametrize("row", STEERABLE, ids=lambda r: r.name)
def test_steerable_row_has_keys_palette_label_and_docs_rows(row: object) -> None:
    from flowdeck.engine.settings import SteerableSetting

    assert isinstance(row, SteerableSetting)
    actions = {r.key: r.action for r in KEY_TABLE}
    assert row.live
    assert f"| `{row.name}` |" in _block(ENGINE_PAGE, "change-words")
    assert f"| `{row.name}` | `{row.field}` |" in _block(ENGINE_PAGE, "steerable-settings")
    assert f"| `{row.field}` |" in _block(ENGINE_PAGE, "spec-fields")
    if not row.key:  # steered by an exact change (=) only: no key of its own
        assert f"step('{row.name}'," not in " ".join(actions.values())
        return
    assert actions[row.key] == f"step('{row.name}', -1)"
    assert actions[row.key.upper()] == f"step('{row.name}', 1)"
    keys = _block(COCKPIT_PAGE, "cockpit-keys")
    assert f"| `{row.key}` | {row.label}: " in keys
    assert f"| `{row.key.upper()}` | {row.label}: " in keys


def test_commands_have_keys_change_forms_and_docs_rows() -> None:
    keys = {r.key for r in KEY_TABLE}
    for command in COMMANDS:
        if command.applies_to is Scope.BROKER:  # typed at the prompt: broker.KEY=VALUE
            assert parse_change("broker.reconnect").setting is command.setting
        else:
            assert command.key in keys
            assert parse_change(command.setting.value).setting is command.setting
        assert f"| `{command.setting.value}` |" in _block(ENGINE_PAGE, "steerable-settings")
        assert f"| `{command.setting.value}` |" in _block(ENGINE_PAGE, "change-words")


def test_key_steps_keep_todays_rules() -> None:
    settings = settings_of(RunSpec(inflight=100, prefetch=0, ack_every=1, rate=2.5))
    assert step_change(settings, Setting.INFLIGHT, 1) == Change(Setting.INFLIGHT, 200)
    assert step_change(settings, Setting.INFLIGHT, -1) == Change(Setting.INFLIGHT, 50)
    assert step_change(settings, Setting.ACK_EVERY, -1) == Change(Setting.ACK_EVERY, 1)
    assert step_change(settings, Setting.RATE, -1) == Change(Setting.RATE, 1.25)
    assert step_change(settings, Setting.PUBLISHERS, 1) == Change(
        Setting.PUBLISHERS, 1, relative=True
    )
    with pytest.raises(SpecError, match=r"prefetch is 0 \(no limit\) and has no step"):
        step_change(settings, Setting.PREFETCH, 1)
    steps = {row.setting: row.step for row in STEERABLE}
    assert steps[Setting.CONSUMERS] is Step.ONE and steps[Setting.PREFETCH] is Step.HALVE_DOUBLE
    scopes = {row.setting: row.applies_to for row in STEERABLE}
    assert scopes[Setting.PUBLISHERS] is Scope.TOPOLOGY


async def test_key_press_while_a_change_is_pending_steps_on_from_it() -> None:
    fake = FakeControl()  # in-flight 100, changes stay pending until applied
    app = FlowdeckApp(control=fake)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, LiveScreen)
        await pilot.press("I")
        await pilot.press("I")
        await pilot.pause()
        assert fake.settings.inflight == 100  # nothing applied yet
        assert fake.requests == [Change(Setting.INFLIGHT, 200), Change(Setting.INFLIGHT, 400)]


@pytest.mark.broker
@pytest.mark.timeout(120)
async def test_key_step_and_relative_change_start_from_the_requested_value(
    shared_uri: str, unique_name: str
) -> None:
    spec = RunSpec(
        name="registry",
        queue_pattern=f"{unique_name}-%d",
        publishers=1,
        consumers=1,
        rate=50.0,
        inflight=100,
        duration=3.0,
        durable=False,
    )
    c = Controller(
        spec, broker=Broker.parse(shared_uri), workers=0, runtime=FAKE_RUNTIME, drain_seconds=1
    )
    await c.start()
    try:
        # No await between the requests: the fake applies after 50 ms, so all are pending.
        c.request(parse_change("inflight=200"))
        assert c.settings.inflight == 100 and c.requested_settings.inflight == 200
        key = step_change(c.requested_settings, Setting.INFLIGHT, 1)
        relative_id = c.request(parse_change("inflight=+200"))
        resolved = {p.change_id: p.change for p in c.pending}[relative_id]
        assert key == Change(Setting.INFLIGHT, 400) == resolved
        c.request(Change(Setting.PAUSE))
        assert c.requested_settings.paused and not c.settings.paused
        assert c.requested_settings.inflight == 400
        await asyncio.sleep(1.0)
        assert c.pending == ()
        assert c.settings.inflight == 400 and c.settings.paused
        assert c.requested_settings == c.settings
    finally:
        await c.stop()
        await c.wait()
