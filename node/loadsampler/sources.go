package loadsampler

// CPUSource is where a CPU pressure reading came from.
type CPUSource uint8

// The CPU sources.
const (
	// CPUPSI is the some share of /proc/pressure/cpu.
	CPUPSI CPUSource = iota + 1
	// CPULoadavg is the 1-minute load of /proc/loadavg over usable CPUs.
	CPULoadavg
)

var cpuSourceNames = [...]string{"", "psi", "loadavg"}

func (s CPUSource) String() string {
	if int(s) < len(cpuSourceNames) && s != 0 {
		return cpuSourceNames[s]
	}
	return "invalid-cpu-source"
}

// MarshalText writes the source's name.
func (s CPUSource) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MemorySource is the reading a memory pressure value came from: the
// larger of the pressure share (PSI, or /proc/meminfo without it) and the
// cgroup's usage ratio where a limit applies. A tie goes to the cgroup.
type MemorySource uint8

// The memory sources.
const (
	// MemoryPSI is the some share of /proc/pressure/memory.
	MemoryPSI MemorySource = iota + 1
	// MemoryMeminfo is 1 - MemAvailable/MemTotal from /proc/meminfo.
	MemoryMeminfo
	// MemoryCgroup1 is memory.usage_in_bytes / memory.limit_in_bytes.
	MemoryCgroup1
	// MemoryCgroup2 is memory.current / memory.max.
	MemoryCgroup2
)

var memorySourceNames = [...]string{"", "psi", "meminfo", "cgroup1", "cgroup2"}

func (s MemorySource) String() string {
	if int(s) < len(memorySourceNames) && s != 0 {
		return memorySourceNames[s]
	}
	return "invalid-memory-source"
}

// MarshalText writes the source's name.
func (s MemorySource) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Sources names the source of each resource's reading.
type Sources struct {
	CPU    CPUSource    `json:"cpu"`
	Memory MemorySource `json:"memory"`
}
