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

// ReadAs names the file once, after what it is, and keeps the causes for
// errors.Is.
func TestReadAs(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	os.WriteFile(big, []byte("0123456789"), 0o600)
	absent := filepath.Join(dir, "absent")
	for _, c := range []struct {
		name    string
		wantErr error
		want    string
	}{
		{fifo, ErrNotRegular, "tokens file " + fifo + ": not a regular file: a named pipe"},
		{"/dev/zero", ErrNotRegular, "tokens file /dev/zero: not a regular file: a device"},
		{big, ErrTooLarge, "tokens file " + big + ": file too large: over 9 bytes"},
		{absent, os.ErrNotExist, "tokens file " + absent + ": no such file or directory"},
	} {
		_, err := ReadAs("tokens file", c.name, 9)
		if !errors.Is(err, c.wantErr) || err.Error() != c.want {
			t.Errorf("ReadAs(%s) = %v; want %q", c.name, err, c.want)
		}
	}
	if got, err := ReadAs("tokens file", big, 10); err != nil || string(got) != "0123456789" {
		t.Errorf("ReadAs(%s, 10) = %q, %v", big, got, err)
	}
}
