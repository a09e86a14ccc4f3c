"""Singleton jobs on tenure's locks: periodic jobs that run once per period across instances,
leader election, and queue-message jobs locked per key. Built only on the public lock API.

Example::

    worker = tenure.Worker(store)

    @worker.every(timedelta(minutes=5))
    def process_invoices(run: tenure.Run) -> None:
        ...
"""

from tenure.jobs._config import Config, apply_config, load_config
from tenure.jobs._election import AsyncElection, Election
from tenure.jobs._health_http import HealthServer, serve_health
from tenure.jobs._run import JobRecord, Run
from tenure.jobs._schedule import Cron, Every
from tenure.jobs._worker import AsyncWorker, Worker

__all__ = ["AsyncElection", "AsyncWorker", "Config", "Cron", "Election", "Every", "HealthServer",
           "JobRecord", "Run", "Worker", "apply_config", "load_config", "serve_health"]
