#!/bin/sh
# mkfixture.sh TREE PID UID CGROUP-LINE...: one fixture process of a proc
# tree (its cgroup file holds the lines given, its start time is 5000+PID).
set -e
tree=$1 pid=$2 uid=$3
shift 3
mkdir -p "$tree/$pid"
printf '%s\n' "$@" > "$tree/$pid/cgroup"
printf '%s (python3) S 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 %s 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n' "$pid" $((5000 + pid)) > "$tree/$pid/stat"
printf 'Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%s\nNgid:\t0\nPid:\t%s\nPPid:\t1\nTracerPid:\t0\nUid:\t%s\t%s\t%s\t%s\nGid:\t%s\t%s\t%s\t%s\n' "$pid" "$pid" "$uid" "$uid" "$uid" "$uid" "$uid" "$uid" "$uid" "$uid" > "$tree/$pid/status"
