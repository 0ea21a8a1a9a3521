// Package loadsampler is the node's trusted load sampler: it reads Linux
// pressure stall information (PSI), the cgroup's memory and the
// scheduler's queues, and publishes samples into a [core.NodeLoadState]
// on a ticker the node owns. Admission itself starts nothing.
//
// # Readings
//
//	resource  with PSI                          without PSI (old kernels)
//	cpu       some share of /proc/pressure/cpu  1-minute /proc/loadavg / usable CPUs
//	memory    max(some share of /proc/pressure/memory,   max(1 - MemAvailable/MemTotal,
//	              cgroup usage ratio)                        cgroup usage ratio)
//
// A PSI share is Δtotal (µs) / Δwall (µs) since the previous successful
// read, clamped to [0, 1]. A one-shot reading (the first, or one where
// the clock did not advance or a total went backwards) is avg10 / 100.
//
// The cgroup usage ratio counts only where a limit applies: cgroup v2
// memory.current / memory.max (no limit when "max" or when memory.max is
// absent), cgroup v1 memory.usage_in_bytes / memory.limit_in_bytes (no
// limit when the limit is at or above MemTotal, which the kernel's
// "unlimited" value always is). A limit of zero is full.
//
// [Sources] names the source each published value came from: "psi" or
// "loadavg" for CPU; for memory the reading that was larger, "psi" or
// "meminfo", or "cgroup1"/"cgroup2" (a tie goes to the cgroup).
//
// # Files
//
// Every reader takes its paths from [Files], so tests and `admissionctl
// load -proc DIR -cgroup DIR` run on fixture directories. The memory
// cgroup is found once, at [New], through /proc/self/cgroup: a v1 memory
// hierarchy at CgroupRoot/memory/PATH wins over v2 at CgroupRoot/PATH
// (or CgroupRoot/unified/PATH on a hybrid host); a path absent under its
// hierarchy falls back to the hierarchy's root, which is what a container
// without a cgroup namespace sees. Usable CPUs are the process's affinity
// mask (sched_getaffinity) on Linux and runtime.NumCPU elsewhere.
//
// A file that does not exist is an absent source. A file that exists but
// cannot be read, or does not hold what the kernel writes, is a
// [*FileError] naming it, never a silent fallback; so is a fallback that
// is needed and missing. Error messages never repeat file contents.
//
// # Publishing
//
// [Sampler.Run] samples at once and then every interval (by default a
// quarter of the policy's maximum observation age, so two lost samples
// still leave admission open) until its context ends. Sequences start at
// 1 and grow by one per publish; ObservedAt is the injected clock's
// reading taken with the files, and the per-class queue delays are read
// at that same instant (see scheduler.Scheduler.OldestWait).
//
// A failed read publishes nothing: the last sample goes stale and
// admission fails closed once it is older than the maximum observation
// age, then reopens at the next good read. Failures and refused publishes
// are counted ([Sampler.Stats]) and logged once per change of state (a
// new failure, a different failure, recovery), never once per tick.
//
// # Caveats
//
// The ticker runs on real time; only the readings use the injected clock.
// Reads are plain file reads of a few hundred bytes, a handful per tick;
// the sampler holds no file open between ticks. cgroup v1 usage includes
// page cache, so a v1 ratio runs higher than v2's for the same workload.
package loadsampler
