#!/bin/sh
# Install the servers the test suite starts itself (redis-server, PostgreSQL, MariaDB), and a C
# compiler (it builds tests/support/wallclock_shift.c, with which
# tests/conformance/test_clock_steps.py steps their clocks back), where they are missing: from
# Debian's packages when running as root with apt-get, else a message saying what to install. Their services are not started (the tests run their own
# servers on free ports). Called by `make test`; safe to run again (does nothing when all are present).
set -u
missing=""
command -v redis-server >/dev/null 2>&1 || missing="$missing redis-server"
command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
    || missing="$missing postgresql"
{ command -v mariadbd || command -v mysqld || ls /usr/sbin/mariadbd; } >/dev/null 2>&1 \
    || missing="$missing mariadb-server"
# a C compiler builds tests/support/wallclock_shift.c, the shim that steps the servers' clocks
command -v cc >/dev/null 2>&1 || missing="$missing gcc"
[ -z "$missing" ] && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "missing for the tests:$missing. Install them (e.g. apt-get install$missing);"
    echo "without them their tests skip, or fail under TENURE_REQUIRE_SERVICES=1."
    exit 0
fi
echo "installing$missing with apt-get (their services are not started)"
# policy-rc.d exit 101 tells the packages' scripts not to start services.
created_policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    created_policy=1
fi
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086  # $missing is a list of package names
apt-get install -y -q --no-install-recommends $missing >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $missing >/dev/null; } \
    || echo "apt-get could not install$missing; their tests will skip or fail"
[ -n "$created_policy" ] && rm -f /usr/sbin/policy-rc.d
exit 0
