package labels

import (
	"strconv"
	"time"
)

// WriteEndFile rewrites the labels file at the command's end (supervise
// mode), as WriteFile does, with end_time (Unix seconds) and exit_code
// appended after every other key.
func WriteEndFile(path string, s *Set, end time.Time, exitCode int) error {
	data := s.Format()
	data = append(data, "end_time="+strconv.FormatInt(end.Unix(), 10)+"\n"...)
	data = append(data, "exit_code="+strconv.Itoa(exitCode)+"\n"...)
	return writeAtomic(path, data)
}
