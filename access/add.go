package access

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// newFileMode is the mode of a tokens file Add creates: it holds no secret,
// but who may do what is the administrator's business alone.
const newFileMode = 0o600

// Add appends entry to the tokens file at path, creating the file (mode
// 0600) when it does not exist. The other entries are kept byte for byte;
// a file that does not load, or that already has an entry of the same name,
// is left untouched and is an error naming the file. The new file replaces
// the old one atomically (a serve reloading on SIGHUP reads the old or the
// new, never half of one), and concurrent Adds to one file are serialised
// by an flock(2) on path+".lock", so none is lost.
func Add(path string, entry *Token) error {
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return err
	}
	defer unlock()

	mode := fs.FileMode(newFileMode)
	var raw []json.RawMessage
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("tokens file: %w", err)
	default:
		set, err := Parse(b, path)
		if err != nil {
			return err
		}
		for _, t := range set.tokens {
			if t.Name == entry.Name {
				return fmt.Errorf("tokens file %s: a token named %q exists already (choose another name, or remove that entry first)", path, entry.Name)
			}
		}
		var f struct {
			Tokens []json.RawMessage `json:"tokens"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("tokens file %s: %w", path, err)
		}
		raw = f.Tokens
		if fi, err := os.Stat(path); err == nil {
			mode = fi.Mode().Perm()
		}
	}
	e, err := json.Marshal(entry)
	if err != nil {
		return err
	}
	raw = append(raw, e)

	var out bytes.Buffer
	out.WriteString("{\"tokens\": [\n")
	for i, r := range raw {
		out.WriteString("  ")
		out.Write(bytes.TrimSpace(r))
		if i < len(raw)-1 {
			out.WriteByte(',')
		}
		out.WriteByte('\n')
	}
	out.WriteString("]}\n")
	if _, err := Parse(out.Bytes(), path); err != nil {
		return fmt.Errorf("tokens file %s: the new content would not load: %w", path, err)
	}
	return replaceFile(path, out.Bytes(), mode)
}

// lockFile takes an exclusive flock on name, created if need be; the
// function returned releases it.
func lockFile(name string) (func(), error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, newFileMode)
	if err != nil {
		return nil, fmt.Errorf("tokens file lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("tokens file lock %s: %w", name, err)
	}
	return func() { f.Close() }, nil
}

// replaceFile writes b to a new file beside path and renames it over path,
// with both the file and the directory synced, so that a crash leaves the
// old file or the new one.
func replaceFile(path string, b []byte, mode fs.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("tokens file: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("tokens file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("tokens file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
