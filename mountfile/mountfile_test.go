package mountfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "small")
	os.WriteFile(small, []byte("0123456789"), 0o600)
	for _, c := range []struct {
		name    string
		max     int64
		want    string
		wantErr error
		kind    string
	}{
		{small, 10, "0123456789", nil, ""},
		{small, 9, "", ErrTooLarge, "over 9 bytes"},
		{fifo, 10, "", ErrNotRegular, "named pipe"},
		{"/dev/zero", 10, "", ErrNotRegular, "a device"},
		{dir, 10, "", ErrNotRegular, "a directory"},
		{filepath.Join(dir, "absent"), 10, "", os.ErrNotExist, ""},
	} {
		got, err := Read(c.name, c.max)
		if string(got) != c.want || c.wantErr == nil && err != nil || c.wantErr != nil && !errors.Is(err, c.wantErr) {
			t.Errorf("Read(%s, %d) = %q, %v", c.name, c.max, got, err)
		}
		if c.kind != "" && (err == nil || !strings.Contains(err.Error(), c.kind)) {
			t.Errorf("Read(%s): error %v does not say %q", c.name, err, c.kind)
		}
	}
}
