package access

import (
	"errors"
	"strings"
	"testing"
)

// TestNodeTokensParse: a tokens-file entry with "nodes" is a node token;
// it combines with nothing else, and names one node exactly: a glob is
// refused, naming the entry (NODE.md 12.10).
func TestNodeTokensParse(t *testing.T) {
	h := hash("n")
	for _, tc := range []struct {
		entry, err string
	}{
		{`{"name":"n","sha256":"` + h + `","nodes":["gpu-node-1"]}`, ""},
		{`{"name":"n","sha256":"` + h + `","nodes":["gpu-node-1"],"admin":true}`, "nodes does not combine"},
		{`{"name":"n","sha256":"` + h + `","nodes":["gpu-node-1"],"projects":["a"]}`, "nodes does not combine"},
		{`{"name":"n","sha256":"` + h + `","nodes":["gpu-node-1"],"owners":["a"]}`, "nodes does not combine"},
		{`{"name":"n","sha256":"` + h + `","nodes":["gpu-node-*"]}`, `tokens[0] (n): nodes: "gpu-node-*" is a glob`},
		{`{"name":"n","sha256":"` + h + `","nodes":["gpu-["]}`, `"gpu-[" is a glob`},
		{`{"name":"n","sha256":"` + h + `","nodes":["a","b"]}`, "exactly one node"},
		{`{"name":"n","sha256":"` + h + `","nodes":["gpu node"]}`, "not a node name"},
	} {
		_, err := Parse([]byte(`{"tokens":[`+tc.entry+`]}`), "tokens.json")
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.entry, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one saying %q", tc.entry, err, tc.err)
		}
	}
}

// TestMayReport: which token may send a report for which node name.
func TestMayReport(t *testing.T) {
	node := &Token{Name: "n", Nodes: []string{"gpu-node-17"}}
	team := &Token{Name: "t", Projects: []string{"*"}}
	admin := &Token{Name: "a", Admin: true}
	for _, tc := range []struct {
		tok  *Token
		node string
		want bool
	}{
		{node, "gpu-node-17", true},
		{node, "GPU-Node-17", true},
		{node, "gpu-node-1", false},
		{node, "gpu-node-*", false},
		{node, "cpu-node-1", false},
		{node, "", false},
		{team, "gpu-node-17", false},
		{admin, "anything", true},
	} {
		if got := tc.tok.MayReport(tc.node); got != tc.want {
			t.Errorf("%s.MayReport(%q) = %v, want %v", tc.tok.Name, tc.node, got, tc.want)
		}
	}
	// A node token reads and writes no task.
	if node.Scope().Allows("", "") || node.Scope().Allows("p", "o") {
		t.Error("a node token's scope allows a task")
	}
	if !node.IsNode() || team.IsNode() || admin.IsNode() {
		t.Error("IsNode is wrong")
	}
}

// TestMintNode: the entry carries only the node, in lower case (it loads
// back as a node token), and the secret is found by Lookup; a glob, no
// node or two are refused.
func TestMintNode(t *testing.T) {
	secret, entry, err := MintNode("nodes", []string{"GPU-1"})
	if err != nil {
		t.Fatal(err)
	}
	if entry.Admin || entry.Projects != nil || entry.Owners != nil || len(entry.Nodes) != 1 || entry.Nodes[0] != "gpu-1" {
		t.Fatalf("entry %+v", entry)
	}
	set, err := Parse([]byte(`{"tokens":[{"name":"nodes","sha256":"`+entry.SHA256+`","nodes":["gpu-1"]}]}`), "f")
	if err != nil {
		t.Fatal(err)
	}
	if tok := set.Lookup(secret); tok == nil || !tok.MayReport("gpu-1") {
		t.Fatalf("Lookup = %+v", tok)
	}
	for _, bad := range [][]string{nil, {""}, {"["}, {"gpu-*"}, {"a", "b"}} {
		if _, _, err := MintNode("n", bad); err == nil {
			t.Errorf("MintNode(%q) succeeded", bad)
		}
	}
	if _, _, err := MintNode("", []string{"a"}); err == nil || errors.Is(err, nil) {
		t.Error("MintNode with an empty name succeeded")
	}
}
