package reaper

import (
	"github.com/cgreaper/reaper/internal/instance"
	"github.com/cgreaper/reaper/internal/sweep"
)

// Instance describes a Reaper as it records itself in its state directory (see Reaper.Instance), for
// its guard and for a later instance that sweeps up after it if it dies (internal/instance).
type Instance = instance.Record

// SweepReport says what the sweep after dead instances found and did (see Observer.Swept).
type SweepReport = sweep.Report
