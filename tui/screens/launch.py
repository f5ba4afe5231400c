"""The launch screen: pick a preset, load a spec file or edit the form, check the broker,
launch. Every field is validated as it is typed; the message shows next to the field.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from flowdeck.collectors import (
    MASK,
    URI_SEPARATOR,
    BrokerUriError,
    parse_broker_uri,
    redact,
    split_uris,
)
from flowdeck.engine import (
    DEFAULT_PRESET,
    FIELDS,
    PRESETS,
    FlowdeckError,
    RunSpec,
    SpecError,
    load_spec_file,
    preset,
    spec_from_mapping,
)
from flowdeck.tui.broker_check import CheckLine, check_sources
from flowdeck.tui.keys import HELP_BINDING
from flowdeck.tui.navigation import Route, open_screen, preload
from flowdeck.tui.spec_text import field_text, field_value, what_it_runs
from flowdeck.tui.widgets.footer import FittingFooter

if TYPE_CHECKING:
    from flowdeck.collectors import BrokerUri
    from flowdeck.engine import SparkPlacement

#: Presets reproduce full-size benchmarks; the cockpit starts them scaled to a small machine.
DEFAULT_SCALE = 0.1
BROKER_FIELDS = ("uri", "management_url", "prometheus_url")


#: The error label of the Spark master field (not a spec field: a run's placement, as
#: `flowdeck run --spark-master`); the listen address's and the link's TLS files'.
SPARK_MASTER = "spark_master"
SPARK_LISTEN = "spark_listen"
SPARK_CERT = "spark_cert_file"
#: The Spark fields' inputs, by what ``spark_placement_of`` calls them.
SPARK_INPUTS = {
    "master": "spark-master",
    "listen": "spark-listen",
    "cert_file": "spark-cert-file",
    "key_file": "spark-key-file",
}
#: `flowdeck run`'s flags as the form names its fields: its messages, in the form's words.
FORM_WORDS = {
    "--spark-master": "spark master",
    "--spark-listen": "spark listen",
    "--spark-cert-file": "spark cert file",
    "--spark-key-file": "spark key file",
    "--workers": "workers",
}


def in_form_words(message: str) -> str:
    for flag, name in FORM_WORDS.items():
        message = message.replace(flag, name)
    return message


@dataclass(frozen=True, slots=True)
class SparkFields:
    """What the launch form's Spark fields hold, as typed (empty master: local workers)."""

    master: str = ""
    listen: str = ""
    cert_file: str = ""
    key_file: str = ""


def spark_placement_for(fields: SparkFields, workers: int) -> SparkPlacement | None:
    """The Spark placement the form's fields ask for with its workers, checked as
    `flowdeck run --spark-master --spark-listen --spark-cert-file --spark-key-file`
    checks them (``engine.provision.spark_placement_of``; None: local worker processes);
    SpecError in the form's words, naming the field it belongs to (``workers`` problems
    show under the master). Nothing listens or starts before launch."""
    from flowdeck.engine import spark_placement_of

    try:
        return spark_placement_of(
            fields.master,
            workers,
            listen=fields.listen,
            cert_file=fields.cert_file.strip(),
            key_file=fields.key_file.strip(),
        )
    except SpecError as exc:
        field = exc.field if exc.field in (SPARK_LISTEN, SPARK_CERT) else SPARK_MASTER
        raise SpecError(field, in_form_words(exc.message)) from None


@dataclass(frozen=True, slots=True)
class MaskedUri:
    """The uri field's text as shown, every node's password masked (the cockpit is shown
    on projectors), and the URI it stands for as given: what the broker check and the run
    connect with."""

    shown: str = ""
    given: str = ""


def masked(uri: str) -> MaskedUri:
    """``uri`` (one node URI or a cluster's, comma-separated) with its passwords put aside."""
    return MaskedUri(redact(uri), uri)


def unmasked(text: str, kept: MaskedUri) -> str:
    """The URI the field's ``text`` stands for: the one kept while the text is still its
    masked form; else node by node, a node that still carries the mask gets the kept
    password of the same node (the same masked form, else the same place in the list),
    and any other node (a password typed, none at all, or one that does not parse) is
    taken as typed."""
    text = text.strip()
    if text == kept.shown:
        return kept.given
    kept_nodes = split_uris(kept.given)
    kept_shown = [redact(node) for node in kept_nodes]
    nodes: list[str] = []
    for index, node in enumerate(split_uris(text)):
        try:
            parsed = parse_broker_uri(node)
        except BrokerUriError:
            nodes.append(node)
            continue
        if parsed.password != MASK:
            nodes.append(node)
        elif node in kept_shown:
            nodes.append(kept_nodes[kept_shown.index(node)])
        elif index < len(kept_nodes):
            nodes.append(_with_password_of(parsed, kept_nodes[index]) or node)
        else:
            nodes.append(node)
    uri: str = URI_SEPARATOR.join(nodes)
    return uri


def _with_password_of(parsed: BrokerUri, kept_node: str) -> str | None:
    """``parsed`` with the password of ``kept_node``; None when that one has none."""
    try:
        password = parse_broker_uri(kept_node).password
    except BrokerUriError:
        return None
    return None if password is None else str(parsed.with_password(password))


def field_id(name: str) -> str:
    return f"field-{name}"


def on_off(value: bool) -> str:
    return "on" if value else "off"


def show_on_off(box: Checkbox, value: bool) -> Checkbox:
    """An X in the box only when on, and the word beside it: Textual's box always holds an
    X and tells on from off by colour alone, which reads blank without colour."""
    box.BUTTON_INNER = "X" if value else " "
    box.label = on_off(value)
    return box


#: Worker processes booted ahead at most (a spec asking for more boots the rest at launch).
MAX_POOLED_WORKERS = 4

#: Below this width the launch screen's columns narrow (an 80x24 terminal).
NARROW_COLUMNS = 100


class LaunchScreen(Screen[None]):
    """Build a RunSpec and start it."""

    DEFAULT_CSS = """
    LaunchScreen #presets {
        width: 31;  /* the longest preset name (27) beside the list's scrollbar */
        border: round $primary;
        border-title-align: left;
    }
    LaunchScreen #preset-list {
        height: 1fr;
        min-height: 5;
        border: none;
        padding: 0;
    }
    LaunchScreen #preset-info {
        height: 1fr;
        color: $text-muted;
        overflow-y: auto;
    }
    LaunchScreen #form {
        width: 1fr;
        border: round $primary;
        border-title-align: left;
    }
    LaunchScreen .field-row {
        height: auto;
    }
    LaunchScreen .field-name {
        width: 20;
        padding: 0 1 0 0;
        text-style: bold;
    }
    LaunchScreen .field-row Checkbox {
        border: none;
        height: 1;
        padding: 0;
        background: transparent;
    }
    /* The field with the focus says so without colour: its name reversed. */
    LaunchScreen .field-row:focus-within .field-name {
        text-style: bold reverse;
    }
    LaunchScreen #presets:focus-within {
        border: double $accent;
    }
    LaunchScreen.-narrow #presets {
        width: 27;
    }
    LaunchScreen.-narrow .field-error, LaunchScreen.-narrow .field-help {
        padding-left: 4;
    }
    LaunchScreen .field-row Input, LaunchScreen .field-row Select {
        width: 1fr;
    }
    LaunchScreen .field-error {
        color: $error;
        height: auto;
        padding-left: 20;
    }
    LaunchScreen .field-error.-empty {
        display: none;
    }
    LaunchScreen .field-help {
        color: $text-muted;
        padding-left: 20;
        height: auto;
    }
    LaunchScreen #checks {
        height: auto;
        border: round $secondary;
        padding: 0 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        HELP_BINDING,
        Binding("ctrl+r", "launch", "launch", priority=True, tooltip="launch the run"),
        Binding("ctrl+k", "check_broker", "check broker", priority=True),
        Binding("ctrl+o", "load_file", "load file", priority=True, tooltip="load the spec file"),
        Binding("ctrl+e", "sessions", "sessions", priority=True, tooltip="recorded sessions"),
    ]

    def __init__(self, spec: RunSpec | None = None) -> None:
        super().__init__()
        self.initial = spec or preset(DEFAULT_PRESET, DEFAULT_SCALE)
        self.spec: RunSpec | None = self.initial
        #: The Spark master the run's workers go to (None: local worker processes), as
        #: last validated with the form's workers, and the Spark fields it was checked with.
        self.spark_master: str | None = None
        self.spark_fields = SparkFields()
        #: What each broker field (uri, management and Prometheus URLs) shows, and the
        #: text with the passwords it stands for.
        initial = self.initial.to_mapping()
        self._broker_text = {name: masked(str(initial[name] or "")) for name in BROKER_FIELDS}
        self._filling = False
        #: A validation is asked for and not yet done (a burst of changes makes one).
        self._validation_due = False
        # Every keystroke validates the whole form: DOM queries per field would make that
        # (and the burst of Changed events at mount) cost tens of ms on the event loop.
        self._fields: dict[str, Widget] = {}
        self._error_labels: dict[str, Static | None] = {}
        self._errors_shown: dict[str, str] = {}
        self._launch_progress: Timer | None = None
        self._launch_began = 0.0
        self._launch_step = ""
        #: Whether a launch is starting the app's private node (quit waits for it).
        self.booting_node = False

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="presets"):
                # One line a preset: a name too long for a narrow list ends in "…".
                yield OptionList(
                    *(
                        Option(Text(name, no_wrap=True, overflow="ellipsis"), id=name)
                        for name in PRESETS
                    ),
                    id="preset-list",
                )
                yield Static("", id="preset-info")
            with VerticalScroll(id="form"):
                yield from self._file_rows()
                values = self.initial.to_mapping()
                for name, info in FIELDS.items():
                    yield from self._field_rows(name, info, values[name])
                    if name == "workers":
                        yield from self._spark_rows()
        yield Static("", id="checks")
        yield FittingFooter()

    def _file_rows(self) -> ComposeResult:
        with Horizontal(classes="field-row"):
            yield Label("spec file", classes="field-name")
            yield Input(placeholder="path/to/run.toml (Enter loads)", compact=True, id="spec-path")
        yield Static("", markup=False, classes="field-error -empty", id="error-spec")
        with Horizontal(classes="field-row"):
            yield Label("preset scale", classes="field-name")
            yield Input(str(DEFAULT_SCALE), compact=True, id="scale")
        yield Static("", markup=False, classes="field-error -empty", id="error-scale")
        yield Static(
            "presets and files are scaled by this factor to fit this machine",
            classes="field-help",
        )

    def _spark_rows(self) -> ComposeResult:
        yield from self._spark_row(
            "spark master",
            "spark-master",
            "empty: workers as local processes",
            SPARK_MASTER,
            "the workers as Spark tasks: local[N] on this host, spark://HOST:PORT on a cluster "
            "(docs/spark-workers.md)",
        )
        yield from self._spark_row(
            "spark listen",
            "spark-listen",
            "127.0.0.1:0 (workers on this machine only)",
            SPARK_LISTEN,
            "HOST:PORT of this machine where the workers connect back (0: a free port); an "
            "address other hosts reach needs the cert and key below",
        )
        yield from self._spark_row("spark cert file", "spark-cert-file", "PEM", None, "")
        yield from self._spark_row(
            "spark key file",
            "spark-key-file",
            "PEM (empty: in the cert file)",
            SPARK_CERT,
            "TLS of the workers' link: every worker trusts this certificate alone",
        )

    @staticmethod
    def _spark_row(
        name: str, input_id: str, placeholder: str, error: str | None, help_text: str
    ) -> ComposeResult:
        with Horizontal(classes="field-row"):
            yield Label(name, classes="field-name")
            yield Input(placeholder=placeholder, compact=True, id=input_id)
        if error is not None:
            yield Static("", markup=False, classes="field-error -empty", id=f"error-{error}")
        if help_text:
            yield Static(help_text, classes="field-help", markup=False)

    def _field_rows(self, name: str, info: Any, value: Any) -> ComposeResult:
        with Horizontal(classes="field-row"):
            yield Label(name, classes="field-name")
            if info.kind is bool:
                # A box with X and the word: an on/off field reads without colour.
                box = Checkbox(on_off(bool(value)), bool(value), compact=True, id=field_id(name))
                yield show_on_off(box, bool(value))
            elif info.choices:
                yield Select(
                    [(c, c) for c in info.choices],
                    value=value,
                    allow_blank=False,
                    compact=True,
                    id=field_id(name),
                )
            else:
                text = (
                    self._broker_text[name].shown
                    if name in BROKER_FIELDS
                    else field_text(name, value)
                )
                yield Input(text, compact=True, id=field_id(name))
        yield Static("", markup=False, classes="field-error -empty", id=f"error-{name}")
        unit = f" ({info.unit})" if info.unit else ""
        yield Static(f"{info.help}{unit}", classes="field-help", markup=False)

    def on_mount(self) -> None:
        option_list = self.query_one("#preset-list", OptionList)
        names = list(PRESETS)
        if self.initial.name in names:
            option_list.highlighted = names.index(self.initial.name)
        self.show_preset_info(self.initial.name)
        self.query_one("#presets").border_title = "presets (Enter loads)"
        self.query_one("#form").border_title = "run spec (checked as you type)"
        self.query_one("#checks").border_title = "broker check (ctrl+k)"
        self.action_check_broker()
        if getattr(self.app, "control", None) is None:  # else a run's screen opens on top
            self.get_ready_to_launch()

    def on_screen_resume(self) -> None:
        if self.is_mounted:  # back from a run: the next launch takes booted workers too
            self.get_ready_to_launch()

    @work(exclusive=True, thread=True, group="get-ready")
    def get_ready_to_launch(self) -> None:
        """While the operator reads the form: import what a launch needs and boot the run's
        worker processes (app.worker_pool), so Ctrl+R waits for neither (together more than
        half of launch -> first data on a running node, measured by benchmarks/tui_lag.py).
        Imports in this thread hold the loop at most a few tens of ms."""
        # Loaded for what importing them costs: the controller (AMQP, HTTP clients), the
        # recorder (pyarrow, ~0.5 s) and the live screen (opened on the loop at launch).
        from flowdeck.engine import Controller, default_sessions_root, resolve_workers

        del Controller, default_sessions_root
        preload(self, Route.LIVE)
        spec = self.spec or self.initial
        workers = min(resolve_workers(spec.workers), MAX_POOLED_WORKERS)
        # On the app's loop thread: a worker process dies with the thread that spawned it.
        self.app.call_from_thread(self.fill_pool, workers)

    def fill_pool(self, workers: int) -> None:
        """Boot ``workers`` local worker processes ahead (app.worker_pool), unless the run
        goes to Spark: its workers are Spark tasks, and a local process would only take
        memory and CPU (one already booted is ended)."""
        pool = getattr(self.app, "worker_pool", None)
        if pool is None:
            return
        if self.spark_master is not None:
            pool.shrink(0)
        else:
            pool.fill(workers)

    # -- presets and files ---------------------------------------------------------------

    def scale(self) -> float:
        """The preset scale factor typed; SpecError (shown next to it) when it is wrong."""
        text = self.query_one("#scale", Input).value.strip()
        try:
            factor = float(text)
        except ValueError:
            factor = float("nan")
        if not 0 < factor <= 100:
            message = f"scale must be a number in (0, 100], got {text!r}"
            self.show_error("scale", message)
            raise SpecError("scale", message)
        self.show_error("scale", "")
        return factor

    def show_preset_info(self, name: str) -> None:
        """What the highlighted preset runs at the scale typed: the figures Enter puts in
        the form (the description keeps the seed's full-size words)."""
        info = self.query_one("#preset-info", Static)
        if name not in PRESETS:
            info.update("")
            return
        try:
            factor = self.scale()
        except SpecError:
            factor = 1.0
        spec = preset(name, factor)
        info.update(
            Text.assemble(
                (f"{name}\n", "bold"),
                f"{spec.description}\n\n",
                (f"runs at scale {factor:g}: ", "bold"),
                what_it_runs(spec),
                ("\n\nEnter: load it into the form", "italic"),
            )
        )

    @on(Input.Changed, "#scale")
    def scale_changed(self) -> None:
        highlighted = self.query_one("#preset-list", OptionList).highlighted_option
        if highlighted is not None:
            self.show_preset_info(str(highlighted.id))

    def on_resize(self, event: Resize) -> None:
        self.set_class(event.size.width < NARROW_COLUMNS, "-narrow")

    @on(OptionList.OptionHighlighted, "#preset-list")
    def preset_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.show_preset_info(str(event.option.id))

    @on(OptionList.OptionSelected, "#preset-list")
    def preset_selected(self, event: OptionList.OptionSelected) -> None:
        try:
            spec = preset(str(event.option.id), self.scale())
        except SpecError:
            return
        # A preset says what load to run, never which broker: the broker in the form (from
        # --uri, or typed) stays, where loading the preset used to empty it and send the next
        # launch to a private node.
        kept = {name: self.broker_typed(name) for name in BROKER_FIELDS}
        spec = replace(spec, **{name: value for name, value in kept.items() if value})
        self.fill(spec)
        self.notify(f"preset {spec.name} loaded (scale {self.scale():g})", timeout=3)

    def action_load_file(self) -> None:
        self.load_file(self.query_one("#spec-path", Input).value)

    @on(Input.Submitted, "#spec-path")
    def spec_path_submitted(self, event: Input.Submitted) -> None:
        self.load_file(event.value)

    def load_file(self, text: str) -> None:
        if not text.strip():
            self.show_error("spec", "type the path of a TOML spec file, then Enter")
            self.query_one("#spec-path", Input).focus()
            return
        try:
            spec = load_spec_file(Path(text.strip()).expanduser())
        except SpecError as exc:
            self.show_error("spec", exc.message)
            return
        self.show_error("spec", "")
        self.fill(spec)
        self.notify(f"spec file loaded: {spec.name}", timeout=3)

    def fill(self, spec: RunSpec) -> None:
        """Put a spec's values in the form."""
        self._filling = True
        values = spec.to_mapping()
        try:
            for name in FIELDS:
                widget = self.field_widget(name)
                value = values[name]
                if isinstance(widget, Checkbox | Select):
                    widget.value = value
                elif name in BROKER_FIELDS and isinstance(widget, Input):
                    self._broker_text[name] = masked(str(value or ""))
                    widget.value = self._broker_text[name].shown
                elif isinstance(widget, Input):
                    widget.value = field_text(name, value)
        finally:
            self._filling = False
        self.validate()

    # -- validation ----------------------------------------------------------------------

    def values(self) -> dict[str, Any]:
        """The form's values; SpecError naming the field when one cannot be read."""
        values: dict[str, Any] = {}
        for name in FIELDS:
            widget = self.field_widget(name)
            if isinstance(widget, Checkbox | Select):
                values[name] = widget.value
            elif name in BROKER_FIELDS and isinstance(widget, Input):
                values[name] = field_value(name, unmasked(widget.value, self._broker_text[name]))
            elif isinstance(widget, Input):
                values[name] = field_value(name, widget.value)
        return values

    def broker_typed(self, name: str) -> str:
        """A broker field's text with its passwords (for what connects)."""
        text = cast(Input, self.field_widget(name)).value
        return unmasked(text, self._broker_text[name])

    def hide_passwords(self) -> None:
        """Mask a password the operator typed in a broker field, keeping it aside."""
        for name in BROKER_FIELDS:
            field = cast(Input, self.field_widget(name))
            kept = masked(unmasked(field.value, self._broker_text[name]))
            self._broker_text[name] = kept
            if field.value != kept.shown:
                field.value = kept.shown

    @on(Input.Blurred, "#field-uri, #field-management_url, #field-prometheus_url")
    def broker_field_left(self) -> None:
        self.hide_passwords()

    def field_widget(self, name: str) -> Widget:
        """The form's input for spec field ``name``."""
        widget = self._fields.get(name)
        if widget is None:
            widget = self._fields[name] = self.query_one(f"#{field_id(name)}")
        return widget

    def validate(self) -> RunSpec | None:
        """Build the spec from the form; show the error next to its field, or clear them."""
        spec: RunSpec | None = None
        failed = message = ""
        try:
            spec = spec_from_mapping(self.values())
        except SpecError as exc:
            failed, message = self.field_of(exc.field), exc.message
        for name in FIELDS:
            self.show_error(name, message if name == failed else "")
        self.spec = spec
        if spec is None:
            return None
        fields = self.spark_typed()
        try:
            placement = spark_placement_for(fields, spec.workers)
        except SpecError as exc:
            for name in (SPARK_MASTER, SPARK_LISTEN, SPARK_CERT):
                self.show_error(name, exc.message if name == exc.field else "")
            return None
        for name in (SPARK_MASTER, SPARK_LISTEN, SPARK_CERT):
            self.show_error(name, "")
        master = placement.master if placement is not None else None
        self.spark_fields = fields
        if master != self.spark_master:
            went_to_spark = (master is None) != (self.spark_master is None)
            self.spark_master = master
            if went_to_spark and self.is_mounted:
                self.get_ready_to_launch()  # ends booted local workers, or boots them
        return spec

    def spark_typed(self) -> SparkFields:
        """The Spark fields as typed."""
        values = {}
        for name, input_id in SPARK_INPUTS.items():
            field = self._fields.get(input_id) or self.query_one(f"#{input_id}", Input)
            self._fields[input_id] = field
            values[name] = cast(Input, field).value
        return SparkFields(**values)

    @staticmethod
    def field_of(error_field: str) -> str:
        """``schedule[2].at`` and ``queue_args.x-max-length`` belong to their form field."""
        base = error_field.split("[")[0].split(".")[0]
        return base if base in FIELDS else "name"

    def show_error(self, name: str, message: str) -> None:
        if name not in self._error_labels:
            matches = self.query(f"#error-{name}")
            self._error_labels[name] = matches.first(Static) if matches else None
        label = self._error_labels[name]
        if label is None or self._errors_shown.get(name, "") == message:
            return
        self._errors_shown[name] = message
        label.update(f"✗ {message}" if message else "")
        label.set_class(not message, "-empty")

    @on(Checkbox.Changed)
    def checkbox_changed(self, event: Checkbox.Changed) -> None:
        show_on_off(event.checkbox, event.value)
        event.checkbox.refresh()

    @on(Input.Changed)
    @on(Checkbox.Changed)
    @on(Select.Changed)
    def field_changed(self, event: Any) -> None:
        if self._filling or getattr(event.control, "id", "") in ("spec-path", "scale"):
            return
        # A burst of changes (a spec filled in: one Changed per field, each handled after
        # the filling is over) is validated once, after the last of them, not once each:
        # 51 validations took 1.5 s of the event loop when the form opened.
        if not self._validation_due:
            self._validation_due = True
            self.call_later(self._validate_due)

    def _validate_due(self) -> None:
        self._validation_due = False
        self.validate()

    @on(Input.Submitted)
    def field_submitted(self, event: Input.Submitted) -> None:
        name = (event.input.id or "").removeprefix("field-")
        if name in BROKER_FIELDS:
            self.action_check_broker()

    # -- broker check and launch --------------------------------------------------------

    def action_check_broker(self) -> None:
        spec = self.validate()
        values = {name: self.broker_typed(name) for name in BROKER_FIELDS}
        if spec is None and any(self._error_text(n) for n in BROKER_FIELDS):
            return
        self.query_one("#checks", Static).update("checking the broker…")
        self.run_checks(values["uri"], values["management_url"], values["prometheus_url"])

    def _error_text(self, name: str) -> str:
        return self._errors_shown.get(name, "")

    @work(exclusive=True, group="broker-check")
    async def run_checks(self, uri: str, management_url: str, prometheus_url: str) -> None:
        lines = await check_sources(uri, management_url, prometheus_url)
        self.show_checks(lines)

    def show_checks(self, lines: list[CheckLine]) -> None:
        text = Text()
        for index, line in enumerate(lines):
            if index:
                text.append("\n")
            text.append("✓ " if line.ok else "✗ ", style="bold green" if line.ok else "bold red")
            text.append(f"{line.source}: ", style="bold")
            text.append(line.message)
        self.query_one("#checks", Static).update(text)

    def action_launch(self) -> None:
        self.hide_passwords()  # a launch that fails leaves the form on screen
        spec = self.validate()
        if spec is None:
            self.notify("fix the field marked ✗ first", severity="error")
            return
        self._launch_began = time.monotonic()
        provisioner = getattr(self.app, "provisioner", None)
        if spec.uri:
            self._launch_step = f"launching {spec.name}: connecting to the broker"
        elif provisioner is not None and provisioner.running_node is not None:
            self._launch_step = f"launching {spec.name} on the private RabbitMQ node (up)"
        else:
            self.booting_node = provisioner is not None
            self._launch_step = (
                f"launching {spec.name}: starting a private RabbitMQ node "
                "(10-40 s the first time; later launches reuse it)"
            )
        if self._launch_progress is None:
            self._launch_progress = self.set_interval(0.5, self.show_launch_progress)
        self.show_launch_progress()
        self.prepare(spec, self.spark_fields if self.spark_master is not None else None)

    def show_launch_progress(self) -> None:
        """While a launch is prepared, the broker check panel says what it waits for and
        for how long (a node's boot used to show nothing after a 4 s toast)."""
        elapsed = time.monotonic() - self._launch_began
        self.query_one("#checks", Static).update(
            Text.assemble(("⏳ ", "bold"), self._launch_step, f"… {elapsed:.0f} s")
        )

    def end_launch_progress(self, text: str | Text = "") -> None:
        self.booting_node = False
        if self._launch_progress is not None:
            self._launch_progress.stop()
            self._launch_progress = None
        self.query_one("#checks", Static).update(text)

    @work(exclusive=True, thread=True, group="launch")
    def prepare(self, spec: RunSpec, spark: SparkFields | None = None) -> None:
        from flowdeck.tui.launcher import prepare_run

        spark = spark or SparkFields()
        try:
            prepared = prepare_run(
                spec,
                getattr(self.app, "sessions_root", None),
                provisioner=getattr(self.app, "provisioner", None),
                spark_master=spark.master,
                spark_listen=spark.listen,
                spark_cert_file=spark.cert_file.strip(),
                spark_key_file=spark.key_file.strip(),
            )
        except FlowdeckError as exc:
            self.app.call_from_thread(self.end_launch_progress, Text(f"✗ {exc}", style="bold"))
            self.app.call_from_thread(self.notify, str(exc), severity="error", timeout=20)
            return
        self.app.call_from_thread(self.open_live, prepared.control)

    def open_live(self, control: Any) -> None:
        self.end_launch_progress("the run was launched; Ctrl+K checks the broker again")
        open_screen(self, Route.LIVE, control)

    def action_sessions(self) -> None:
        open_screen(self, Route.SESSIONS)
