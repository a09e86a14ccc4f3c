"""Every ```python block of README.md, docs/**/*.md and examples/*/README.md runs here, one
test per block (id `file:line`), in a fresh subprocess of this Python with a temporary cwd.

Rules, so the pages can stay readable:

- Blocks of a page run cumulatively: the test of a block first runs the page's earlier blocks
  (not the skipped ones), in one namespace, as the page reads.
- Top-level `await` / `async with` are allowed, as in `python -m asyncio`.
- The substitution table: a redis://, postgresql://, mysql:// or mariadb:// URL in a string
  literal becomes this suite's server of that kind (SERVERS; tests/conftest.py), keeping its
  ?query; the paths in PATHS become the temporary directory. environment() sets the variables
  the pages read: TENURE_STORE (SQLite in the temporary directory), and for code naming
  azblob: or AzureQueue, AZURE_STORAGE_CONNECTION_STRING and STORAGE_CONN (Azurite). Only the
  servers a test's code names are started. `azblob://ACCOUNT/...` (managed identity) is left
  as written: connecting makes no request, and Azurite has no managed identity.
- An HTML comment right before a block (blank lines allowed) changes how it runs:
  `<!-- snippet: skip (reason) -->` compiles it but does not run it;
  `<!-- snippet: runs-forever (reason) -->` runs it, checks that after RUNS_FOREVER_FOR s it
  is alive with no traceback, sends SIGTERM and expects exit status 0 with no traceback; as
  context for a later block it runs without its last statement (the one that blocks);
  `<!-- snippet: setup (reason)` + lines of Python + `-->` is hidden code run just before the
  block (in the same namespace): the application's own functions a block calls, as stubs.
  A marker not followed by a block, or of an unknown kind, fails the collection test.

`tenure SUBCOMMAND ...` lines of the pages' other fences and inline code are checked too: the
subcommand exists and `--help` lists every option they use (nothing is run).

Example::

    .venv/bin/python -m pytest -q tests/first_hour/test_docs_snippets.py -k README
"""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "tests" / "support" / "snippet_runner.py"
TIMEOUT = 60.0  # per snippet: a generous sanity bound
RUNS_FOREVER_FOR = 3.0  # how long a runs-forever block must stay up before SIGTERM


def pages() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
             *sorted((ROOT / "examples").glob("*/README.md"))]
    return [page for page in found if page.exists()]


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence; the code starts on the next line
    code: str
    kind: str = "run"  # run, skip or runs-forever
    reason: str = ""
    setup: list[tuple[int, str]] = field(default_factory=list)  # (line before it, code)

    @property
    def label(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"


MARKER = re.compile(r"<!--\s*snippet:\s*(?P<kind>[\w-]+)\s*(?:\((?P<reason>[^)]*)\))?")
KINDS = ("skip", "runs-forever", "setup")


def parse(page: Path) -> tuple[list[Block], list[str]]:
    """The page's python blocks with their markers, and the marker mistakes found."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    problems: list[str] = []
    pending: list[tuple[int, str, str, str]] = []  # (line, kind, reason, setup code)
    index = 0
    while index < len(lines):
        text = lines[index]
        number = index + 1
        marker = MARKER.match(text.strip())
        if marker:
            kind, reason = marker["kind"], (marker["reason"] or "").strip()
            if kind not in KINDS:
                problems.append(f"{page.name}:{number}: unknown snippet marker {kind!r} "
                                f"(known: {', '.join(KINDS)})")
            elif kind != "setup" and not reason:
                problems.append(f"{page.name}:{number}: `snippet: {kind}` needs a (reason)")
            body: list[str] = []
            if kind == "setup":
                while "-->" not in lines[index]:
                    index += 1
                    if index == len(lines):
                        problems.append(f"{page.name}:{number}: `snippet: setup` has no -->")
                        return blocks, problems
                    if "-->" not in lines[index]:
                        body.append(lines[index])
            pending.append((number, kind, reason, "\n".join(body) + "\n"))
            index += 1
            continue
        if text.startswith("```"):
            fence = number
            end = index + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            if text.strip() in ("```python", "```py"):
                block = Block(page, fence, "\n".join(lines[index + 1:end]) + "\n")
                for line, kind, reason, code in pending:
                    if kind == "setup":
                        block.setup.append((line, code))
                    else:
                        block.kind, block.reason = kind, reason
                blocks.append(block)
            elif pending:
                problems.append(f"{page.name}:{pending[0][0]}: snippet marker before a block "
                                f"that is not ```python")
            pending = []
            index = end + 1
            continue
        if text.strip() and pending:
            problems.append(f"{page.name}:{pending[0][0]}: snippet marker not right before a "
                            "```python block")
            pending = []
        index += 1
    if pending:
        problems.append(f"{page.name}:{pending[0][0]}: snippet marker at the end of the page")
    return blocks, problems


ALL = [block for page in pages() for block in parse(page)[0]]

# Each store URL in a string literal becomes the suite's server of that kind (keeping the
# URL's ?query); scheme -> the fixture that starts it (its .url).
SERVERS = {
    "redis": "redis_server",
    "postgresql": "postgres_server",
    "mysql": "mariadb_server",
    "mariadb": "mariadb_server",
}
URL = re.compile(r"""(?P<quote>["'])(?P<scheme>redis|postgresql|mysql|mariadb)://"""
                 r"""(?P<rest>[^"'?]*)(?P<query>\?[^"']*)?(?P=quote)""")
# Paths the pages use for an application's data: the test's temporary directory instead.
PATHS = {"/var/lib/app/": "{tmp}/"}


def substitute(code: str, urls: dict[str, str], tmp: Path) -> str:
    def url(match: re.Match[str]) -> str:
        quote = match["quote"]
        return f"{quote}{urls[match['scheme']]}{match['query'] or ''}{quote}"

    code = URL.sub(url, code)
    for path, replacement in PATHS.items():
        code = code.replace(path, replacement.format(tmp=tmp))
    return code


def program(block: Block) -> list[tuple[Block, str, int, str, bool]]:
    """(block, role, line, code, drop_last) parts: the page's earlier blocks, then this one."""
    parts: list[tuple[Block, str, int, str, bool]] = []
    for earlier in ALL:
        if earlier.page != block.page:
            continue
        subject = earlier is block
        if earlier.kind == "skip" and not subject:
            continue
        for line, code in earlier.setup:
            parts.append((earlier, "setup", line, code, False))
        parts.append((earlier, "subject" if subject else "context", earlier.line, earlier.code,
                      earlier.kind == "runs-forever" and not subject))
        if subject:
            return parts
    raise AssertionError(f"{block.label} is not in its page")


def environment(request: pytest.FixtureRequest, text: str, tmp: Path) -> tuple[dict[str, str],
                                                                            dict[str, str]]:
    """The subprocess's environment and the URL per scheme, starting the servers `text` names."""
    env = dict(os.environ)
    env["TENURE_STORE"] = f"sqlite:///{tmp}/locks.db"
    urls: dict[str, str] = {}
    for scheme, fixture in SERVERS.items():
        if f"{scheme}://" in text:
            urls[scheme] = request.getfixturevalue(fixture).url
    azure = []
    if "azblob:" in text:
        azure.append(request.getfixturevalue("azurite").connection_string)
    if "AzureQueue" in text:
        azure.append(request.getfixturevalue("azurite_queue").connection_string)
    if azure:
        # One connection string with both endpoints, as a real storage account has: the
        # second one's endpoint (what follows its AccountKey) appended to the first.
        env["AZURE_STORAGE_CONNECTION_STRING"] = env["STORAGE_CONN"] = azure[0] + "".join(
            more.split("AccountKey=", 1)[1].split(";", 1)[1] for more in azure[1:])
    return env, urls


def test_markers_are_well_formed() -> None:
    problems = [problem for page in pages() for problem in parse(page)[1]]
    assert problems == []
    assert ALL, "no ```python blocks found"


@pytest.mark.parametrize("block", ALL, ids=[block.label for block in ALL])
def test_snippet(block: Block, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    parts = program(block)
    text = "".join(code for _, _, _, code, _ in parts)
    if block.kind == "skip":
        compile(block.code, block.label, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        pytest.skip(f"snippet: skip ({block.reason})")
    env, urls = environment(request, text, tmp_path)
    payload = json.dumps([
        {"path": str(part.page.relative_to(ROOT)), "file": str(part.page), "line": line,
         "code": substitute(code, urls, tmp_path), "role": role, "drop_last": drop_last}
        for part, role, line, code, drop_last in parts])
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:  # files: no pipe fills up
        process = subprocess.Popen([sys.executable, str(RUNNER)], cwd=tmp_path, env=env,
                                   stdin=subprocess.PIPE, stdout=stdout, stderr=stderr,
                                   text=True, start_new_session=True)
    try:
        if block.kind == "runs-forever":
            run_forever(process, payload, block, out, err)
        else:
            process.communicate(payload, timeout=TIMEOUT)
            assert process.returncode == 0, (
                f"{block.label} failed:\n{out.read_text()}{err.read_text()}")
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def run_forever(process: subprocess.Popen[str], payload: str, block: Block, out: Path,
                err: Path) -> None:
    """Start it, see it alive with no traceback for RUNS_FOREVER_FOR s once it handles SIGTERM,
    SIGTERM, clean exit."""
    assert process.stdin is not None
    process.stdin.write(payload)
    process.stdin.close()
    # Its start-up (imports, connections) may take seconds on a loaded machine: SIGTERM before
    # it set its handler would kill it, so the window counts from there.
    wait_until(lambda: process.poll() is not None or "HANDLES SIGTERM" in out.read_text(),
               timeout=TIMEOUT, what=f"{block.label} to start and handle SIGTERM")
    # The block must stay up: a deliberate observation window, not a wait for an event.
    until = time.monotonic() + RUNS_FOREVER_FOR
    wait_until(lambda: process.poll() is not None or time.monotonic() >= until,
               timeout=RUNS_FOREVER_FOR + 5, what=f"{block.label} to run")
    alive = process.poll() is None
    if alive:
        process.send_signal(signal.SIGTERM)
    process.wait(TIMEOUT)
    output = out.read_text() + err.read_text()
    assert alive, f"{block.label} stopped by itself (status {process.returncode}):\n{output}"
    assert process.returncode == 0, (
        f"{block.label} did not exit cleanly on SIGTERM (status {process.returncode}):\n{output}")
    assert "Traceback" not in err.read_text(), f"{block.label} printed a traceback:\n{output}"


def test_markers_attach_to_the_next_block_and_mistakes_are_named(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("\n".join([
        "<!-- snippet: runs-forever (serves) -->",
        "<!-- snippet: setup (stubs)",
        "def f(): pass",
        "-->",
        "",
        "```python",
        "f()",
        "```",
        "<!-- snippet: skip -->",
        "```python",
        "x",
        "```",
        "<!-- snippet: sometimes (why) -->",
        "text in between",
        "```bash",
        "echo",
        "```",
        "<!-- snippet: setup",
        "x = 1",
    ]) + "\n")
    blocks, problems = parse(page)
    found = [(block.line, block.kind, block.reason, block.setup, block.code) for block in blocks]
    assert found == [
        (6, "runs-forever", "serves", [(2, "def f(): pass\n")], "f()\n"),
        (10, "skip", "", [], "x\n")]
    assert problems == [
        "page.md:9: `snippet: skip` needs a (reason)",
        "page.md:13: unknown snippet marker 'sometimes' (known: skip, runs-forever, setup)",
        "page.md:13: snippet marker not right before a ```python block",
        "page.md:18: `snippet: setup` has no -->"]


# `tenure SUBCOMMAND ...` in the pages: a line of a non-python fence (maybe after `$ ` and
# VAR=value assignments), or an inline code span.
COMMAND_LINE = re.compile(r"^(?:\$ )?(?:[A-Z_]+=\S+ )*tenure (?P<command>[a-z][^#]*)")
COMMAND_SPAN = re.compile(r"`tenure (?P<command>[a-z][^`]*)`")


def cli_commands() -> dict[str, list[tuple[str, str]]]:
    """Subcommand (with its action, e.g. "locks break") -> [(file:line, options used)]."""
    found: dict[str, list[tuple[str, str]]] = {}
    for page in pages():
        fence: str | None = None  # the open fence's language, None outside fences
        for number, text in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if text.startswith("```"):
                fence = text.strip()[3:] if fence is None else None
                continue
            commands = []
            if fence in ("", "bash", "console", "sh") and (match := COMMAND_LINE.match(text)):
                commands.append(match["command"])
            if fence is None:
                commands += [match["command"] for match in COMMAND_SPAN.finditer(text)]
            for command in commands:
                words = command.split()
                sub = words[0] + (f" {words[1]}" if words[:2] == ["locks", "break"] else "")
                where = f"{page.relative_to(ROOT)}:{number}"
                found.setdefault(sub, []).append((where, command))
    return found


CLI = cli_commands()


@pytest.mark.parametrize("subcommand", sorted(CLI))
def test_cli_commands_in_the_pages_exist_with_their_options(subcommand: str) -> None:
    result = subprocess.run([sys.executable, "-m", "tenure", *subcommand.split(), "--help"],
                            capture_output=True, text=True, timeout=TIMEOUT,
                            env={**os.environ, "COLUMNS": "200"})
    assert result.returncode == 0, f"`tenure {subcommand} --help`: {result.stderr}"
    unknown = [(where, option) for where, command in CLI[subcommand]
               for option in re.findall(r"(?<![\w-])--[a-z][\w-]*", command)
               if not re.search(rf"(?<![\w-]){option}(?![\w-])", result.stdout)]
    assert unknown == [], f"options `tenure {subcommand} --help` does not list"


def test_a_failing_snippet_fails_with_its_page_and_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("text\n```python\nx = 1\nraise ValueError(x)\n```\n")
    parts = [{"path": "page.md", "file": str(page), "line": 2, "role": "subject",
              "code": "x = 1\nraise ValueError(x)\n"},
             {"path": "page.md", "file": str(page), "line": 9, "role": "subject",
              "code": "never = 1\n"}]
    result = subprocess.run([sys.executable, str(RUNNER)], input=json.dumps(parts), cwd=tmp_path,
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 1
    assert result.stdout == "START page.md:2\n"
    assert 'File "page.md", line 4, in <module>\n    raise ValueError(x)\n' in result.stderr
    assert "snippet_runner" not in result.stderr
    assert result.stderr.endswith("ValueError: 1\nin the subject part page.md:2\n")


def test_a_runs_forever_snippet_that_ends_by_itself_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nprint('done')\n```\n")
    block = Block(page, 1, "print('done')\n", kind="runs-forever", reason="serves")
    payload = json.dumps([{"path": "page.md", "file": str(page), "line": 1, "role": "subject",
                           "code": block.code}])
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen([sys.executable, str(RUNNER)], cwd=tmp_path,
                                   stdin=subprocess.PIPE, stdout=stdout, stderr=stderr, text=True)
    with pytest.raises(AssertionError, match="stopped by itself \\(status 0\\)"):
        run_forever(process, payload, block, out, err)


def fenced(page: Path, language: str) -> list[str]:
    """The bodies of the page's ```language fences."""
    found, body = [], None
    for text in page.read_text(encoding="utf-8").splitlines():
        if body is None and text.strip() == f"```{language}":
            body = []
        elif body is not None and text.startswith("```"):
            found.append("\n".join(body) + "\n")
            body = None
        elif body is not None:
            body.append(text)
    return found


def test_the_configuration_pages_toml_is_accepted_by_tenure_run(tmp_path: Path) -> None:
    """docs/jobs/configuration.md's TOML with docs/jobs/cli.md's myapp/jobs.py: `tenure run
    --check` takes every key, warns about nothing, and sources each value from the file."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    [app] = [code for code in fenced(ROOT / "docs/jobs/cli.md", "python")
             if code.startswith("# myapp/jobs.py")]
    [config] = fenced(ROOT / "docs/jobs/configuration.md", "toml")
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "jobs.py").write_text(app)
    (tmp_path / "tenure.toml").write_text(substitute(config, {}, tmp_path))
    env = {key: value for key, value in os.environ.items() if not key.startswith("TENURE_")}
    result = subprocess.run([sys.executable, "-m", "tenure", "run", "myapp.jobs:worker",
                             "--config", "tenure.toml", "--check"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["warnings"] == []
    table = tomllib.loads(config)["tenure"]
    jobs = table.pop("jobs")
    for key in table:  # worker options, or defaults of every job its own table may override
        for job in [None] if key in report else report["jobs"]:
            where = report if job is None else report["jobs"][job]
            table_name = f'[tenure.jobs."{job}"]' if key in jobs.get(job, {}) else "[tenure]"
            assert where[key]["source"] == f"tenure.toml {table_name}", (job, key)
    for job, options in jobs.items():
        for key in options:
            assert report["jobs"][job][key]["source"] == f'tenure.toml [tenure.jobs."{job}"]'
