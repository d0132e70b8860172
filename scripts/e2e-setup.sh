#!/usr/bin/env bash
# e2e-setup.sh: prepare a CI machine for `make e2e`. Idempotent: a second run
# installs nothing and builds nothing.
#
#  1. installs podman (with runc) and debootstrap from Debian's packages;
#  2. debootstraps a Debian 11 (bullseye, glibc 2.31) root file system, the
#     C library of the Ubuntu 20.04-based Paddle 2.6 images, with gcc and
#     libc6-dev so the GPU probe and the fake NVML library can be built
#     against that glibc;
#  3. imports that root, less its compiler, as the local stand-in base image
#     localhost/paddle-e2e-base:bullseye (nothing can be pulled here).
#
# If Debian's mirror no longer serves bullseye, the stand-in is made from the
# host's own shell and C library instead, and the glibc-2.31 tests skip,
# saying why (the symbol-version check still runs).
#
# Podman's storage driver: overlay where the kernel mounts it on /var/tmp
# (a container starts in a fraction of a second), else vfs (seconds: it
# copies the image for every container). PADDLE_E2E_STORAGE_DRIVER=vfs
# forces vfs. The choice is written to $STATE/storage-driver for the tests.
#
# Must run as root. Everything lives under /var/tmp/paddle-entrypoint-e2e,
# the podman storage that testdata/podman/storage-*.conf name.
set -euo pipefail
cd "$(dirname "$0")/.."

STATE=/var/tmp/paddle-entrypoint-e2e
ROOTFS=$STATE/bullseye
DONE=$ROOTFS/.paddle-e2e-complete
UNAVAILABLE=$STATE/bullseye.unavailable
BASE_IMAGE=localhost/paddle-e2e-base:bullseye

export CONTAINERS_CONF=$PWD/testdata/podman/containers.conf
export CONTAINERS_REGISTRIES_CONF=$PWD/testdata/podman/registries.conf
export DEBIAN_FRONTEND=noninteractive

say() { printf 'e2e-setup: %s\n' "$*" >&2; }
elapsed() { echo "$(($(date +%s) - $1))s"; }

if [ "$(id -u)" != 0 ]; then
	say "must run as root (podman as root, debootstrap, chroot)"
	exit 1
fi
mkdir -p "$STATE"

# 1. Packages. runc, not crun: crun fails on these hosts' cgroup layout.
t=$(date +%s)
need=()
for cmd in podman:podman runc:runc debootstrap:debootstrap unshare:util-linux; do
	command -v "${cmd%%:*}" >/dev/null || need+=("${cmd#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
	say "installing ${need[*]}"
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
	say "packages installed in $(elapsed "$t")"
fi

# podman copies an image only where the signature policy allows it; a
# machine without containers-common's policy gets one that accepts local
# images (nothing is ever pulled).
if [ ! -e /etc/containers/policy.json ]; then
	install -D -m 0644 testdata/podman/policy.json /etc/containers/policy.json
fi

# The storage driver.
overlay_works() {
	local d
	d=$(mktemp -d "$STATE/overlay-probe.XXXXXX")
	mkdir "$d"/{lower,upper,work,merged}
	if mount -t overlay overlay -o "lowerdir=$d/lower,upperdir=$d/upper,workdir=$d/work" "$d/merged" 2>/dev/null; then
		umount "$d/merged"
		rm -rf "$d"
		return 0
	fi
	rm -rf "$d"
	return 1
}
driver=${PADDLE_E2E_STORAGE_DRIVER:-}
if [ -z "$driver" ]; then
	driver=vfs
	if overlay_works; then driver=overlay; fi
fi
echo "$driver" >"$STATE/storage-driver"
export CONTAINERS_STORAGE_CONF=$PWD/testdata/podman/storage-$driver.conf
say "podman storage driver: $driver"

# 2. The glibc-2.31 root file system.
mirror() {
	# The mirror this machine's apt already uses (Debian packages are the one
	# thing these machines may download), else Debian's own.
	local uri
	uri=$(
		{
			grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}'
			grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}'
		} | grep -E '/debian/?$' | head -n1
	)
	echo "${uri:-http://deb.debian.org/debian}"
}

# A failed download is tried again an hour later, not never: a mirror's bad
# hour must not turn the glibc-2.31 tests off on this machine for good.
find "$UNAVAILABLE" -mmin +60 -delete 2>/dev/null || true
if [ ! -e "$DONE" ] && [ ! -e "$UNAVAILABLE" ]; then
	t=$(date +%s)
	rm -rf "$ROOTFS"
	m=$(mirror)
	say "debootstrap bullseye from $m"
	if debootstrap --variant=minbase --include=gcc,libc6-dev \
		bullseye "$ROOTFS" "$m" >"$STATE/debootstrap.log" 2>&1; then
		# Clean what only the installer needed; the apt lists and the .deb
		# cache would otherwise be copied into every test container.
		rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/lib/apt/lists/*
		touch "$DONE"
		say "debootstrap done in $(elapsed "$t")"
	else
		tail -n 20 "$STATE/debootstrap.log" >&2 || true
		rm -rf "$ROOTFS"
		echo "debootstrap of Debian 11 from $m failed on $(date -u +%FT%TZ); see $STATE/debootstrap.log" >"$UNAVAILABLE"
		say "$(cat "$UNAVAILABLE"): the glibc-2.31 tests will skip"
	fi
fi

# host_root DIR: a minimal root file system from the host's bash and
# coreutils and the libraries they load, when bullseye is unavailable.
host_root() {
	local dir=$1 f lib
	rm -rf "$dir"
	mkdir -p "$dir"/{bin,etc,proc,sys,dev,tmp,run,var,usr/local/bin}
	chmod 1777 "$dir/tmp"
	ln -s ../run "$dir/var/run"
	for f in bash sh cat ls id sleep env true false mkdir chmod chown grep readlink stat tr sed head; do
		f=$(type -P "$f")
		cp -L "$f" "$dir/bin/"
		for lib in $(ldd "$f" | grep -o '/[^ ]*'); do
			mkdir -p "$dir$(dirname "$lib")"
			cp -Ln "$lib" "$dir$lib"
		done
	done
	printf 'root:x:0:0:root:/root:/bin/bash\n' >"$dir/etc/passwd"
	printf 'root:x:0:\n' >"$dir/etc/group"
}

# 3. The stand-in base image.
if ! podman image exists "$BASE_IMAGE"; then
	t=$(date +%s)
	src=$ROOTFS
	if [ ! -e "$DONE" ]; then
		src=$STATE/hostroot
		host_root "$src"
	fi
	# Without the compiler, headers and documentation: every test container
	# copies the whole image (vfs), so it stays small.
	tar -C "$src" -c \
		--exclude=./.paddle-e2e-complete --exclude=./opt/e2e \
		--exclude=./usr/lib/gcc --exclude=./usr/libexec/gcc \
		--exclude=./usr/include --exclude=./usr/share/doc \
		--exclude=./usr/share/man --exclude=./usr/share/info \
		--exclude=./usr/share/locale --exclude='./usr/bin/x86_64-linux-gnu-*' \
		--exclude='./usr/lib/x86_64-linux-gnu/libbfd*' \
		--exclude='./usr/lib/x86_64-linux-gnu/libisl*' \
		. |
		podman import --change 'CMD ["/bin/bash"]' \
			--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			- "$BASE_IMAGE" >/dev/null
	say "stand-in base image $BASE_IMAGE from $src in $(elapsed "$t")"
fi
say "ready: $(podman --version), $(runc --version | head -n1)"
