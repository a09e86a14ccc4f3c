"""Generate src/tenure/_sync/ from src/tenure/_async/ (the approach of httpcore's unasync).

Explicit, ordered substitution rules; every rule must be used at least once, and `--check`
fails when the generated tree differs from what is on disk. Hand-written files (_shim.py) are
left alone, and so is a line that ends with `# unasync: keep`: one that names both twins on
purpose, e.g. an error message saying that tenure.stores.RedisStore takes a redis.Redis and
tenure.aio.stores.AsyncRedisStore a redis.asyncio.Redis, which the rules would turn into
nonsense. (A docstring line cannot carry the marker: let each twin's docstring describe itself,
or name both twins in a comment or a string.)

    python scripts/unasync.py          # regenerate
    python scripts/unasync.py --check  # fail if stale (run by `make test`)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src" / "tenure" / "_async"
TARGET = ROOT / "src" / "tenure" / "_sync"
HAND_WRITTEN = {"_shim.py"}
HEADER = "# GENERATED from src/tenure/_async/{path} by scripts/unasync.py: do not edit.\n"

RULES: list[tuple[str, str]] = [
    (r"tenure\._async\b", "tenure._sync"),
    (r"tenure\.aio\.connect\b", "tenure.connect"),
    (r"\bAsyncAcquiring\[Async(Lease\w*)\]", r"\1"),
    (r"\bAsyncAcquiring\(((?:[^()]|\([^()]*\))*)\)", r"\1"),
    (r"from tenure\._sync\._shim import AsyncAcquiring\n", ""),
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bazure\.storage\.blob\.aio\b", "azure.storage.blob"),
    (r"\bazure\.identity\.aio\b", "azure.identity"),
    (r"\baiomysql\b", "pymysql"),
    (r"\bredis\.asyncio\b", "redis"),
    (r"\bawait ", ""),
    (r"__aenter__", "__enter__"),
    (r"__aexit__", "__exit__"),
    (r"\bAsync([A-Z]\w*)", r"\1"),
    (r"renewed in the background", "renewed by a background thread"),
    (r"# the body is cancelled if the lease is lost", "# lease.check() raises once it is lost"),
]


KEEP = re.compile(r"^.*#\s*unasync: keep[ \t]*$", re.MULTILINE)
_HELD = re.compile(r"\x00(\d+)\x00")  # a kept line's place while the rules run: no rule matches


def convert(text: str, used: set[str]) -> str:
    """The sync twin of `text`; adds each rule that changed something to `used`.

    Example::

        convert("async def f() -> AsyncLease: ...\n", set())  # "def f() -> Lease: ...\n"
    """
    kept: list[str] = []

    def hold(line: re.Match[str]) -> str:
        kept.append(line.group(0))
        return f"\x00{len(kept) - 1}\x00"

    text = KEEP.sub(hold, text)
    for pattern, replacement in RULES:
        text, count = re.subn(pattern, replacement, text)
        if count:
            used.add(pattern)
    return _HELD.sub(lambda held: kept[int(held.group(1))], text)


def generate() -> dict[Path, str]:
    used: set[str] = set()
    outputs: dict[Path, str] = {}
    for source in sorted(SOURCE.rglob("*.py")):
        relative = source.relative_to(SOURCE)
        if relative.name in HAND_WRITTEN:
            continue
        outputs[TARGET / relative] = HEADER.format(path=relative.as_posix()) + convert(
            source.read_text(), used)
    unused = [pattern for pattern, _ in RULES if pattern not in used]
    if unused:
        sys.exit(f"unasync: rules never used (remove them or fix the source): {unused}")
    return outputs


def main() -> int:
    outputs = generate()
    existing = {path for path in TARGET.rglob("*.py") if path.name not in HAND_WRITTEN}
    if "--check" in sys.argv:
        stale = sorted(str(path.relative_to(ROOT)) for path, text in outputs.items()
                       if not path.exists() or path.read_text() != text)
        stale += sorted(str(path.relative_to(ROOT)) for path in existing - set(outputs))
        if stale:
            print("unasync: generated sync code is stale; run `python scripts/unasync.py`:",
                  *stale, sep="\n  ")
            return 1
        print(f"unasync: {len(outputs)} generated files are up to date")
        return 0
    for path in existing - set(outputs):
        path.unlink()
    for path, text in outputs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"unasync: wrote {len(outputs)} files under {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
