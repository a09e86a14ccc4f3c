"""The MySQL driver of the mysql:// store (the asyncio driver for tenure.aio, PyMySQL for
tenure), and what the store needs to know about it: its errors, the connect() keywords in
which the two differ, how one call is bounded, and how an acquire's answer is read.

Example::

    async with connection.cursor() as cursor:
        ...
    code = error_code(exc)  # the server's or client's error number, or None
"""

from __future__ import annotations

import contextlib
from typing import Any

import anyio

from tenure._async import _shim
from tenure._errors import MissingExtra

try:
    import aiomysql  # type: ignore[import-untyped]
    from pymysql.constants import CLIENT, COMMAND, CR, ER  # type: ignore[import-untyped]
except ImportError as exc:  # pragma: no cover - exercised without the extra installed
    raise MissingExtra("the mysql:// and mariadb:// stores need a MySQL driver: install "
                       "tenure[mysql] "
                       "(pip install 'tenure[mysql]')") from exc

__all__ = ["CLIENT", "COMMAND", "CONFLICTS", "CONFLICT_PAUSE", "CONNECTION_LOST", "CR",
           "DRIVER_ERRORS", "ER", "acquired", "aiomysql", "deadline", "driver_options",
           "error_code", "forsake"]

CONNECTION_LOST = {CR.CR_SERVER_GONE_ERROR, CR.CR_SERVER_LOST, 1927, 4031}  # 1927: MariaDB
# killed; 4031: MySQL 8 disconnected an idle client
DRIVER_ERRORS = (aiomysql.Error, OSError, EOFError, TimeoutError)
# A deadlock (1213: InnoDB rolled the transaction back) or a lock wait timeout (1205): another
# client held a row this call needed. Retried within the call (see AsyncConnections.call),
# after a jittered pause so that the two clients do not collide again in step.
CONFLICTS = (ER.LOCK_DEADLOCK, ER.LOCK_WAIT_TIMEOUT)
CONFLICT_PAUSE = (0.001, 0.05)  # the first pause's least, and the longest pause (seconds)


def error_code(exc: BaseException) -> int | None:
    """The error number of a driver error (the server's or the client's), else None.

    Example:
        >>> error_code(aiomysql.OperationalError(1213, "Deadlock found")), error_code(OSError())
        (1213, None)
    """
    code = exc.args[0] if isinstance(exc, aiomysql.Error) and exc.args else None
    return code if isinstance(code, int) else None


# The asyncio driver's calls are coroutines over streams with no read or write timeout, while
# the sync driver, PyMySQL, blocks on sockets that take read_timeout/write_timeout: the shim
# says which of the two this is (_shim.BLOCKING), wherever they differ.

def driver_options(database: str, timeout: float) -> dict[str, Any]:
    """The connect() keywords in which the asyncio driver and PyMySQL differ: the database
    keyword (`db` vs `database`), and socket timeouts, which only PyMySQL has (async calls are
    bounded by a cancel scope instead, see `deadline`).

    Example:
        >>> sorted(driver_options("locks", 5.0))[0] in ("database", "db")
        True
    """
    if _shim.BLOCKING:
        return {"database": database, "read_timeout": timeout, "write_timeout": timeout}
    return {"db": database}


def deadline(seconds: float) -> contextlib.AbstractContextManager[Any]:
    """A bound on one async call (the asyncio driver has no socket timeouts); nothing for
    PyMySQL, whose sockets time out by themselves.

    Example::

        with deadline(5.0):
            await connection.query("SELECT 1")
    """
    return contextlib.nullcontext() if _shim.BLOCKING else anyio.fail_after(seconds)


def forsake(connection: Any) -> None:
    """Let go of a connection inherited across fork() without sending anything on it (no
    COM_QUIT: the socket is the parent's too, and the server would end the parent's session).

    Example::

        for connection in inherited:
            forsake(connection)
    """
    if _shim.BLOCKING:
        connection._force_close()  # closes the child's copy of the socket only
    else:
        # Closing the asyncio transport would take its socket out of the epoll instance that
        # the child shares with its parent, whose event loop would then never hear from that
        # connection again; so would its StreamWriter when collected. Kept for good (in the
        # child only: a few per store), it is never touched.
        _FORSAKEN.append(connection)


_FORSAKEN: list[Any] = []


async def acquired(connection: Any, limit: int) -> tuple[int, int] | None:
    """The answer to an acquire (see Statements.acquire) whose first result has been read:
    (slot, token), or None when nothing was free.

    Example::

        await connection.query(statement)
        found = await acquired(connection, limit)
    """
    result = connection._result
    while result.has_next:  # a semaphore's transaction: its SELECT comes last
        await connection.next_result()
        result = connection._result
    if limit == 1:  # the upsert's OK packet: affected rows and the token as LAST_INSERT_ID
        return (0, int(result.insert_id)) if result.affected_rows else None
    slot, token = result.rows[0]
    return None if slot is None else (int(slot), int(token))
