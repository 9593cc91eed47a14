// Package sim models a mass storage system to answer "what will this
// configuration deliver, and which part limits it?" — analytically (the
// bound of seed 002, generalised to a path of resources) and by
// discrete-event simulation on the des kernel: fluid sharing for links,
// switches and servers, request-level models for disks, RAID-5 and RAID-6
// arrays (with failed members and rebuilds) and tape (with bad cartridges,
// failed drives and recopies). Workloads are the same streams strata bench runs; studies are TOML
// files (examples/sim/); sweeps run points in parallel, each
// deterministic; calibrate fits device curves from strata bench JSON.
package sim

import "github.com/strata-storage/strata/internal/config"

// Size is a byte count ("2MiB", "160MB").
type Size = config.Size

// Rate is bytes per second ("200MB/s").
type Rate = config.Size
