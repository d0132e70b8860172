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

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/mountfile"
)

// newFileMode is the mode of a tokens file Add creates: it holds no secret,
// but who may do what is the administrator's business alone.
const newFileMode = 0o600

// Add appends entry to the tokens file at path, creating the file (mode
// 0600) when it does not exist. The other entries are kept byte for byte,
// and so are an existing file's owner, group and mode (a root-made file
// that a non-root monitor reads through its group stays readable to it); a
// file that does not load, or that already has an entry of the same name,
// is left untouched and is an error naming the file. The new file replaces
// the old one atomically (a serve reloading on SIGHUP reads the old or the
// new, never half of one), and concurrent Adds to one file are serialised
// by an flock(2) on path+".lock", which is opened without following a
// symbolic link, so none is lost.
func Add(path string, entry *Token) error {
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return err
	}
	defer unlock()

	keep := owner{mode: newFileMode, uid: -1, gid: -1}
	var raw []json.RawMessage
	b, err := mountfile.ReadAs("tokens file", path, mountfile.MaxMonitorFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
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
		if keep, err = ownerOf(path); err != nil {
			return err
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
	return replaceFile(path, out.Bytes(), keep)
}

// owner is what the new file keeps of the old one: mode, and the owner and
// group (-1: the creator's).
type owner struct {
	mode     fs.FileMode
	uid, gid int
}

// ownerOf is the mode, owner and group of the file at path.
func ownerOf(path string) (owner, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return owner{}, fmt.Errorf("tokens file: %w", err)
	}
	o := owner{mode: fi.Mode().Perm(), uid: -1, gid: -1}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		o.uid, o.gid = int(st.Uid), int(st.Gid)
	}
	return o, nil
}

// lockFile takes an exclusive flock on name, created if need be; the
// function returned releases it.
func lockFile(name string) (func(), error) {
	// O_NOFOLLOW: a link planted at the lock's name is refused, never
	// followed to a file elsewhere; O_NONBLOCK: a FIFO there cannot stall.
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, newFileMode)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("tokens file lock %s is a symbolic link: refused (remove it; the lock is a plain file)", name)
	}
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
func replaceFile(path string, b []byte, keep owner) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if keep.uid >= 0 || keep.gid >= 0 {
		// Owner and group first: chown clears the set-ID bits that chmod
		// then sets again.
		if err := tmp.Chown(keep.uid, keep.gid); err != nil {
			tmp.Close()
			return fmt.Errorf("tokens file %s: cannot keep its owner %d and group %d (run as root or as its owner): %w", path, keep.uid, keep.gid, err)
		}
	}
	if err := tmp.Chmod(keep.mode); err != nil {
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
