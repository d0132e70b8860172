// Package mountfile reads the small files an administrator gives a
// program: those mounted into a container for the entrypoint (the label
// policy, the monitor's bearer token, its CA bundle) and those the monitor
// is told to read (its tokens, prices, budgets and namespace-projects
// files, MaxMonitorFile at most).
//
// Guarantees: Read never blocks on what the path names (it opens with
// O_NONBLOCK, so a FIFO cannot stall a start, and reads only regular files,
// so /dev/zero cannot fill the memory), and never reads more than its
// bound plus one byte. Errors wrap ErrNotRegular or ErrTooLarge, or the
// file system's own error.
package mountfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// Errors, for errors.Is.
var (
	// ErrNotRegular: the path names a directory, device, socket or pipe.
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file is over the bound given to Read.
	ErrTooLarge = errors.New("file too large")
)

// MaxMonitorFile bounds each file paddle-monitor reads (docs/monitor.md):
// far above any real tokens, prices, budgets or namespace-projects file,
// far below what would strain the monitor's memory.
const MaxMonitorFile = 16 << 20

// Read returns the content of the regular file name, of at most max bytes.
func Read(name string, max int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s", ErrNotRegular, fileType(st.Mode()))
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%w: over %d bytes", ErrTooLarge, max)
	}
	return data, nil
}

// ReadAs is Read for a file that errors call what (such as "tokens
// file"): every error reads "WHAT NAME: PROBLEM", the file named once, and
// still matches ErrNotRegular, ErrTooLarge or the file system's error
// (fs.ErrNotExist, fs.ErrPermission) with errors.Is.
func ReadAs(what, name string, max int64) ([]byte, error) {
	data, err := Read(name, max)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the name is said once, below
		}
		return nil, fmt.Errorf("%s %s: %w", what, name, err)
	}
	return data, nil
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a plain file"
}
