package drain

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// ownClient is a client whose token file holds tok.
func ownClient(t *testing.T, tok string) (*deliver.Client, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := deliver.NewClient(deliver.ClientConfig{URL: "http://127.0.0.1:1", TokenFile: file})
	if err != nil {
		t.Fatal(err)
	}
	return c, file
}

// An entry is sendable only with the token it was written for: the own
// token, one of the token directory, and entries without a known token
// only with --legacy.
func TestTokensSendable(t *testing.T) {
	own, _ := ownClient(t, "own-secret")
	other := deliver.Fingerprint("other-secret")
	dirTok := deliver.Fingerprint("dir-secret")
	tests := []struct {
		name   string
		fp     string
		legacy bool
		want   bool
	}{
		{"own token", deliver.Fingerprint("own-secret"), false, true},
		{"another token", other, false, false},
		{"another token, even with --legacy", other, true, false},
		{"token of the directory", dirTok, false, true},
		{"previous format (no fingerprint)", "", false, false},
		{"previous format with --legacy", "", true, true},
		{"written without a token, sent by a process with one", spool.FingerprintNone, false, false},
		{"token file was unusable", spool.FingerprintUnusable, false, false},
		{"token file was unusable, with --legacy", spool.FingerprintUnusable, true, true},
	}
	for _, tt := range tests {
		tk := newTokens(own)
		tk.legacy = tt.legacy
		tk.dir = map[string]*deliver.Client{dirTok: own.WithToken("dir-secret")}
		if got := tk.Sendable(tt.fp); got != tt.want {
			t.Errorf("%s: Sendable(%q) = %v, want %v", tt.name, tt.fp, got, tt.want)
		}
	}
}

// ClientFor sends a directory token's entries with that token, every other
// entry with the own client.
func TestTokensClientFor(t *testing.T) {
	own, _ := ownClient(t, "own-secret")
	dirTok := deliver.Fingerprint("dir-secret")
	tk := newTokens(own)
	tk.dir = map[string]*deliver.Client{dirTok: own.WithToken("dir-secret")}
	if got := tk.ClientFor(dirTok).Fingerprint(); got != dirTok {
		t.Errorf("ClientFor(dir token) sends %q, want %q", got, dirTok)
	}
	if got := tk.ClientFor(deliver.Fingerprint("nobody")); got != own {
		t.Errorf("ClientFor(unknown) is not the own client")
	}
}

// A rotated token file is seen once the fingerprint's TTL has passed, not
// before (the clock is the test's).
func TestTokensOwnFingerprintRotation(t *testing.T) {
	own, file := ownClient(t, "first")
	tk := newTokens(own)
	now := time.Unix(1_700_000_000, 0)
	tk.nowFn = func() time.Time { return now }
	if !tk.Sendable(deliver.Fingerprint("first")) {
		t.Fatal("own token not sendable")
	}
	os.WriteFile(file, []byte("second\n"), 0o600)
	if !tk.Sendable(deliver.Fingerprint("first")) || tk.Sendable(deliver.Fingerprint("second")) {
		t.Error("the fingerprint was read again within its TTL")
	}
	now = now.Add(ownTokenTTL + time.Millisecond)
	if tk.Sendable(deliver.Fingerprint("first")) || !tk.Sendable(deliver.Fingerprint("second")) {
		t.Error("the rotated token was not picked up after the TTL")
	}
}

// readTokenDir reads a Kubernetes Secret volume's layout: dot-files
// skipped, links followed, empty files, directories and FIFOs left out.
func TestReadTokenDir(t *testing.T) {
	own, _ := ownClient(t, "own-secret")
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_12_01_00_00_00.000000000")
	os.Mkdir(data, 0o755)
	os.WriteFile(filepath.Join(data, "vision"), []byte("vision-secret\n"), 0o600)
	os.WriteFile(filepath.Join(data, "search"), []byte("  search-secret  "), 0o600)
	os.Symlink(filepath.Base(data), filepath.Join(dir, "..data"))
	os.Symlink("..data/vision", filepath.Join(dir, "vision"))
	os.Symlink("..data/search", filepath.Join(dir, "search"))
	os.WriteFile(filepath.Join(dir, ".hidden"), []byte("hidden-secret"), 0o600)
	os.WriteFile(filepath.Join(dir, "empty"), []byte(" \n"), 0o600)
	os.Mkdir(filepath.Join(dir, "subdir"), 0o755)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readTokenDir(dir, own)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{deliver.Fingerprint("vision-secret"), deliver.Fingerprint("search-secret")}
	if len(got) != len(want) {
		t.Fatalf("%d tokens read, want %d: %v", len(got), len(want), got)
	}
	for _, fp := range want {
		if c := got[fp]; c == nil || c.Fingerprint() != fp {
			t.Errorf("token %s missing or paired with the wrong client", fp)
		}
	}
	if _, err := readTokenDir(filepath.Join(dir, "missing"), own); err == nil {
		t.Error("a missing directory read without error")
	}
}
