package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// VisibleError is an entry of CUDA_VISIBLE_DEVICES that names no device.
// Like CUDA, Visible ignores it and every entry after it.
type VisibleError struct {
	Position int    // 0-based position of the entry in the list
	Entry    string // the entry, trimmed
	Reason   string
}

func (e *VisibleError) Error() string {
	return fmt.Sprintf("CUDA_VISIBLE_DEVICES entry %d %q: %s; it and the entries after it are ignored, as CUDA ignores them",
		e.Position, e.Entry, e.Reason)
}

// Visible returns the devices that CUDA_VISIBLE_DEVICES=value makes visible,
// in the order CUDA numbers them (the first is the training's cuda:0). Each
// Device keeps its NVML index.
//
// The rules are CUDA's: entries are separated by commas, with surrounding
// whitespace ignored; an entry is a device index, or a UUID ("GPU-...") or a
// prefix of one that matches exactly one device; a device named twice counts
// once; an empty value or "-1" makes no device visible. CUDA stops at the
// first entry that names no device, so the devices named before it are
// returned together with a *VisibleError describing it; "-1" stops the list
// without an error, since that is how users hide devices on purpose.
//
// The caller handles an unset variable, which makes every device visible.
func Visible(devices []Device, value string) ([]Device, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var out []Device
	seen := make([]bool, len(devices))
	for pos, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "-1" {
			return out, nil
		}
		i, reason := lookup(devices, entry)
		if reason != "" {
			return out, &VisibleError{Position: pos, Entry: entry, Reason: reason}
		}
		if !seen[i] {
			seen[i] = true
			out = append(out, devices[i])
		}
	}
	return out, nil
}

// lookup returns the position in devices of the one device entry names, or
// why it names none. MIG instances are Select's: here a MIG UUID names none.
func lookup(devices []Device, entry string) (int, string) {
	if isUUIDEntry(entry) {
		if hasPrefixFold(entry, "MIG-") {
			return 0, "no MIG device has this UUID (no GPU has MIG mode on)"
		}
		found := -1
		for i, d := range devices {
			if d.UUID != "" && hasPrefixFold(d.UUID, entry) {
				if found >= 0 {
					return 0, "this UUID prefix matches more than one device"
				}
				found = i
			}
		}
		if found < 0 {
			return 0, "no device's UUID starts with this"
		}
		return found, ""
	}
	if entry == "" || strings.Trim(entry, "0123456789") != "" {
		return 0, "not a device index or a GPU UUID"
	}
	n, err := strconv.ParseUint(entry, 10, 31)
	if err != nil || int(n) >= len(devices) {
		return 0, fmt.Sprintf("no device has this index (%d visible to NVML)", len(devices))
	}
	return int(n), ""
}

// isUUIDEntry reports whether a CUDA_VISIBLE_DEVICES entry is a UUID (or
// UUID prefix) rather than an index.
func isUUIDEntry(entry string) bool {
	return hasPrefixFold(entry, "GPU-") || hasPrefixFold(entry, "MIG-")
}

// mentionsUUID reports whether value names any device by UUID.
func mentionsUUID(value string) bool {
	for _, entry := range strings.Split(value, ",") {
		if isUUIDEntry(strings.TrimSpace(entry)) {
			return true
		}
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
