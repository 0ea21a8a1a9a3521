package loadsampler

import (
	"bytes"
	"math"
	"strconv"
)

// psi is the some line of a pressure file: the 10-second average as a
// fraction and the cumulative stall time in microseconds.
type psi struct {
	avg10 float64
	total uint64
}

// parsePSI reads the "some" line of a /proc/pressure file:
//
//	some avg10=0.42 avg60=0.30 avg300=0.10 total=123456
func parsePSI(path string, data []byte) (psi, error) {
	for line := range bytes.Lines(data) {
		fields := bytes.Fields(line)
		if len(fields) == 0 || string(fields[0]) != "some" {
			continue
		}
		var p psi
		var haveAvg, haveTotal bool
		for _, f := range fields[1:] {
			key, value, ok := bytes.Cut(f, []byte("="))
			if !ok {
				return psi{}, malformed(path, "field")
			}
			switch string(key) {
			case "avg10":
				v, err := strconv.ParseFloat(string(value), 64)
				if err != nil || math.IsNaN(v) || v < 0 || v > 100 {
					return psi{}, malformed(path, "avg10")
				}
				p.avg10, haveAvg = v/100, true
			case "total":
				v, err := strconv.ParseUint(string(value), 10, 64)
				if err != nil {
					return psi{}, malformed(path, "total")
				}
				p.total, haveTotal = v, true
			}
		}
		if !haveAvg {
			return psi{}, malformed(path, "avg10")
		}
		if !haveTotal {
			return psi{}, malformed(path, "total")
		}
		return p, nil
	}
	return psi{}, malformed(path, "some line")
}

// parseLoadavg reads the 1-minute load of /proc/loadavg:
//
//	0.42 0.30 0.10 1/86 6437
func parseLoadavg(path string, data []byte) (float64, error) {
	fields := bytes.Fields(data)
	if len(fields) < 3 {
		return 0, malformed(path, "load averages")
	}
	v, err := strconv.ParseFloat(string(fields[0]), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, malformed(path, "1-minute load")
	}
	return v, nil
}

// meminfo is what /proc/meminfo says about physical memory, in bytes.
type meminfo struct {
	total, available uint64
}

// maxKiB keeps a kB value times 1024 inside a uint64.
const maxKiB = math.MaxUint64 >> 10

// parseMeminfo reads MemTotal and MemAvailable from /proc/meminfo:
//
//	MemTotal:       24683652 kB
//	MemAvailable:   24391804 kB
func parseMeminfo(path string, data []byte) (meminfo, error) {
	var m meminfo
	var haveTotal, haveAvailable bool
	for line := range bytes.Lines(data) {
		key, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		var dst *uint64
		switch string(key) {
		case "MemTotal":
			dst, haveTotal = &m.total, true
		case "MemAvailable":
			dst, haveAvailable = &m.available, true
		default:
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) != 2 || string(fields[1]) != "kB" {
			return meminfo{}, malformed(path, string(key))
		}
		v, err := strconv.ParseUint(string(fields[0]), 10, 64)
		if err != nil || v > maxKiB {
			return meminfo{}, malformed(path, string(key))
		}
		*dst = v << 10
	}
	switch {
	case !haveTotal || m.total == 0:
		return meminfo{}, malformed(path, "MemTotal")
	case !haveAvailable:
		return meminfo{}, malformed(path, "MemAvailable")
	}
	return m, nil
}

// parseBytes reads a cgroup file holding one byte count, such as
// memory.current or memory.usage_in_bytes. With unlimited set, the word
// "max" (cgroup v2's no limit) is accepted and reported as ok=false.
func parseBytes(path string, data []byte, unlimited bool) (v uint64, limited bool, err error) {
	text := bytes.TrimSpace(data)
	if unlimited && string(text) == "max" {
		return 0, false, nil
	}
	v, perr := strconv.ParseUint(string(text), 10, 64)
	if perr != nil {
		return 0, false, malformed(path, "byte count")
	}
	return v, true, nil
}

// parseSelfCgroup finds the v1 memory hierarchy's path and the v2 path
// in /proc/self/cgroup:
//
//	4:memory:/process_api/cb0f99
//	0::/system.slice/latentd.service
func parseSelfCgroup(path string, data []byte) (v1Memory, v2 string, haveV1, haveV2 bool, err error) {
	for line := range bytes.Lines(data) {
		line = bytes.TrimRight(line, "\n")
		if len(line) == 0 {
			continue
		}
		id, rest, ok1 := bytes.Cut(line, []byte(":"))
		controllers, p, ok2 := bytes.Cut(rest, []byte(":"))
		if !ok1 || !ok2 || len(p) == 0 || p[0] != '/' {
			return "", "", false, false, malformed(path, "line")
		}
		if _, err := strconv.ParseUint(string(id), 10, 32); err != nil {
			return "", "", false, false, malformed(path, "hierarchy ID")
		}
		if string(id) == "0" && len(controllers) == 0 {
			v2, haveV2 = string(p), true
			continue
		}
		for c := range bytes.SplitSeq(controllers, []byte(",")) {
			if string(c) == "memory" {
				v1Memory, haveV1 = string(p), true
			}
		}
	}
	return v1Memory, v2, haveV1, haveV2, nil
}
