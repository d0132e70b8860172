package gpu

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The probe's sampling mode (paddle-gpu-probe sample) writes one line per
// sample on its stdout, in this format, version 2:
//
//	v2 GPU-a1b2c300-8f2d-4c1b-9a3e-1c2d3e4f5a00=37/1073741824/81234567 MIG-a1b2c300-0700-4b1c-9d2e-0f1a2b3c4d00=-/2097152/81234567
//
// the version token, then one field per GPU, separated by single spaces:
// the GPU's key (its UUID, or a MIG instance's MIG UUID), "=", then its
// values separated by "/": utilisation in percent (an integer 0 to 100),
// used memory in bytes, and the total energy counter of the GPU (the
// parent GPU of a MIG instance) in millijoules since the driver loaded;
// a value is "-" when that query failed or is not supported. Numbers are
// plain decimal (no sign, no leading zero), a line ends with "\n".
//
// The format grows by values appended to a field: a reader ignores the
// values after those it knows, so a newer probe's extra values never cost
// an older reader its line (a value that changes meaning gets a new
// version token). Both sides share this code, so the format lives here, on the cgo-free
// side. A reader drops a line without its "\n" (a probe killed mid-write)
// and any line that does not parse.
const sampleVersion = "v2"

// Sample is one line of the sampling mode: a reading per GPU.
type Sample []Reading

// Reading is one GPU's values in a sample.
type Reading struct {
	UUID string
	// Util is the percentage of the sample period in which a kernel ran on
	// the GPU (nvmlDeviceGetUtilizationRates' gpu field); valid when HasUtil.
	Util    uint8
	HasUtil bool
	// MemoryUsed is nvmlDeviceGetMemoryInfo's used bytes; valid when HasMemory.
	MemoryUsed uint64
	HasMemory  bool
	// Energy is nvmlDeviceGetTotalEnergyConsumption of the GPU (a MIG
	// instance's parent) in millijoules; valid when HasEnergy.
	Energy    uint64
	HasEnergy bool
}

// ErrSampleVersion is a sample line of a version this reader does not know.
var ErrSampleVersion = errors.New("unknown sample line version")

// maxUUIDLen bounds a UUID in a sample line (NVML's are 40 bytes; MIG
// instance UUIDs 44); longer is not a UUID.
const maxUUIDLen = 96

// AppendText appends s as a line, "\n" included.
func (s Sample) AppendText(b []byte) []byte {
	b = append(b, sampleVersion...)
	for _, r := range s {
		b = append(b, ' ')
		b = append(b, r.UUID...)
		b = append(b, '=')
		if r.HasUtil {
			b = strconv.AppendUint(b, uint64(r.Util), 10)
		} else {
			b = append(b, '-')
		}
		b = append(b, '/')
		b = appendValue(b, r.MemoryUsed, r.HasMemory)
		b = append(b, '/')
		b = appendValue(b, r.Energy, r.HasEnergy)
	}
	return append(b, '\n')
}

func appendValue(b []byte, v uint64, ok bool) []byte {
	if !ok {
		return append(b, '-')
	}
	return strconv.AppendUint(b, v, 10)
}

// ParseSample reads one line, without its "\n". The error names the field
// and the rule it breaks.
func ParseSample(line string) (Sample, error) {
	version, rest, _ := strings.Cut(line, " ")
	if version != sampleVersion {
		if !strings.HasPrefix(version, "v") {
			return nil, fmt.Errorf("sample line does not start with %q", sampleVersion)
		}
		return nil, fmt.Errorf("%w %.16q", ErrSampleVersion, version)
	}
	if rest == "" {
		return nil, errors.New("sample line has no GPU")
	}
	fields := strings.Split(rest, " ")
	s := make(Sample, 0, len(fields))
	for i, f := range fields {
		r, err := parseReading(f)
		if err != nil {
			return nil, fmt.Errorf("sample line field %d: %w", i+1, err)
		}
		s = append(s, r)
	}
	return s, nil
}

func parseReading(f string) (Reading, error) {
	eq := strings.LastIndexByte(f, '=')
	if eq < 0 {
		return Reading{}, errors.New("no '=' between UUID and values")
	}
	r := Reading{UUID: f[:eq]}
	if err := checkUUID(r.UUID); err != nil {
		return Reading{}, err
	}
	values := strings.Split(f[eq+1:], "/")
	switch {
	case len(values) < 2:
		return Reading{}, errors.New("no '/' between utilisation and memory")
	case len(values) < 3:
		return Reading{}, errors.New("no '/' between memory and energy")
	}
	util, mem := values[0], values[1]
	if util != "-" {
		n, err := parseDecimal(util, 100)
		if err != nil {
			return Reading{}, fmt.Errorf("utilisation %.24q: %w", util, err)
		}
		r.Util, r.HasUtil = uint8(n), true
	}
	if mem != "-" {
		n, err := parseDecimal(mem, ^uint64(0))
		if err != nil {
			return Reading{}, fmt.Errorf("used memory %.24q: %w", mem, err)
		}
		r.MemoryUsed, r.HasMemory = n, true
	}
	if values[2] != "-" {
		n, err := parseDecimal(values[2], ^uint64(0))
		if err != nil {
			return Reading{}, fmt.Errorf("energy %.24q: %w", values[2], err)
		}
		r.Energy, r.HasEnergy = n, true
	}
	// Values after these are a newer probe's: ignored.
	return r, nil
}

// checkUUID accepts printable ASCII other than space, '=' and '/', as NVML's
// UUIDs ("GPU-" and hex digits and dashes) are; the reader matches them
// against the UUIDs it asked for.
func checkUUID(u string) error {
	if u == "" {
		return errors.New("empty UUID")
	}
	if len(u) > maxUUIDLen {
		return fmt.Errorf("UUID longer than %d bytes", maxUUIDLen)
	}
	for i := 0; i < len(u); i++ {
		if c := u[i]; c <= ' ' || c > '~' || c == '=' || c == '/' {
			return fmt.Errorf("UUID has byte %#02x at %d", c, i)
		}
	}
	return nil
}

// parseDecimal reads a plain decimal number no larger than max: digits
// only, no sign, no leading zero, so each value has exactly one spelling.
func parseDecimal(s string, max uint64) (uint64, error) {
	if s == "" {
		return 0, errors.New("empty number")
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, errors.New("leading zero")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("not a decimal number")
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n > max {
		return 0, fmt.Errorf("larger than %d", max)
	}
	return n, nil
}
