package labels

import (
	"fmt"
	"os"
	"path/filepath"
)

// FileMode is the labels file's permission: readable by node agents of any
// user, since it holds no secret.
const FileMode = 0o644

// WriteFile writes s to path atomically: a temporary file in the same
// directory, fsynced, then renamed into place, so a scanner sees either the
// old file or the whole new one. No temporary file is left behind on error.
// A symbolic link at path is followed (link.go): the file is written where
// it points, and the link stays.
func WriteFile(path string, s *Set) error {
	return writeAtomic(path, s.Format())
}

// writeAtomic writes data to path as WriteFile describes.
func writeAtomic(path string, data []byte) error {
	target := followLinks(path)
	dir := filepath.Dir(target)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".tmp-*")
	if err != nil {
		return fmt.Errorf("labels file %s: directory not writable: %w", path, err)
	}
	name := tmp.Name()
	err = writeSync(tmp, data)
	if err == nil {
		err = os.Rename(name, target)
	}
	if err != nil {
		os.Remove(name)
		return fmt.Errorf("labels file %s: %w", path, err)
	}
	// The rename is durable only once the directory is synced; a failure
	// here costs durability across a power loss, not correctness.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
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
