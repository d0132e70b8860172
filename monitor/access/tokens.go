package access

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/mountfile"
)

// Token is one entry of the tokens file.
type Token struct {
	Name     string   `json:"name"`
	SHA256   string   `json:"sha256"`
	Projects []string `json:"projects,omitempty"`
	Owners   []string `json:"owners,omitempty"`
	Admin    bool     `json:"admin,omitempty"`
	// Nodes makes a node token: it may send node reports for the one
	// node it names (compared in lower case) and nothing else (docs/node.md,
	// "Identity and trust"). A glob is refused: a token shared by many
	// nodes lets root on any of them report as all the others (NODE.md 11).
	Nodes []string `json:"nodes,omitempty"`
	// Role "viewer" makes a read-only token (docs/monitor.md, "Teams"):
	// it reads what its globs cover (none: every project, finance) and
	// writes nothing. "" is a writing token.
	Role string `json:"role,omitempty"`

	hash []byte
}

// RoleViewer is the role of a read-only token.
const RoleViewer = "viewer"

// IsViewer reports whether t is a read-only token: every write it sends
// is refused (403) before its body is read.
func (t *Token) IsViewer() bool { return t.Role == RoleViewer }

// ReadsAll reports whether t reads every project: an admin token, or a
// viewer without globs (finance's login).
func (t *Token) ReadsAll() bool {
	return t.Admin || (t.IsViewer() && len(t.Projects) == 0 && len(t.Owners) == 0)
}

// IsNode reports whether t is a node token.
func (t *Token) IsNode() bool { return len(t.Nodes) > 0 }

// MayReport reports whether t may send a node report for node: an admin
// token for any node, a node token for its node, a team token for none.
func (t *Token) MayReport(node string) bool {
	if t.Admin {
		return true
	}
	return len(t.Nodes) == 1 && node != "" && strings.EqualFold(t.Nodes[0], node)
}

// checkNodeName is the problem of a node token's node name: one exact
// RFC 1123 name, no glob (NODE.md 12.10).
func checkNodeName(n string) error {
	if n == "" {
		return errors.New("the node name is empty")
	}
	if strings.ContainsAny(n, "*?[]\\") {
		return fmt.Errorf("%q is a glob: a node token names one node exactly (a token shared by many nodes lets root on any of them report as all; on Kubernetes use --kube-tokenreview)", n)
	}
	for _, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return fmt.Errorf("%q is not a node name (RFC 1123: letters, digits, '-' and '.')", n)
		}
	}
	return nil
}

// Scope is what the token may write and read; nil for an admin (everything).
func (t *Token) Scope() *Scope {
	if t.ReadsAll() {
		return nil
	}
	if t.IsViewer() && len(t.Projects) == 0 {
		return &Scope{Projects: []string{"*"}, Owners: t.Owners} // --owner alone: those owners in every project
	}
	if t.IsNode() {
		return &Scope{Projects: []string{}} // no task at all
	}
	return &Scope{Projects: t.Projects, Owners: t.Owners}
}

// Set is a loaded tokens file.
type Set struct {
	tokens []*Token
}

type file struct {
	Tokens []*Token `json:"tokens"`
}

// Load reads and checks a tokens file: a regular file of at most
// mountfile.MaxMonitorFile bytes, opened without blocking (a FIFO or a
// device is refused). Every problem names the file and the entry.
func Load(path string) (*Set, error) {
	b, err := mountfile.ReadAs("tokens file", path, mountfile.MaxMonitorFile)
	if err != nil {
		return nil, err
	}
	return Parse(b, path)
}

// Parse checks the content of a tokens file named name.
func Parse(b []byte, name string) (*Set, error) {
	var f file
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return nil, fmt.Errorf("tokens file %s: not the expected JSON ({\"tokens\": [...]}): %w", name, err)
	}
	seen := map[string]bool{}
	for i, t := range f.Tokens {
		where := fmt.Sprintf("tokens file %s: tokens[%d]", name, i)
		if t == nil {
			return nil, fmt.Errorf("%s: null entry", where)
		}
		if t.Name == "" {
			return nil, fmt.Errorf("%s: name is empty", where)
		}
		where += fmt.Sprintf(" (%s)", t.Name)
		if seen[t.Name] {
			return nil, fmt.Errorf("%s: name used twice", where)
		}
		seen[t.Name] = true
		h, err := hex.DecodeString(t.SHA256)
		if err != nil || len(h) != sha256.Size {
			return nil, fmt.Errorf("%s: sha256 must be 64 hexadecimal digits (the SHA-256 of the token, never the token)", where)
		}
		t.hash = h
		if t.IsNode() && (t.Admin || len(t.Projects) > 0 || len(t.Owners) > 0) {
			return nil, fmt.Errorf("%s: nodes does not combine with projects, owners or admin (a node token sends node reports only)", where)
		}
		switch t.Role {
		case "":
		case RoleViewer:
			if t.Admin || t.IsNode() {
				return nil, fmt.Errorf("%s: role viewer does not combine with admin or nodes (a viewer reads and writes nothing)", where)
			}
		default:
			return nil, fmt.Errorf("%s: role %q: the only role is \"viewer\" (a read-only token)", where, t.Role)
		}
		if !t.Admin && !t.IsNode() && !t.IsViewer() && len(t.Projects) == 0 {
			return nil, fmt.Errorf("%s: projects is empty and admin is not set (the token could do nothing)", where)
		}
		for _, p := range append(append([]string{}, t.Projects...), t.Owners...) {
			if !ValidPattern(p) {
				return nil, fmt.Errorf("%s: %q is not a valid glob pattern", where, p)
			}
		}
		if t.IsNode() && len(t.Nodes) != 1 {
			return nil, fmt.Errorf("%s: nodes must name exactly one node, got %d (one token per node)", where, len(t.Nodes))
		}
		for _, n := range t.Nodes {
			if err := checkNodeName(n); err != nil {
				return nil, fmt.Errorf("%s: nodes: %w", where, err)
			}
		}
	}
	return &Set{tokens: f.Tokens}, nil
}

// Lookup returns the token whose SHA-256 is the secret's, or nil. Every
// entry is compared, in constant time, whatever matches: the time taken
// tells nothing about the secret or which token it is close to.
func (s *Set) Lookup(secret string) *Token {
	if secret == "" {
		return nil
	}
	sum := sha256.Sum256([]byte(secret))
	var found *Token
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.hash) == 1 {
			found = t
		}
	}
	return found
}

// Len is the number of tokens.
func (s *Set) Len() int { return len(s.tokens) }

// Mint makes a new random token and its tokens-file entry (the secret is
// not in the entry, only its SHA-256).
func Mint(name string, projects, owners []string, admin bool) (secret string, entry *Token, err error) {
	if name == "" {
		return "", nil, errors.New("token: the name is empty")
	}
	if admin && (len(projects) > 0 || len(owners) > 0) {
		return "", nil, errors.New("token: --admin takes no --project or --owner (an admin token may write and read every project)")
	}
	if !admin && len(projects) == 0 {
		return "", nil, errors.New("token: --project is required (or --admin)")
	}
	for _, p := range append(append([]string{}, projects...), owners...) {
		if !ValidPattern(p) {
			return "", nil, fmt.Errorf("token: %q is not a valid glob pattern", p)
		}
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, fmt.Errorf("token: %w", err)
	}
	secret = "pdm_" + hex.EncodeToString(b)
	sum := sha256.Sum256([]byte(secret))
	return secret, &Token{Name: name, SHA256: hex.EncodeToString(sum[:]), Projects: projects, Owners: owners, Admin: admin}, nil
}

// MintViewer makes a read-only token: it reads the projects and owners its
// globs cover (none: every project) and writes nothing.
func MintViewer(name string, projects, owners []string) (secret string, entry *Token, err error) {
	for _, p := range append(append([]string{}, projects...), owners...) {
		if p == "" || !ValidPattern(p) {
			return "", nil, fmt.Errorf("token: %q is not a valid glob pattern", p)
		}
	}
	secret, entry, err = Mint(name, nil, nil, true)
	if err != nil {
		return "", nil, err
	}
	entry.Admin, entry.Role, entry.Projects, entry.Owners = false, RoleViewer, projects, owners
	return secret, entry, nil
}

// MintNode makes a node token for the one node named (docs/node.md,
// "Identity and trust"): its entry carries only "nodes", in lower case.
func MintNode(name string, nodes []string) (secret string, entry *Token, err error) {
	if len(nodes) != 1 {
		return "", nil, fmt.Errorf("token: --node names exactly one node, got %d (one token per node)", len(nodes))
	}
	if err := checkNodeName(nodes[0]); err != nil {
		return "", nil, fmt.Errorf("token: --node %w", err)
	}
	nodes = []string{strings.ToLower(nodes[0])}
	secret, entry, err = Mint(name, nil, nil, true)
	if err != nil {
		return "", nil, err
	}
	entry.Admin, entry.Nodes = false, nodes
	return secret, entry, nil
}
