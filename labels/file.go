package labels

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// FileMode is the labels file's permission: readable by node agents of any
// user, since it holds no secret.
const FileMode = 0o644

// maxLinks bounds the symbolic links one write follows, as the kernel's
// own limit (40) does: a loop ends there with an error.
const maxLinks = 40

// ErrUntrustedLink: the way to the labels file goes through a symbolic link
// that someone other than this process's user, or the owner of the
// directory holding the link, could have planted. Nothing is written.
var ErrUntrustedLink = errors.New("symbolic link not followed")

// WriteFile writes s to path atomically: a temporary file in the same
// directory, fsynced, then renamed into place, so a scanner sees either the
// old file or the whole new one. No temporary file is left behind on error.
//
// The labels file lives in directories every user of a node may write
// (/dev/shm, /tmp), and the entrypoint often runs as root, so the way to
// it is walked one name at a time, each opened without following links
// (openat2 with RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH where the kernel has
// it, openat with O_NOFOLLOW elsewhere), and a symbolic link is followed
// only where the kernel's fs.protected_symlinks rule would follow it,
// whether or not that sysctl is on: in a directory others may write, only
// a link owned by the directory's owner or by this process's user. A link
// another user planted somewhere it is followed (in a directory of their
// own) leads only to a directory that user may write themselves. Nothing
// is ever opened for writing through a link: the new file is created with
// O_EXCL|O_NOFOLLOW next to the final name and renamed over it, which
// replaces whatever is there (a link planted in a race included) and never
// changes the file another name points to. So a file of another user is
// never changed, whatever links, races or renames are tried.
func WriteFile(path string, s *Set) error {
	return writeAtomic(path, s.Format())
}

// writeAtomic writes data to path as WriteFile describes.
func writeAtomic(path string, data []byte) error {
	dir, name, err := resolve(path, &walk{euid: os.Geteuid(), openat2: true})
	if err != nil {
		return fmt.Errorf("labels file %s: %w", path, err)
	}
	defer unix.Close(dir)
	tmp, fd, err := createTemp(dir, name)
	if err != nil {
		return fmt.Errorf("labels file %s: directory not writable: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	err = writeSync(f, data)
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, name)
	}
	if err != nil {
		unix.Unlinkat(dir, tmp, 0)
		return fmt.Errorf("labels file %s: %w", path, err)
	}
	// The rename is durable only once the directory is synced; a failure
	// here costs durability across a power loss, not correctness.
	if d, err := unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		unix.Fsync(d)
		unix.Close(d)
	}
	return nil
}

// createTemp creates a fresh temporary file beside name in dir, never
// through a link (O_EXCL|O_NOFOLLOW: a name someone planted is an error,
// and another name is tried).
func createTemp(dir int, name string) (string, int, error) {
	var err error
	for range 10 {
		var b [8]byte
		rand.Read(b[:])
		tmp := "." + name + ".tmp-" + hex.EncodeToString(b[:])
		var fd int
		fd, err = unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, FileMode)
		if err == nil {
			return tmp, fd, nil
		}
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	return "", -1, err
}

func writeSync(f *os.File, data []byte) error {
	_, err := f.Write(data)
	if err == nil {
		err = f.Chmod(FileMode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// walk is one resolution of a path, name by name.
type walk struct {
	euid  int
	links int
	// planters are the users other than this process's user and root
	// whose links were followed: the file must end up in a directory each
	// of them may write (else their link would let this process write
	// where they cannot).
	planters []uint32
	openat2  bool // the kernel has openat2 (until it says ENOSYS)
}

// resolve walks path and returns a descriptor of the directory the file is
// to be renamed into, and its name there. Trusted links are followed, on
// the way and at the final name.
func resolve(path string, w *walk) (dir int, name string, err error) {
	start := "."
	if strings.HasPrefix(path, "/") {
		start = "/"
	}
	dir, err = unix.Open(start, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", err
	}
	rest := split(path)
	for {
		if len(rest) == 0 {
			unix.Close(dir)
			return -1, "", fmt.Errorf("%q names no file", path)
		}
		c := rest[0]
		rest = rest[1:]
		last := len(rest) == 0
		if c == ".." {
			if last {
				unix.Close(dir)
				return -1, "", fmt.Errorf("%q names no file", path)
			}
			next, err := unix.Openat(dir, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			unix.Close(dir)
			if err != nil {
				return -1, "", err
			}
			dir = next
			continue
		}
		fd, err := w.open(dir, c)
		if last && errors.Is(err, unix.ENOENT) {
			return w.final(dir, c)
		}
		if err != nil {
			unix.Close(dir)
			return -1, "", err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			unix.Close(dir)
			return -1, "", err
		}
		switch {
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			target, err := w.follow(dir, fd, c, &st)
			unix.Close(fd)
			if err != nil {
				unix.Close(dir)
				return -1, "", err
			}
			if strings.HasPrefix(target, "/") {
				unix.Close(dir)
				if dir, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
					return -1, "", err
				}
			}
			rest = append(split(target), rest...)
		case last:
			unix.Close(fd)
			return w.final(dir, c)
		case st.Mode&unix.S_IFMT == unix.S_IFDIR:
			unix.Close(dir)
			dir = fd
		default:
			unix.Close(fd)
			unix.Close(dir)
			return -1, "", fmt.Errorf("%s: %w", c, unix.ENOTDIR)
		}
	}
}

// open opens one name in dir without following a link: a link at the name
// is opened itself (O_PATH|O_NOFOLLOW), to be judged by follow.
func (w *walk) open(dir int, name string) (int, error) {
	if w.openat2 {
		fd, err := unix.Openat2(dir, name, &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
		})
		if !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EPERM) {
			return fd, err
		}
		w.openat2 = false // an old kernel, or a seccomp filter without it
	}
	return unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
}

// follow decides whether the link opened as fd (its stat st), found under
// name in dir, may be followed, and returns its target. The link's owner
// and target are read from the link's own descriptor, so a link swapped
// for another in between is never judged by the first one's owner.
func (w *walk) follow(dir, fd int, name string, st *unix.Stat_t) (string, error) {
	if w.links++; w.links > maxLinks {
		return "", fmt.Errorf("%s: %w", name, unix.ELOOP)
	}
	var ds unix.Stat_t
	if err := unix.Fstat(dir, &ds); err != nil {
		return "", err
	}
	if !trustedLink(&ds, st, w.euid) {
		return "", fmt.Errorf("%w: %s is owned by uid %d, in a directory others may write (mode %04o, owner uid %d); only links of the directory's owner or of uid %d are followed there (the fs.protected_symlinks rule)",
			ErrUntrustedLink, name, st.Uid, ds.Mode&0o7777, ds.Uid, w.euid)
	}
	if st.Uid != uint32(w.euid) && st.Uid != 0 {
		w.planters = append(w.planters, st.Uid)
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "", fmt.Errorf("%s: empty link", name)
	}
	return string(buf[:n]), nil
}

// trustedLink is the fs.protected_symlinks rule, applied to every
// directory that others than its owner may write (sticky or not: in one
// that is not sticky, anyone could have planted any link): a link there is
// followed only when its owner is the directory's owner or the follower.
func trustedLink(dir, link *unix.Stat_t, euid int) bool {
	if dir.Mode&0o022 == 0 {
		return true
	}
	return link.Uid == dir.Uid || link.Uid == uint32(euid)
}

// final checks the directory the file is to be renamed into, and returns
// it with the name. A link some other user planted on the way leads only
// to a directory that user may write, and only to a name they could
// replace themselves.
func (w *walk) final(dir int, name string) (int, string, error) {
	if name == "." || name == "" {
		unix.Close(dir)
		return -1, "", errors.New("names no file")
	}
	if len(w.planters) > 0 {
		var ds unix.Stat_t
		if err := unix.Fstat(dir, &ds); err != nil {
			unix.Close(dir)
			return -1, "", err
		}
		var fs unix.Stat_t
		exists := unix.Fstatat(dir, name, &fs, unix.AT_SYMLINK_NOFOLLOW) == nil
		for _, uid := range w.planters {
			mayWrite := ds.Mode&0o002 != 0 || ds.Uid == uid && ds.Mode&0o200 != 0
			mayReplace := !exists || ds.Mode&unix.S_ISVTX == 0 || fs.Uid == uid || ds.Uid == uid
			if !mayWrite || !mayReplace {
				unix.Close(dir)
				return -1, "", fmt.Errorf("%w: a link of uid %d leads to %s in a directory uid %d may not write (owner uid %d, mode %04o)", ErrUntrustedLink, uid, name, uid, ds.Uid, ds.Mode&0o7777)
			}
		}
	}
	return dir, name, nil
}

// split returns a path's names, empty ones and "." left out.
func split(path string) []string {
	var out []string
	for _, c := range strings.Split(path, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}
