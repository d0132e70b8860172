package gpu

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Select returns the task's GPUs from the probe's report: parents are the
// GPUs NVML enumerates, migs their MIG instances (each with its parent's
// Index) and migOn the indices of the GPUs whose MIG mode is on. A GPU with
// MIG mode on is never counted whole: the task's GPUs are its MIG
// instances instead (CUDA runs on MIG devices, never on the parent).
//
// With CUDA_VISIBLE_DEVICES set (cvdSet), its entries are taken in order,
// by Visible's rules: an index or a GPU UUID (or unique prefix) names a
// GPU, which counts whole, or, with MIG mode on, as its MIG instances; a
// "MIG-..." UUID (or unique prefix) names one MIG instance. The first entry
// that names nothing stops the list and is returned as a *VisibleError.
//
// Unset, every GPU counts: whole, or as its MIG instances. Where the MIG
// instances of a GPU count, the MIG UUIDs that NVIDIA_VISIBLE_DEVICES
// names (the NVIDIA container runtime's variable; its other entries are
// host indices and GPU UUIDs the container's NVML has already applied)
// restrict them, when it names any; those that NVML does not list are
// returned in missing.
func Select(parents, migs []Device, migOn map[int]bool, cvd string, cvdSet bool, nvidia string) (devices []Device, missing []string, err error) {
	named := migEntries(nvidia)
	for _, n := range named {
		if !slices.ContainsFunc(migs, func(m Device) bool { return m.MIG != nil && strings.EqualFold(m.MIG.UUID, n) }) {
			missing = append(missing, n)
		}
	}
	instances := func(parent int) []Device {
		var out []Device
		for _, m := range migs {
			if m.Index != parent || m.MIG == nil {
				continue
			}
			if len(named) == 0 {
				out = append(out, m)
				continue
			}
			for _, n := range named {
				if strings.EqualFold(n, m.MIG.UUID) {
					out = append(out, m)
					break
				}
			}
		}
		return out
	}
	var out []Device
	seen := map[string]bool{}
	add := func(ds ...Device) {
		for _, d := range ds {
			k := d.Key()
			if d.MIG == nil {
				k = "#" + strconv.Itoa(d.Index) + " " + d.UUID
			}
			if !seen[k] {
				seen[k] = true
				out = append(out, d)
			}
		}
	}
	expand := func(d Device) {
		if migOn[d.Index] {
			add(instances(d.Index)...)
		} else {
			add(d)
		}
	}
	if !cvdSet {
		for _, d := range parents {
			expand(d)
		}
		return out, missing, nil
	}
	if strings.TrimSpace(cvd) == "" {
		return nil, missing, nil
	}
	for pos, entry := range strings.Split(cvd, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "-1" {
			return out, missing, nil
		}
		if hasPrefixFold(entry, "MIG-") {
			m, reason := lookupMIG(migs, entry)
			if reason != "" {
				return out, missing, &VisibleError{Position: pos, Entry: entry, Reason: reason}
			}
			add(m)
			continue
		}
		i, reason := lookup(parents, entry)
		if reason != "" {
			return out, missing, &VisibleError{Position: pos, Entry: entry, Reason: reason}
		}
		expand(parents[i])
	}
	return out, missing, nil
}

// lookupMIG returns the one MIG instance whose MIG UUID starts with entry,
// or why there is none.
func lookupMIG(migs []Device, entry string) (Device, string) {
	found := -1
	for i, m := range migs {
		if m.MIG != nil && hasPrefixFold(m.MIG.UUID, entry) {
			if found >= 0 {
				return Device{}, "this MIG UUID prefix matches more than one MIG device"
			}
			found = i
		}
	}
	if found < 0 {
		if len(migs) == 0 {
			return Device{}, "no MIG device has this UUID (no GPU has MIG mode on)"
		}
		return Device{}, "no MIG device's UUID starts with this"
	}
	return migs[found], ""
}

// migEntries returns the MIG UUIDs an NVIDIA_VISIBLE_DEVICES value names.
func migEntries(value string) []string {
	var out []string
	for _, e := range strings.Split(value, ",") {
		if e = strings.TrimSpace(e); hasPrefixFold(e, "MIG-") {
			out = append(out, e)
		}
	}
	return out
}

// Profile is the GPU instance profile name as nvidia-smi and
// dcgm-exporter's GPU_I_PROFILE spell it: the GPU instance's slices, "g.",
// its memory in whole GB rounded up, "gb" ("1g.18gb" on an H200, "3g.40gb"
// on an A100 80GB, whose 3g instance NVML reports as 40192 MiB). memoryMB
// is NVML's memorySizeMB of the instance (MiB, as NVML means "MB").
func Profile(slices int, memoryMB uint64) string {
	return fmt.Sprintf("%dg.%dgb", slices, (memoryMB+1023)/1024)
}

// ShareOf is the fraction of the physical GPU that the entry stands for:
// slices / total_slices for a MIG instance (1 when NVML gave no slice
// counts), whole (PADDLE_GPU_SHARE) for a whole GPU.
func ShareOf(d Device, whole float64) float64 {
	if d.MIG != nil {
		if d.MIG.Slices <= 0 || d.MIG.TotalSlices <= 0 || d.MIG.Slices > d.MIG.TotalSlices {
			return 1
		}
		return float64(d.MIG.Slices) / float64(d.MIG.TotalSlices)
	}
	return whole
}
