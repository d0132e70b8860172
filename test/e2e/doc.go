// Package e2e tests paddle-entrypoint where its users meet it: as the
// ENTRYPOINT of the image built from Dockerfile.paddle, run by a container
// runtime (podman with runc), as root and as uid 1000, on a read-only root,
// with a monitor on the host; and inside a Debian 11 root file system, whose
// glibc 2.31 is that of the Ubuntu 20.04-based Paddle 2.6 images.
//
// The tests need root, podman and a machine prepared by
// scripts/e2e-setup.sh, so they are built only with the e2e tag:
//
//	make e2e    # scripts/e2e-setup.sh, then go test -tags e2e ./e2e/
//
// Without the tag this package is empty and `go test ./...` skips it.
package e2e
