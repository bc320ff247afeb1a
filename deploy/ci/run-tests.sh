#!/bin/sh
# A CI step in plain shell: run the test suite under reaper run, so that nothing it starts outlives
# the step. reaper exits with the suite's status (124 if --timeout ended it); what was left running is
# named on stderr, for example:
#   reaper run: killed 2 leftover processes: node (pid 4121, 38s), sleep (pid 4130, 12s)
# and written to reaper-report.json.
set -eu
exec reaper run --timeout "${TEST_TIMEOUT:-30m}" --report reaper-report.json -- "$@"
