package loadsampler

import (
	"path/filepath"
	"time"
)

// raw is what one read of the files found, before any arithmetic.
type raw struct {
	cpu, memory      psi
	haveCPU, haveMem bool    // PSI files present
	load             float64 // 1-minute load; read only without CPU PSI
	meminfo          meminfo // read only when needed
	cgroupVersion    cgroupVersion
	cgroupUsage      uint64
	cgroupLimit      uint64
	cgroupLimited    bool // a limit applies
}

// readRaw reads every file the reading needs. A file that is present but
// unusable is an error naming it; so is a missing fallback.
func readRaw(f Files, cg cgroupDir) (raw, error) {
	var r raw
	var err error
	if r.cpu, r.haveCPU, err = readPSI(f.proc("pressure", "cpu")); err != nil {
		return raw{}, err
	}
	if r.memory, r.haveMem, err = readPSI(f.proc("pressure", "memory")); err != nil {
		return raw{}, err
	}
	if !r.haveCPU {
		path := f.proc("loadavg")
		data, err := readRequired(path)
		if err != nil {
			return raw{}, err
		}
		if r.load, err = parseLoadavg(path, data); err != nil {
			return raw{}, err
		}
	}
	// Physical memory is needed for the fallback and to tell a v1 limit
	// from none.
	if !r.haveMem || cg.version == cgroupV1 {
		path := f.proc("meminfo")
		data, err := readRequired(path)
		if err != nil {
			return raw{}, err
		}
		if r.meminfo, err = parseMeminfo(path, data); err != nil {
			return raw{}, err
		}
	}
	r.cgroupVersion = cg.version
	switch cg.version {
	case cgroupV2:
		if r.cgroupUsage, _, err = readBytes(filepath.Join(cg.dir, "memory.current"), false, true); err != nil {
			return raw{}, err
		}
		// The root cgroup has no memory.max: no limit.
		if r.cgroupLimit, r.cgroupLimited, err = readBytes(filepath.Join(cg.dir, "memory.max"), true, false); err != nil {
			return raw{}, err
		}
	case cgroupV1:
		if r.cgroupUsage, _, err = readBytes(filepath.Join(cg.dir, "memory.usage_in_bytes"), false, true); err != nil {
			return raw{}, err
		}
		if r.cgroupLimit, _, err = readBytes(filepath.Join(cg.dir, "memory.limit_in_bytes"), false, true); err != nil {
			return raw{}, err
		}
		r.cgroupLimited = r.cgroupLimit < r.meminfo.total
	}
	return r, nil
}

func readPSI(path string) (psi, bool, error) {
	data, present, err := readOptional(path)
	if err != nil || !present {
		return psi{}, false, err
	}
	p, err := parsePSI(path, data)
	return p, err == nil, err
}

// readBytes reads a one-number cgroup file. With unlimited, "max" means
// no limit; with required, a missing file is an error, else no limit.
func readBytes(path string, unlimited, required bool) (uint64, bool, error) {
	var data []byte
	var err error
	if required {
		data, err = readRequired(path)
	} else {
		var present bool
		data, present, err = readOptional(path)
		if err == nil && !present {
			return 0, false, nil
		}
	}
	if err != nil {
		return 0, false, err
	}
	return parseBytes(path, data, unlimited)
}

// Reading is one sample's pressures and where each came from.
type Reading struct {
	CPU     float64 `json:"cpu"`
	Memory  float64 `json:"memory"`
	Sources Sources `json:"sources"`
}

// baseline is an earlier read to difference PSI totals against.
type baseline struct {
	at  time.Time
	raw raw
	ok  bool
}

// compute turns a read into pressures. With a baseline, a PSI share is
// Δtotal / Δwall over the interval; without one (or when the clock did
// not advance, or a total went backwards) it is avg10.
func compute(r *raw, prev *baseline, now time.Time, cpus int) Reading {
	var out Reading
	elapsed := time.Duration(0)
	if prev.ok {
		elapsed = now.Sub(prev.at)
	}
	if r.haveCPU {
		out.CPU = share(r.cpu, prev.raw.cpu, prev.ok && prev.raw.haveCPU, elapsed)
		out.Sources.CPU = CPUPSI
	} else {
		out.CPU = clamp(r.load / float64(max(cpus, 1)))
		out.Sources.CPU = CPULoadavg
	}
	if r.haveMem {
		out.Memory = share(r.memory, prev.raw.memory, prev.ok && prev.raw.haveMem, elapsed)
		out.Sources.Memory = MemoryPSI
	} else {
		out.Memory = clamp(1 - float64(r.meminfo.available)/float64(r.meminfo.total))
		out.Sources.Memory = MemoryMeminfo
	}
	if r.cgroupVersion != noCgroup && r.cgroupLimited {
		ratio := 1.0
		if r.cgroupLimit > 0 {
			ratio = clamp(float64(r.cgroupUsage) / float64(r.cgroupLimit))
		}
		if ratio >= out.Memory {
			out.Memory = ratio
			out.Sources.Memory = MemoryCgroup1
			if r.cgroupVersion == cgroupV2 {
				out.Sources.Memory = MemoryCgroup2
			}
		}
	}
	return out
}

func share(cur, prev psi, havePrev bool, elapsed time.Duration) float64 {
	if !havePrev || elapsed <= 0 || cur.total < prev.total {
		return clamp(cur.avg10)
	}
	micros := float64(elapsed) / float64(time.Microsecond)
	return clamp(float64(cur.total-prev.total) / micros)
}

func clamp(f float64) float64 {
	switch {
	case !(f >= 0): // also NaN
		return 0
	case f > 1:
		return 1
	}
	return f
}

// ReadOnce takes one one-shot reading of f: PSI shares are avg10, since
// there is no earlier reading to difference. A source that is present
// but unreadable or malformed is an error naming the file, never a
// silent fallback.
func ReadOnce(f Files) (Reading, error) {
	cg, err := findCgroup(f)
	if err != nil {
		return Reading{}, err
	}
	r, err := readRaw(f, cg)
	if err != nil {
		return Reading{}, err
	}
	return compute(&r, &baseline{}, time.Time{}, usableCPUsOr(f.CPUs)), nil
}

func usableCPUsOr(n int) int {
	if n > 0 {
		return n
	}
	return usableCPUs()
}
