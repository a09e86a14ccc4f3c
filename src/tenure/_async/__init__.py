"""The core (leases, locks, semaphores, stores). Its source is tenure/_async/; tenure/_sync/ is
generated from that by scripts/unasync.py, and only _shim.py is written by hand on each side."""
