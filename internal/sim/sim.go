// Package sim models a mass storage system to answer "what will this
// configuration deliver, and which part limits it?" — analytically (the
// bound of seed 002, generalised to a path of resources) and by
// discrete-event simulation on the des kernel: fluid sharing for links
// (duplex caps, rack uplinks), switches and servers, request-level models
// for disks, RAID-5, RAID-6 and declustered-parity arrays (with failed
// members and rebuilds) and tape (with bad cartridges, failed drives and
// recopies). Workloads are the same streams strata bench runs, reading
// into memory or into the client's local files (the page cache and the
// fsync a get pays), one group of clients or several on classes of
// servers at once, copies between classes among them (groups.go); studies are TOML files (examples/sim/); sweeps run
// points in parallel, each deterministic; calibrate fits device curves
// from strata bench JSON and predicts repeats of the run it fitted.
package sim

import "github.com/strata-storage/strata/internal/config"

// Size is a byte count ("2MiB", "160MB").
type Size = config.Size

// Rate is bytes per second ("200MB/s").
type Rate = config.Size
