"""`tenure demo`: the invoice story end to end, with faults, on the embedded default store.

Five instances of one app share a SQLite database of invoices. A singleton job runs every
second on one of them and pays what is pending, through four layers: the job's lease (with a
fencing token), a fenced claim per invoice, an idempotency key for the charge, and an outbox
for the "invoice paid" mail. Meanwhile the demo freezes the instance that is paying right after
it claimed an invoice, for longer than its lease (SIGSTOP, then SIGCONT: a GC pause), and kills
it right after a payment's commit, before its mail (SIGKILL, then a restart), and at the end
checks: no duplicate charge, no unpaid invoice, one mail per paid invoice.

Switching layers off replays the same faults without them: `--no-fencing` lets the woken
holder's late write land (a second mail), `--no-idempotency` lets it charge again, and
`--no-outbox` loses the killed instance's mail. `--no-lease` breaks no invariant: the
instances race for the same invoices and the per-invoice claims keep each to one payer (defence
in depth); the report's notes say so, and say why when fewer faults landed than were asked.

Example::

    from tenure.demo import DemoSettings, run_demo
    report = run_demo(DemoSettings(invoices=100, instances=3))
    assert report.failures() == []
"""

from typing import TYPE_CHECKING, Any

from tenure._errors import MissingExtra

if TYPE_CHECKING:
    from tenure.demo._play import DemoSettings, print_report, run_demo

_PUBLIC = ("DemoSettings", "print_report", "run_demo")


def __getattr__(name: str) -> Any:
    # Loaded on first use: the demo needs tenure[sql] (SQLAlchemy), `tenure --help` does not.
    if name in _PUBLIC:
        _require_sqlalchemy()
        from tenure.demo import _play

        return getattr(_play, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _require_sqlalchemy() -> None:
    """The one-line MissingExtra of every other extra, not a ModuleNotFoundError traceback
    from deep in the demo (`tenure demo` on a bare install)."""
    try:
        import sqlalchemy  # noqa: F401
    except ImportError as exc:
        raise MissingExtra("tenure demo keeps its invoices in SQLite through SQLAlchemy 2: "
                           "install tenure[sql] (pip install 'tenure[sql]')") from exc


__all__ = ["DemoSettings", "print_report", "run_demo"]
