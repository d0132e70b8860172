#!/usr/bin/env bash
# Builds kube-apiserver and kube-scheduler from the k8s.io/kubernetes module
# once and caches them: the one place the Kubernetes version is pinned
# (docs/kubernetes.md). Prints kube-apiserver's path (kube-scheduler is next
# to it); with --path, only prints where it is (or would be) and builds
# nothing (the tests find the binaries that way). The module zip has no
# staging/ directory, so in a copy of it the `=> ./staging/...` replace
# lines are dropped and the k8s.io staging modules pinned to the matching
# v0.x release.
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-v1.37.2}
STAGING_VERSION=v0.${K8S_VERSION#v1.}
CACHE=${PADDLE_K8S_CACHE:-/var/cache/paddle-entrypoint/kubernetes-$K8S_VERSION}
commands="kube-apiserver kube-scheduler"
bin=$CACHE/kube-apiserver
missing=()
for c in $commands; do
	[ -x "$CACHE/$c" ] || missing+=("$c")
done
if [ "${1:-}" = --path ] || [ ${#missing[@]} -eq 0 ]; then echo "$bin"; exit 0; fi
export PATH=$PATH:/usr/local/go/bin GOWORK=off
mkdir -p "$CACHE"
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
cd "$work/src"
# Drop the staging replaces; pin every k8s.io/* staging module they named.
staging=$(sed -n 's#^\t\(k8s.io/[^ ]*\) => ./staging/.*#\1#p' go.mod)
sed -i '/=> \.\/staging\//d' go.mod
for m in $staging; do
	go mod edit -require="$m@$STAGING_VERSION"
done
mkdir "$work/out"
pkgs=()
for c in "${missing[@]}"; do
	pkgs+=("./cmd/$c")
done
GOFLAGS=-mod=mod go build -trimpath -o "$work/out/" "${pkgs[@]}" >&2
# Into the cache directory first, then renamed: a reader never finds half
# a binary under the final name.
for c in "${missing[@]}"; do
	mv "$work/out/$c" "$CACHE/.$c.tmp"
	mv "$CACHE/.$c.tmp" "$CACHE/$c"
done
echo "$bin"
