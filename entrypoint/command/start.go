package command

import (
	"errors"
	"syscall"
)

// StartError is the *Error for a command whose exec failed with err, as a
// shell reports it: 127 when the file (or its interpreter) is missing, 126
// otherwise.
func StartError(name string, err error) *Error {
	status := ExitNotExecutable
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
		status = ExitNotFound
	}
	return &Error{Name: name, Err: err, Status: status}
}
