"""scripts/unasync.py: the rules turn the async source into its sync twin, except on a line that
ends with `# unasync: keep`, which names both twins on purpose and is copied as it is."""

from __future__ import annotations

import importlib.util
import textwrap
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "unasync.py"


def _unasync() -> ModuleType:
    spec = importlib.util.spec_from_file_location("unasync_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_kept_line_names_both_twins_and_the_rest_is_converted() -> None:
    source = textwrap.dedent("""\
        async def checked(client: redis.asyncio.Redis) -> AsyncRedisStore:
            if not isinstance(client, Redis):
                raise InvalidArgumentType(
                    "tenure.stores.RedisStore takes a redis.Redis, "
                    "tenure.aio.stores.AsyncRedisStore a redis.asyncio.Redis")  # unasync: keep
            return await AsyncRedisStore(client=client)
        """)
    used: set[str] = set()
    generated = _unasync().convert(source, used).splitlines()
    assert generated[0] == "def checked(client: redis.Redis) -> RedisStore:"
    assert generated[3] == '            "tenure.stores.RedisStore takes a redis.Redis, "'
    assert generated[4] == ('            "tenure.aio.stores.AsyncRedisStore a redis.asyncio.Redis")'
                            "  # unasync: keep")
    assert generated[5] == "    return RedisStore(client=client)"
    assert r"\bAsync([A-Z]\w*)" in used and r"\bredis\.asyncio\b" in used


def test_a_line_that_only_mentions_the_marker_is_converted() -> None:
    line = "x = AsyncLock()  # see unasync: keep-lines in scripts/unasync.py\n"
    assert _unasync().convert(line, set()) == ("x = Lock()  # see unasync: keep-lines in "
                                               "scripts/unasync.py\n")
