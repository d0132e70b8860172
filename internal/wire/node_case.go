package wire

import "strings"

// CanonicalUUID is a GPU or MIG UUID in NVML's form: "GPU-" or "MIG-"
// followed by lower-case hexadecimal (NODE.md 12.4: UUIDs compare
// case-insensitively, and are stored in this form). Other strings are
// returned unchanged. migrations/*/0013 applies the same rule in SQL.
func CanonicalUUID(u string) string {
	if len(u) < 4 {
		return u
	}
	switch p := strings.ToUpper(u[:4]); p {
	case "GPU-", "MIG-":
		return p + strings.ToLower(u[4:])
	}
	return u
}

// Canonicalize puts a decoded report in its stored form: the node name in
// lower case (RFC 1123 names are case-insensitive) and every UUID in
// NVML's form, so that one node or GPU is never counted as two.
func (r *NodeReport) Canonicalize() {
	r.Node = strings.ToLower(r.Node)
	for i := range r.GPUs {
		r.GPUs[i].UUID = CanonicalUUID(r.GPUs[i].UUID)
	}
	for i := range r.Instances {
		in := &r.Instances[i]
		in.UUID = CanonicalUUID(in.UUID)
		for j := range in.MIGUUIDs {
			in.MIGUUIDs[j] = CanonicalUUID(in.MIGUUIDs[j])
		}
	}
}
