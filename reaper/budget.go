package reaper

import "github.com/cgreaper/reaper/internal/taskout"

// Budget caps the output one call returns (see taskout.Budget).
type Budget = taskout.Budget
