package drain

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
	"github.com/paddle-entrypoint/paddle-entrypoint/internal/mountfile"
	"github.com/paddle-entrypoint/paddle-entrypoint/spool"
)

// ownTokenTTL is how long the fingerprint of the process's own token is
// kept before the token file is read again (a rotated projected token is
// picked up by the next pass).
const ownTokenTTL = time.Second

// maxTokenFile bounds a token file of a --token-dir.
const maxTokenFile = 16 << 10

// tokens are the tokens a process may send spooled entries with: its own
// (PADDLE_MONITOR_TOKEN_FILE), a drainer's --token-dir, and with --legacy
// the own one for entries of the previous format too. An entry is sent
// only with the token it was written for (its fingerprint), never with
// another, more powerful one.
type tokens struct {
	own    *deliver.Client
	legacy bool
	watch  bool                       // a drainer's --watch: entries others hold are left to them
	dir    map[string]*deliver.Client // fingerprint -> a client sending that token

	mu    sync.Mutex
	fp    string
	fpAt  time.Time
	nowFn func() time.Time
}

func newTokens(own *deliver.Client) *tokens {
	return &tokens{own: own, nowFn: time.Now}
}

// ownFingerprint is the fingerprint of the token the own client sends now.
func (t *tokens) ownFingerprint() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now := t.nowFn(); t.fp == "" || now.Sub(t.fpAt) > ownTokenTTL {
		t.fp, t.fpAt = t.own.Fingerprint(), now
	}
	return t.fp
}

// Sendable is the spool's Options.Sendable. Entries of the previous
// format, and those written when the token file could not be read (whose
// token nobody knows), are the operator's: spool flush --legacy sends them
// with the token it was given.
func (t *tokens) Sendable(fp string) bool {
	switch {
	case fp == "" || fp == spool.FingerprintUnusable:
		return t.legacy
	case t.dir[fp] != nil:
		return true
	}
	return fp == t.ownFingerprint()
}

// ClientFor is the Registrar's: the client that sends fp's token.
func (t *tokens) ClientFor(fp string) *deliver.Client {
	if c := t.dir[fp]; c != nil {
		return c
	}
	return t.own
}

// readTokenDir reads a drainer's token directory: one token per file,
// dot-files skipped (a Kubernetes Secret volume keeps its data in
// ..data and ..<timestamp>), links followed (its visible names are links
// into ..data), anything but a regular file left out. Every token is
// paired with a client like own that sends it.
func readTokenDir(dir string, own *deliver.Client) (map[string]*deliver.Client, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("token directory (--token-dir, PADDLE_SPOOL_TOKEN_DIR) %s: %w", dir, err)
	}
	out := map[string]*deliver.Client{}
	for _, de := range ents {
		if strings.HasPrefix(de.Name(), ".") {
			continue
		}
		raw, err := mountfile.Read(filepath.Join(dir, de.Name()), maxTokenFile)
		if err != nil {
			continue // a directory, a FIFO, an unreadable file: not a token
		}
		tok := strings.TrimSpace(string(raw))
		if tok == "" {
			continue
		}
		out[deliver.Fingerprint(tok)] = own.WithToken(tok)
	}
	return out, nil
}

// OwnToken returns the spool's Sendable and the delivery engine's
// ClientFor for a sender that holds only its own token (a start, a
// supervisor, a spool command other than flush --token-dir): it sends the
// entries written for the token own sends now, and no other.
func OwnToken(own *deliver.Client) (sendable func(fp string) bool, clientFor func(fp string) *deliver.Client) {
	t := newTokens(own)
	return t.Sendable, t.ClientFor
}
