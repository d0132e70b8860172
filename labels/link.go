package labels

import (
	"os"
	"path/filepath"
)

// maxLinks bounds how many symbolic links followLinks follows (a loop ends
// there; the write then fails on the link itself and says so).
const maxLinks = 8

// followLinks returns where path leads when it is a symbolic link (or a
// chain of them), even when the last target does not exist yet; path
// itself otherwise.
//
// Why: the image keeps /var/run (all of /run) root-owned; its default path
// /var/run/paddle-task.labels is a link to /dev/shm, which every runtime
// mounts writable by every user (docs/image.md). The file is written by a
// rename in the target's directory, so a link is never written through: a
// link planted in a sticky directory by another user cannot be replaced by
// this user's rename (the kernel refuses), and nothing is opened for
// writing outside the target's directory.
func followLinks(path string) string {
	for i := 0; i < maxLinks; i++ {
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			return path
		}
		dest, err := os.Readlink(path)
		if err != nil {
			return path
		}
		if !filepath.IsAbs(dest) {
			// Relative to the directory the link really is in: through
			// /var/run -> /run, "../dev/shm" is /dev/shm, not /var/dev/shm.
			dir, err := filepath.EvalSymlinks(filepath.Dir(path))
			if err != nil {
				return path
			}
			dest = filepath.Join(dir, dest)
		}
		path = dest
	}
	return path
}
