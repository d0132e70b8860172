package gpu

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// LibraryName is the NVML library the probe loads, as the NVIDIA container
// runtime mounts it into GPU containers.
const LibraryName = "libnvidia-ml.so.1"

// standardLibDirs are the directories the loader searches after
// LD_LIBRARY_PATH and its cache, on the architectures images are built for.
// Read only.
var standardLibDirs = []string{
	"/lib", "/usr/lib", "/lib64", "/usr/lib64",
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
}

// loaderCache is the loader's cache of library locations (ldconfig).
const loaderCache = "/etc/ld.so.cache"

// deviceNodes returns the /dev/nvidia<N> GPU device nodes under root, ordered
// by minor number (/dev/nvidiactl, /dev/nvidia-uvm and the like are not
// GPUs). A container sees only the nodes of the GPUs it was given.
func deviceNodes(root string) []string {
	dir := filepath.Join(root, "dev")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	type node struct {
		path  string
		minor int
	}
	var nodes []node
	for _, e := range entries {
		digits, ok := strings.CutPrefix(e.Name(), "nvidia")
		if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
			continue
		}
		n, err := strconv.Atoi(digits)
		if err != nil {
			continue
		}
		nodes = append(nodes, node{filepath.Join(dir, e.Name()), n})
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].minor < nodes[j].minor })
	paths := make([]string, len(nodes))
	for i, n := range nodes {
		paths[i] = n.path
	}
	return paths
}

// findLibrary returns where the loader would find LibraryName, or "" when it
// would not: the directories of LD_LIBRARY_PATH, then the loader cache (a
// mention of the name is enough), then the standard directories under root.
// It only looks; it loads nothing, so it costs a few system calls.
func findLibrary(root, ldLibraryPath string) string {
	for _, dir := range strings.FieldsFunc(ldLibraryPath, func(r rune) bool { return r == ':' || r == ';' }) {
		if p := filepath.Join(dir, LibraryName); exists(p) {
			return p
		}
	}
	cache := filepath.Join(root, loaderCache)
	if b, err := os.ReadFile(cache); err == nil && bytes.Contains(b, []byte(LibraryName)) {
		return cache
	}
	for _, dir := range standardLibDirs {
		if p := filepath.Join(root, dir, LibraryName); exists(p) {
			return p
		}
	}
	return ""
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
