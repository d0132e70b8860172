package spool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// mode is how an operation opens the file.
type mode int

const (
	modeRead   mode = iota // read-only, shared lock; a missing file reads as empty
	modeModify             // read-write, exclusive lock; a missing file has nothing to modify
	modeCreate             // read-write, exclusive lock; the file (and its directory) is created
)

// errNoFile: the spool file does not exist (or is empty) and the operation
// does not create it.
var errNoFile = errors.New("spool: no file")

// maxTries bounds how often one operation starts over: after another
// process renamed the file under it, or after it renamed a corrupt file.
const maxTries = 4

// handle is an open spool file whose lock this process holds.
type handle struct {
	f    *os.File
	info os.FileInfo
}

// release unlocks and closes the file. The explicit unlock matters when
// bbolt panicked with the file mapped: a mapping keeps the open file, and
// with it the lock, alive after close.
func (h *handle) release() {
	_ = syscall.Flock(int(h.f.Fd()), syscall.LOCK_UN)
	h.f.Close()
}

// corruptError says why a file counts as corrupt.
type corruptError struct{ reason string }

func (e *corruptError) Error() string { return "corrupt spool file: " + e.reason }
func (e *corruptError) Unwrap() error { return ErrCorrupt }

func corrupt(format string, a ...any) error {
	return &corruptError{reason: fmt.Sprintf(format, a...)}
}

// isCorrupt reports whether err means the file's content is damaged, as
// opposed to the file being unreachable.
func isCorrupt(err error) bool {
	var ce *corruptError
	return errors.As(err, &ce) ||
		errors.Is(err, berrors.ErrInvalid) ||
		errors.Is(err, berrors.ErrChecksum) ||
		errors.Is(err, berrors.ErrVersionMismatch) ||
		errors.Is(err, berrors.ErrInvalidMapping)
}

func unavailable(err error) error {
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrLocked) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// do opens the spool file in mode m, runs fn on it and closes it. A corrupt
// file is renamed aside (its readable entries carried over) and fn runs on a
// fresh one. A file that is missing (or empty) and that m does not create
// is not an error: fn does not run. Errors wrap ErrLocked or ErrUnavailable.
func (s *Spool) do(ctx context.Context, m mode, fn func(*bolt.DB) error) error {
	deadline := time.Now().Add(s.opt.LockTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if IsAside(s.opt.Path) {
		// Renamed aside already: read by Salvaged only, never renamed again.
		return fmt.Errorf("%w: %s is a corrupt file renamed aside; its entries are read by salvage (spool list, spool flush)", ErrUnavailable, s.opt.Path)
	}
	var carry *salvage
	for try := 0; ; try++ {
		if try == maxTries {
			return fmt.Errorf("%w: %s kept changing under this process", ErrUnavailable, s.opt.Path)
		}
		om := m
		if carry != nil && !carry.empty() {
			om = modeCreate
		}
		h, err := s.acquire(ctx, deadline, om, carry.owner())
		if errors.Is(err, errNoFile) {
			return nil
		}
		if err != nil {
			return err
		}
		if h.info.Size() == 0 && om != modeCreate {
			h.f.Close()
			return nil
		}
		if h.info.Size() > 0 {
			if err := checkMeta(h.f, h.info.Size()); err != nil {
				if !isCorrupt(err) {
					h.f.Close()
					return unavailable(err)
				}
				h.f.Close()
				if carry, err = s.quarantine(ctx, deadline, h.info, err); err != nil {
					return err
				}
				continue
			}
		}
		db, err := openBolt(h, om, deadline)
		if err != nil {
			h.release() // bbolt closed it already unless it panicked
			if !isCorrupt(err) {
				return unavailable(err)
			}
			if carry, err = s.quarantine(ctx, deadline, h.info, err); err != nil {
				return err
			}
			continue
		}
		if carry != nil && !carry.empty() {
			s.restore(db, carry)
		}
		carry = nil
		err = guard(func() error { return fn(db) })
		if isCorrupt(err) {
			// A panic inside bbolt: its state is unknown (closing it could
			// wait on a lock it never released), so the file is closed
			// under it and its memory map left to the process's end.
			h.release()
			if carry, err = s.quarantine(ctx, deadline, h.info, err); err != nil {
				return err
			}
			continue
		}
		if cerr := db.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			return unavailable(err)
		}
		return nil
	}
}

// guard runs f, turning a panic or a memory fault (a truncated file's pages
// are not there to read) into a corruption error.
func guard(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = corrupt("bbolt panicked: %v", r)
		}
	}()
	return f()
}

// openBolt opens bbolt on the handle's file, which this process has locked
// already, so bbolt's own lock is granted at once; its timeout is set all
// the same, so that it could never wait forever.
func openBolt(h *handle, m mode, deadline time.Time) (db *bolt.DB, err error) {
	err = guard(func() error {
		var err error
		db, err = bolt.Open(h.f.Name(), 0o600, &bolt.Options{
			Timeout:  max(time.Until(deadline), 10*time.Millisecond),
			ReadOnly: m == modeRead,
			OpenFile: func(string, int, os.FileMode) (*os.File, error) { return h.f, nil },
		})
		return err
	})
	return db, err
}

// acquire opens the spool file and takes its lock: shared to read,
// exclusive to write. It starts over when the path no longer names the file
// it locked (another process renamed a corrupt file aside meanwhile).
func (s *Spool) acquire(ctx context.Context, deadline time.Time, m mode, owner *syscall.Stat_t) (*handle, error) {
	path := s.opt.Path
	flag, how := os.O_RDONLY, syscall.LOCK_SH
	if m != modeRead {
		flag, how = os.O_RDWR, syscall.LOCK_EX
	}
	// A missing file is not created by this open but by createFresh, whole.
	// A symbolic link is refused: in a world-writable directory another
	// user could plant one pointing at a file of ours. O_NONBLOCK: a FIFO
	// planted at the path must not hang the open (it is refused below).
	flag |= syscall.O_NOFOLLOW | syscall.O_NONBLOCK
	madeDir := false
	for {
		f, err := os.OpenFile(path, flag, 0o600)
		if errors.Is(err, os.ErrNotExist) {
			if m != modeCreate {
				return nil, errNoFile
			}
			if !madeDir {
				madeDir = true
				// MkdirAll creates only what is missing; an existing
				// directory keeps its mode (the image ships 1777).
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					return nil, unavailable(err)
				}
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("%w: %s kept vanishing under this process", ErrLocked, path)
			}
			if err := createFresh(path, owner, deadline); err != nil {
				return nil, unavailable(err)
			}
			continue
		}
		if err != nil {
			if errors.Is(err, syscall.ELOOP) {
				err = fmt.Errorf("%w: %s is a symbolic link", ErrUntrusted, path)
			}
			return nil, unavailable(err)
		}
		// Checked on the descriptor, before the lock is even asked for:
		// what the path names may change, what was opened does not.
		if err := trusted(f, path); err != nil {
			f.Close()
			return nil, unavailable(err)
		}
		if err := lock(ctx, f, how, deadline); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, unavailable(err)
		}
		now, err := os.Lstat(path)
		if err != nil || !os.SameFile(info, now) {
			f.Close()
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("%w: %s kept changing under this process", ErrLocked, path)
			}
			continue
		}
		if !info.Mode().IsRegular() {
			f.Close()
			return nil, fmt.Errorf("%w: %s is not a regular file", ErrUnavailable, path)
		}
		if m == modeCreate && owner != nil && info.Size() == 0 {
			// A fresh file that replaces a corrupt one gets the corrupt
			// one's owner, so that root draining every user's spool does
			// not take a spool away from its user.
			if err := f.Chown(int(owner.Uid), int(owner.Gid)); err != nil {
				f.Close()
				return nil, unavailable(err)
			}
		}
		return &handle{f: f, info: info}, nil
	}
}

// trusted checks the file opened at path: a regular file, owned by the user
// the spool belongs to (see ownerOK), and writable by nobody else. Otherwise
// anyone on the node who could write it could plant entries that this
// user's starts (or root's drainer) would send with their own token, and
// anyone who could read it would read this user's labels.
func trusted(f *os.File, path string) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file (%v)", ErrUntrusted, path, info.Mode().Type())
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if !ownerOK(int(st.Uid), path) {
		return fmt.Errorf("%w: %s is owned by uid %d, not by the user whose spool it is", ErrUntrusted, path, st.Uid)
	}
	if info.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%w: %s is writable by other users (mode %04o)", ErrUntrusted, path, info.Mode().Perm())
	}
	return nil
}

// ownerOK reports whether uid may own the spool file at path: this
// process's user; and for root (the node's drainer) also the <uid> of a
// spool-<uid>.db file, or of a .corrupt-* file renamed aside from one.
func ownerOK(uid int, path string) bool {
	euid := os.Geteuid()
	if uid == euid {
		return true
	}
	named, ok := FileUID(path)
	return euid == 0 && ok && uid == named
}

// FileUID returns the uid in a per-UID spool file's name, spool-<uid>.db
// (or a .corrupt-* file renamed aside from one).
func FileUID(path string) (int, bool) {
	name := filepath.Base(path)
	if i := strings.Index(name, ".db.corrupt-"); i >= 0 {
		name = name[:i+len(".db")]
	}
	digits, ok := strings.CutPrefix(name, "spool-")
	if digits, ok = strings.CutSuffix(digits, ".db"); !ok || digits == "" {
		return 0, false
	}
	uid, err := strconv.ParseUint(digits, 10, 31)
	if err != nil {
		return 0, false
	}
	return int(uid), true
}

// createFresh puts a new, initialised bbolt file at path: written under a
// temporary name, synced, then linked into place. A start that runs out of
// disk space half way leaves no half-written file at path that the next
// start would call corrupt. When another process put a file at path
// meanwhile, that one is kept. owner, when not nil, gets the file (root
// replacing a user's corrupt spool).
func createFresh(path string, owner *syscall.Stat_t, deadline time.Time) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".new-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	f.Close()
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{Timeout: max(time.Until(deadline), 10*time.Millisecond)})
	if err == nil {
		err = db.Update(func(tx *bolt.Tx) error { return createBuckets(tx, Registrations).err })
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil && owner != nil {
		err = os.Chown(tmp, int(owner.Uid), int(owner.Gid))
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	// link(2) never replaces: a file another process created first wins.
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	return nil
}

// lock takes a flock(2) lock on f, polling until deadline: bbolt's own
// lock is the same flock, so every version of the entrypoint (and bbolt's
// tools) exclude each other. A context cancelled (a signal) stops the wait.
func lock(ctx context.Context, f *os.File, how int, deadline time.Time) error {
	wait := time.Millisecond
	start := time.Now()
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return unavailable(fmt.Errorf("flock: %w", err))
		}
		if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w (waited %v)", ErrLocked, time.Since(start).Round(time.Millisecond))
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		wait = min(2*wait, 20*time.Millisecond)
	}
}
