package textfile

import "testing"

// BenchmarkWrite is what PADDLE_TEXTFILE_DIR adds to a start: rendering,
// the temporary file, fsync and rename (the directory's disk dominates).
func BenchmarkWrite(b *testing.B) {
	dir := b.TempDir()
	s, gpus := task()
	for b.Loop() {
		if _, err := Write(dir, s, gpus); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRender(b *testing.B) {
	s, gpus := task()
	for b.Loop() {
		if _, err := Render(s, gpus); err != nil {
			b.Fatal(err)
		}
	}
}
