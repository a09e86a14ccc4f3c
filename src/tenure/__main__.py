"""`python -m tenure ...` runs the `tenure` command (see tenure.cli).

Example::

    $ python -m tenure locks --store sqlite:////var/lib/app/locks.db
"""

import sys

from tenure.cli import main

if __name__ == "__main__":
    sys.exit(main())
