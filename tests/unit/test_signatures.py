"""What the Worker calls how: async callables (also a partial of one, or an object with an async
__call__), generators refused at registration, unfinished work refused at run time."""

from __future__ import annotations

import functools
from typing import Any

import pytest

import tenure
from tenure.jobs._signatures import check_callable, is_async, refuse_unfinished

EXAMPLE = "def my_job(run: tenure.Run) -> None"


async def async_job(run: Any) -> None: ...


def sync_job(run: Any) -> None: ...


def generator_job(run: Any) -> Any:
    yield run


class AsyncCall:
    async def __call__(self, run: Any) -> None: ...

    async def method(self, run: Any) -> None: ...


def test_what_counts_as_async() -> None:
    assert is_async(async_job)
    assert is_async(functools.partial(async_job))
    assert is_async(functools.partial(functools.partial(AsyncCall())))
    assert is_async(AsyncCall())
    assert is_async(AsyncCall().method)
    assert not is_async(sync_job)
    assert not is_async(AsyncCall)  # calling the class makes an instance, no coroutine
    assert not is_async(print)


@pytest.mark.parametrize("job", [generator_job, functools.partial(generator_job)])
def test_a_generator_is_refused_with_the_function_named(job: Any) -> None:
    with pytest.raises(tenure.InvalidArgumentType, match=r"^a job must not be a generator: "
                       r"generator_job\(\) is a generator function \(a def with yield\), so "
                       r"calling it runs none of its body; .*write it as: def my_job"):
        check_callable(job, "a job", 1, EXAMPLE)


def test_a_class_is_checked_as_a_constructor_not_by_its_call_method() -> None:
    class Job:
        def __init__(self, run: Any) -> None: ...

        def __call__(self) -> Any:
            yield 1

    check_callable(Job, "a job", 1, EXAMPLE)


async def _coroutine() -> None:
    raise AssertionError("never runs")


def test_unfinished_results_are_refused_and_closed() -> None:
    coroutine: Any = _coroutine()
    with pytest.raises(TypeError, match=r"^the job returned a coroutine, which nothing awaits"):
        refuse_unfinished(coroutine, "the job")
    assert coroutine.cr_frame is None  # closed: no "never awaited" warning later
    generator = generator_job(None)
    with pytest.raises(TypeError, match=r"^the job returned a generator, which nothing iterates"):
        refuse_unfinished(generator, "the job")
    assert generator.gi_frame is None
    for value in (None, 0, "done", [1]):
        refuse_unfinished(value, "the job")


def test_a_returned_task_or_future_is_not_refused() -> None:
    """A Task (or any awaitable that is no coroutine) runs by itself once scheduled: failing
    the run would retry work that is already going on."""
    import asyncio

    async def scheduled() -> None: ...

    async def main() -> None:
        task = asyncio.ensure_future(scheduled())
        refuse_unfinished(task, "the job")  # no TypeError
        await task

    asyncio.run(main())
