"""The launch form never shows the broker password (the cockpit is shown on projectors):
the uri field shows it masked, however the form was filled, and what connects (the broker
check, the run the launch prepares) still gets the real one. No run starts: the run is
prepared, not run, as in test_launch_spark."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input, OptionList, Static

from flowdeck.engine.spec import RunSpec
from flowdeck.tui.app import FlowdeckApp
from flowdeck.tui.screens import launch
from flowdeck.tui.screens.launch import LaunchScreen, MaskedUri, field_id, masked, unmasked
from tests.tui.fakes import launch_spec

SECRET = "s3cret"
SECRET_URI = f"amqp://guest:{SECRET}@127.0.0.1:5672/%2F"
SHOWN_URI = "amqp://guest:***@127.0.0.1:5672/%2F"


def spec(uri: str, queue_prefix: str) -> RunSpec:
    return launch_spec(uri, queue_prefix, "tui-secret")


def on_screen(app: FlowdeckApp) -> str:
    """Everything the operator could read: the rendered screen and every field's text."""
    fields = " ".join(field.value for field in app.screen.query(Input))
    return f"{app.export_screenshot()}\n{fields}"


def uri_field(screen: LaunchScreen) -> Input:
    field: Input = screen.query_one(f"#{field_id('uri')}", Input)
    return field


async def prepared_run(pilot: Any, prepared: list[Any]) -> Any:
    await pilot.press("ctrl+r")
    deadline = time.monotonic() + 30
    while not prepared and time.monotonic() < deadline:
        await pilot.pause(0.05)
    assert len(prepared) == 1, "the launch prepared no run within 30 s"
    return prepared[0]


@pytest.fixture
def no_password_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """FLOWDECK_PASSWORD would replace the uri's password at launch."""
    monkeypatch.delenv("FLOWDECK_PASSWORD", raising=False)


@pytest.mark.broker
@pytest.mark.timeout(90)
@pytest.mark.usefixtures("no_password_from_environment")
async def test_a_spec_files_password_is_masked_on_screen_and_used_to_connect(
    unique_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prepared: list[Any]
) -> None:
    checked: list[str] = []
    real_check_sources = launch.check_sources

    async def check_sources(uri: str, management_url: str, prometheus_url: str) -> Any:
        checked.append(uri)
        return await real_check_sources(uri, management_url, prometheus_url)

    monkeypatch.setattr(launch, "check_sources", check_sources)
    spec_file = tmp_path / "secret.toml"
    spec_file.write_text(
        f'name = "tui-secret"\nuri = "{SECRET_URI}"\nqueue_pattern = "{unique_name}-%d"\n'
        "queues = 1\ndurable = false\npublishers = 1\nrate = 10\nconsumers = 1\n"
        "duration = 5\nworkers = 1\n",
        encoding="utf-8",
    )
    app = FlowdeckApp(spec=spec("", unique_name), sessions_root=tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, LaunchScreen)
        screen.query_one("#spec-path", Input).value = str(spec_file)
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert uri_field(screen).value == SHOWN_URI
        assert screen.values()["uri"] == SECRET_URI

        checked.clear()
        await pilot.press("ctrl+k")  # the broker refuses s3cret: its answer is shown
        checks = screen.query_one("#checks", Static)
        deadline = time.monotonic() + 20
        while "broker:" not in str(checks.render()) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert checked == [SECRET_URI]
        assert "broker:" in str(checks.render())
        assert SECRET not in on_screen(app)

        control = await prepared_run(pilot, prepared)
        assert SECRET not in on_screen(app)
    assert control.spec.uri == SECRET_URI
    assert [node.password for node in control.broker.nodes] == [SECRET]


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.usefixtures("no_password_from_environment")
async def test_a_password_the_operator_types_is_used_then_masked(
    unique_name: str, tmp_path: Path, prepared: list[Any]
) -> None:
    app = FlowdeckApp(spec=spec(SECRET_URI, unique_name), sessions_root=tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, LaunchScreen)
        assert uri_field(screen).value == SHOWN_URI
        typed = "amqp://admin:typed-pw@127.0.0.1:5672/%2F"
        uri_field(screen).focus()
        uri_field(screen).value = typed
        await pilot.pause()
        assert screen.values()["uri"] == typed
        screen.field_widget("name").focus()  # leaving the field masks what was typed
        await pilot.pause()
        assert uri_field(screen).value == "amqp://admin:***@127.0.0.1:5672/%2F"
        assert screen.values()["uri"] == typed
        assert "typed-pw" not in on_screen(app)
        control = await prepared_run(pilot, prepared)
        assert "typed-pw" not in on_screen(app)
    assert control.spec.uri == typed
    assert [node.password for node in control.broker.nodes] == ["typed-pw"]


async def test_a_uri_with_no_password_is_shown_and_used_as_typed(tmp_path: Path) -> None:
    app = FlowdeckApp(spec=spec(SECRET_URI, "no-password"), sessions_root=tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, LaunchScreen)
        plain = "amqp://127.0.0.1:5672/%2F"
        uri_field(screen).focus()
        uri_field(screen).value = plain
        await pilot.pause()
        screen.field_widget("name").focus()
        await pilot.pause()
        assert uri_field(screen).value == plain
        assert screen.values()["uri"] == plain


async def test_loading_a_preset_keeps_the_masked_uri_and_its_password(tmp_path: Path) -> None:
    app = FlowdeckApp(spec=spec(SECRET_URI, "keep-secret"), sessions_root=tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, LaunchScreen)
        presets = screen.query_one("#preset-list", OptionList)
        chosen = next(i for i in range(presets.option_count)
                      if presets.get_option_at_index(i).id == "bench2-sweep")  # fmt: skip
        presets.highlighted = chosen
        presets.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert screen.query_one(f"#{field_id('name')}", Input).value == "bench2-sweep"
        assert uri_field(screen).value == SHOWN_URI
        assert SECRET not in on_screen(app)
        validated = screen.validate()
        assert validated is not None
        assert validated.uri == SECRET_URI


async def test_the_cockpit_masks_flowdeck_uri_and_each_node_of_a_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flowdeck.cli import build_parser
    from flowdeck.cli.cockpit import initial_spec

    cluster = "amqp://guest:s3cret@127.0.0.1:5672/%2F,amqp://guest:0ther@127.0.0.1:5673/%2F"
    monkeypatch.setenv("FLOWDECK_URI", cluster)
    app = FlowdeckApp(spec=initial_spec(build_parser().parse_args(["cockpit"])))
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, LaunchScreen)
        await pilot.pause()
        assert uri_field(screen).value == (
            "amqp://guest:***@127.0.0.1:5672/%2F,amqp://guest:***@127.0.0.1:5673/%2F"
        )
        assert screen.values()["uri"] == cluster
        text = on_screen(app)
        assert SECRET not in text
        assert "0ther" not in text


def test_a_masked_node_edited_keeps_its_place_in_the_list_password() -> None:
    """The operator moves the second node to another port and leaves its mask: that node's
    password comes back; a node added with a mask of its own has none to take."""
    kept = masked("amqp://guest:a@h1:5672/%2F,amqp://guest:b@h2:5672/%2F")
    assert kept == MaskedUri(
        "amqp://guest:***@h1:5672/%2F,amqp://guest:***@h2:5672/%2F",
        "amqp://guest:a@h1:5672/%2F,amqp://guest:b@h2:5672/%2F",
    )
    edited = "amqp://guest:***@h1:5672/%2F,amqp://guest:***@h2:5674/%2F"
    assert unmasked(edited, kept) == "amqp://guest:a@h1:5672/%2F,amqp://guest:b@h2:5674/%2F"
    added = f"{kept.shown},amqp://guest:***@h3:5672/%2F"
    assert unmasked(added, kept) == (
        "amqp://guest:a@h1:5672/%2F,amqp://guest:b@h2:5672/%2F,amqp://guest:***@h3:5672/%2F"
    )


@pytest.mark.slow
@pytest.mark.timeout(60)
@pytest.mark.usefixtures("no_password_from_environment")
async def test_the_management_and_prometheus_urls_hide_their_passwords_too(
    shared_uri: str, unique_name: str, tmp_path: Path, prepared: list[Any]
) -> None:
    """A management or Prometheus URL with credentials in it (a proxy's, say) is shown
    masked like the uri, and the run gets it whole; one typed is masked once left."""
    management = "http://admin:mgmt-s3cret@127.0.0.1:15672"
    prometheus = "http://reader:prom-s3cret@127.0.0.1:9090"
    given = replace(spec(shared_uri, unique_name), management_url=management)
    app = FlowdeckApp(spec=given, sessions_root=tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, LaunchScreen)
        shown = screen.query_one(f"#{field_id('management_url')}", Input)
        assert shown.value == "http://admin:***@127.0.0.1:15672"
        typed = screen.query_one(f"#{field_id('prometheus_url')}", Input)
        typed.focus()
        typed.value = prometheus
        await pilot.pause()
        shown.focus()  # the Prometheus field is left
        await pilot.pause()
        assert typed.value == "http://reader:***@127.0.0.1:9090"
        assert "s3cret" not in on_screen(app)
        values = screen.values()
        assert (values["management_url"], values["prometheus_url"]) == (management, prometheus)
        control = await prepared_run(pilot, prepared)
        assert "s3cret" not in on_screen(app)
    assert (control.spec.management_url, control.spec.prometheus_url) == (management, prometheus)
