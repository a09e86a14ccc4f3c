"""A QueueMessage outlives pickling (handlers hand messages to process pools and task queues):
its text, ids and scope travel, its parsed body is parsed again, and its lease stays behind (a
lease belongs to the process that holds it)."""

from __future__ import annotations

import pickle

import tenure
from tenure.queues import QueueMessage


def message(text: str = '{"Invoice": {"Id": 7}}') -> QueueMessage:
    sent = QueueMessage("a1", text, 2, receipt="r-1")
    sent.scope_key = "7"
    return sent


def test_an_unread_message_pickles_with_a_body_that_parses() -> None:
    copy = pickle.loads(pickle.dumps(message()))
    assert copy.body == {"Invoice": {"Id": 7}}
    assert (copy.id, copy.text, copy.dequeue_count, copy.receipt, copy.scope_key) == (
        "a1", '{"Invoice": {"Id": 7}}', 2, "r-1", "7")


def test_a_read_message_pickles_too() -> None:
    sent = message()
    assert sent.body["Invoice"]["Id"] == 7
    assert pickle.loads(pickle.dumps(sent)).body == {"Invoice": {"Id": 7}}


def test_the_lease_stays_with_the_process_that_holds_it() -> None:
    with tenure.connect("memory://") as store:
        sent = message()
        sent.lease = store.lock("invoice:7").acquire()
        copy = pickle.loads(pickle.dumps(sent))
        assert copy.lease is None and not copy.stopped
        sent.lease.release()


def test_a_deep_copy_parses_its_body_too() -> None:
    import copy

    assert copy.deepcopy(message()).body == {"Invoice": {"Id": 7}}
