"""The docs cannot drift from the code: generated tables are current, every spec field,
preset and change word is documented, and every ``flowdeck ...`` command line shown in
README.md or docs/ parses with the real CLI parser (parsed only, never run).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import runpy
import shlex
from dataclasses import fields
from pathlib import Path

import pytest

from flowdeck.cli import _opens_cockpit, build_parser
from flowdeck.engine.change import Setting
from flowdeck.engine.presets import PRESETS, load_spec_file
from flowdeck.engine.spec import FIELDS, RunSpec

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [ROOT / "README.md", *DOCS]
ENGINE_PAGE = ROOT / "docs" / "engine.md"

#: Fenced blocks whose lines are commands (``console`` blocks: only the ``$ `` lines).
COMMAND_FENCES = {"sh", "bash", "shell", "console", ""}
FENCE = re.compile(r"^```([\w-]*)\s*\n(.*?)^```", re.DOTALL | re.MULTILINE)
INLINE = re.compile(r"(?<!`)`(flowdeck [^`]+)`(?!`)")


def _gen_docs() -> dict[str, object]:
    return runpy.run_path(str(ROOT / "scripts" / "gen-docs"), run_name="gen_docs")


def _section(text: str, name: str) -> str:
    match = re.search(
        rf"<!-- generated: {name} \(scripts/gen-docs\) -->\n(.*?)<!-- end generated: {name} -->",
        text,
        re.DOTALL,
    )
    assert match, f"docs/engine.md lost its generated block {name!r}; restore its markers"
    return match.group(1)


def _commands_in_block(language: str, body: str) -> list[str]:
    lines = body.replace("\\\n", " ").splitlines()
    out = []
    for line in lines:
        line = line.strip()
        if language == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        if line.startswith("flowdeck ") or line == "flowdeck":
            out.append(line)
    return out


def documented_commands() -> list[tuple[str, str]]:
    """(where, command line) for every flowdeck command line in a code block of the
    README and docs: each must parse whole.
    """
    found: list[tuple[str, str]] = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        name = page.relative_to(ROOT).as_posix()
        for match in FENCE.finditer(text):
            if match.group(1) in COMMAND_FENCES:
                found += [(name, c) for c in _commands_in_block(match.group(1), match.group(2))]
    return found


def mentioned_commands() -> list[tuple[str, str]]:
    """(where, text) for every ``flowdeck ...`` in running text: often a synopsis
    (``flowdeck sessions list|show``) or a bare command name, so only its command and
    options are checked, not that it is complete.
    """
    found: list[tuple[str, str]] = []
    for page in PAGES:
        text = FENCE.sub("", page.read_text(encoding="utf-8"))
        name = page.relative_to(ROOT).as_posix()
        found += [(name, " ".join(m.group(1).split())) for m in INLINE.finditer(text)]
    return found


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def check_mention(text: str) -> None:
    """The command (and action) exist and every ``--option`` named is one of theirs."""
    words = text.split()[1:]
    parser = build_parser()
    if words and words[0].startswith("-") and not _opens_cockpit(words):
        known = set(parser._option_string_actions)
    else:
        if not words or words[0].startswith("-"):
            words = ["cockpit", *words]
        commands = _subparsers(parser)
        assert words[0] in commands, f"{text!r}: no command {words[0]!r}"
        parser = commands[words[0]]
        actions = _subparsers(parser)
        if actions and len(words) > 1 and not words[1].startswith("-"):
            for action in re.split(r"[|,]", words[1].strip("[]")):
                assert action in actions, f"{text!r}: {words[0]} has no action {action!r}"
            parser = actions[re.split(r"[|,]", words[1])[0]]
        known = set(parser._option_string_actions)
    for word in words:
        option = word.strip("[]").split("=")[0]
        if option.startswith("--") and option != "--":
            assert option in known, f"{text!r}: no option {option}"


def command_words(line: str) -> list[str]:
    """The words ``flowdeck`` gets from a shell line: comments and redirections cut off."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words = []
    for word in lexer:
        if word and set(word) <= set("|&;<>"):
            break
        words.append(word)
    assert words and words[0] == "flowdeck", line
    return words[1:]


def parse_command(line: str) -> argparse.Namespace:
    """Parse a documented command line as ``flowdeck`` would, without running it."""
    words = command_words(line)
    if _opens_cockpit(words):
        words = ["cockpit", *words]
    parser = build_parser()
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            return parser.parse_args(words)
    except SystemExit as exc:
        raise AssertionError(f"{line!r} does not parse: {errors.getvalue().strip()}") from exc


def test_generated_blocks_match_the_code() -> None:
    stale = _gen_docs()["stale_pages"]()  # type: ignore[operator]
    names = [str(page.relative_to(ROOT)) for page, _ in stale]
    assert not names, f"generated docs are stale: {names}; run scripts/gen-docs"


def test_every_spec_field_has_a_row_in_the_engine_page() -> None:
    table = _section(ENGINE_PAGE.read_text(encoding="utf-8"), "spec-fields")
    rows = {line.split("|")[1].strip().strip("`") for line in table.splitlines()[2:]}
    # added_settings holds the values of settings added to the registry: each is a field of
    # its own in FIELDS (a spec file's and a flag's), and has its row as such.
    missing = [f.name for f in fields(RunSpec) if f.name not in rows | {"added_settings"}]
    assert not missing, f"docs/engine.md has no row for RunSpec fields {missing}"
    assert set(FIELDS) <= rows


def test_every_preset_and_change_word_is_in_the_engine_page() -> None:
    text = ENGINE_PAGE.read_text(encoding="utf-8")
    presets = _section(text, "presets")
    assert [name for name in PRESETS if f"| `{name}` |" not in presets] == []
    words = _section(text, "change-words")
    assert [s.value for s in Setting if f"| `{s.value}` |" not in words] == []


def test_gen_docs_fails_the_check_when_a_field_is_missing(tmp_path: Path) -> None:
    gen = _gen_docs()
    page = tmp_path / "engine.md"
    text = ENGINE_PAGE.read_text(encoding="utf-8")
    page.write_text(re.sub(r"^\| `prefetch` \|.*\n", "", text, flags=re.M), encoding="utf-8")
    assert "| `prefetch` |" not in page.read_text(encoding="utf-8")
    rendered = gen["render"](page.read_text(encoding="utf-8"), page)  # type: ignore[operator]
    assert "| `prefetch` |" in rendered


def test_the_docs_show_commands() -> None:
    commands = documented_commands()
    pages = {where for where, _ in commands}
    assert {"README.md", "docs/engine.md", "docs/tutorial-bench2.md"} <= pages
    assert any(c.startswith("flowdeck report ") for _, c in commands)


@pytest.mark.parametrize(("where", "line"), documented_commands())
def test_documented_command_parses(where: str, line: str) -> None:
    args = parse_command(line)
    assert callable(getattr(args, "handler", None)) or args.version or args.command is None, (
        f"{where}: {line!r} parses to no command"
    )


@pytest.mark.parametrize(("where", "text"), mentioned_commands())
def test_mentioned_command_exists(where: str, text: str) -> None:
    check_mention(text)


def test_spec_file_examples_load(tmp_path: Path) -> None:
    """Every TOML example in the README and docs loads as a spec file."""
    loaded = 0
    for page in PAGES:
        for match in FENCE.finditer(page.read_text(encoding="utf-8")):
            if match.group(1) != "toml":
                continue
            path = tmp_path / f"example{loaded}.toml"
            path.write_text(match.group(2), encoding="utf-8")
            spec = load_spec_file(path)
            assert spec.name and spec.duration > 0
            loaded += 1
    assert loaded >= 2


def test_a_drifted_command_would_be_caught() -> None:
    with pytest.raises(AssertionError, match="does not parse"):
        parse_command("flowdeck run --preset bench2 --in-flight 20")
    with pytest.raises(AssertionError, match="no option --in-flight"):
        check_mention("flowdeck run --in-flight")
    with pytest.raises(AssertionError, match="no action 'purge'"):
        check_mention("flowdeck sessions purge")
    assert command_words("flowdeck run --json > out.json  # summary") == ["run", "--json"]


def test_readme_and_index_link_every_page_and_every_link_resolves() -> None:
    link = re.compile(r"\]\(([^)#]+)(?:#[^)]*)?\)")
    for index in (ROOT / "README.md", ROOT / "docs" / "README.md"):
        text = index.read_text(encoding="utf-8")
        targets = {(index.parent / m.group(1)).resolve() for m in link.finditer(text)}
        unlinked = [p.name for p in DOCS if p.name != "README.md" and p.resolve() not in targets]
        assert not unlinked, f"{index.relative_to(ROOT)} does not link {unlinked}"
    for page in PAGES:
        for match in link.finditer(page.read_text(encoding="utf-8")):
            target = match.group(1)
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"
