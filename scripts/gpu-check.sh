#!/usr/bin/env bash
# gpu-check.sh: on a machine with NVIDIA GPUs, run what paddle-entrypoint
# runs against the real driver and print what each part saw, in well under
# five minutes (about 50 s with the defaults):
#
#  1. the driver's own view (nvidia-smi -L, MIG devices included), when
#     nvidia-smi is installed;
#  2. the GPU probe (paddle-gpu-probe): the JSON report of every GPU, the
#     MIG mode of each and its MIG devices;
#  3. `paddle-entrypoint labels`: the gpu_count and gpu_uuids a start would
#     write (CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES applied);
#  4. the probe's sampling mode on those GPUs for GPU_CHECK_SAMPLE_SECONDS:
#     each line (utilisation / used memory / energy counter per GPU or MIG
#     device), then per GPU the energy the counter rose by;
#  5. a supervised task (GPU_CHECK_COMMAND, default a sleep of
#     GPU_CHECK_TASK_SECONDS) with sampling every second and a monitor that
#     is not there, so the registration and the completion stay in a
#     throw-away spool: both bodies are printed as they would be sent;
#  6. the node agent (`paddle-node once`, when BIN_DIR has it) observing
#     the node for GPU_CHECK_SAMPLE_SECONDS, a sample a second: the report it
#     would send (every GPU and MIG instance, the users of each with their
#     owners and what their containers declared); it sends nothing.
#
# Usage: scripts/gpu-check.sh [BIN_DIR]     (default: bin/, from `make build`)
#
# Environment:
#   GPU_CHECK_SAMPLE_SECONDS  how long the sampling mode runs (default 10)
#   GPU_CHECK_TASK_SECONDS    how long the default task sleeps (default 20)
#   GPU_CHECK_COMMAND         the supervised command instead (run by sh -c),
#                             e.g. a short training step to see utilisation
#   GPU_CHECK_LIBRARY_PATH    a directory put first on LD_LIBRARY_PATH, so
#                             the probe loads that libnvidia-ml.so.1 (the
#                             tests point it at testdata/fakenvml)
#   PADDLE_GPU_SHARE, CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES and every
#   other PADDLE_* setting apply as in a container.
#
# Exit status: 0 when every step ran (whatever it found: a machine without
# GPUs prints a count of 0), 1 when a step failed, 2 on a usage error.
set -uo pipefail

BIN=${1:-"$(dirname "$0")/../bin"}
ENTRYPOINT=$BIN/paddle-entrypoint
PROBE=$BIN/paddle-gpu-probe
SAMPLE_SECONDS=${GPU_CHECK_SAMPLE_SECONDS:-10}
TASK_SECONDS=${GPU_CHECK_TASK_SECONDS:-20}

for f in "$ENTRYPOINT" "$PROBE"; do
	if [ ! -x "$f" ]; then
		echo "gpu-check: $f is missing: run 'make build' first, or give the directory holding paddle-entrypoint and paddle-gpu-probe" >&2
		exit 2
	fi
done
for n in "$SAMPLE_SECONDS" "$TASK_SECONDS"; do
	case $n in
	'' | *[!0-9]* | 0)
		echo "gpu-check: GPU_CHECK_SAMPLE_SECONDS and GPU_CHECK_TASK_SECONDS must be whole seconds, at least 1 (got '$n')" >&2
		exit 2
		;;
	esac
done
if [ -n "${GPU_CHECK_LIBRARY_PATH:-}" ]; then
	export LD_LIBRARY_PATH=$GPU_CHECK_LIBRARY_PATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
failed=0
step() { printf '\n== %s\n' "$*"; }
fail() {
	echo "gpu-check: $*" >&2
	failed=1
}
# pretty prints JSON lines readably where python3 is at hand.
pretty() {
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import json, sys
for line in sys.stdin:
    line = line.strip()
    if line:
        print(json.dumps(json.loads(line), indent=2, ensure_ascii=False))'
	else
		cat
	fi
}

# payload prints the payload of each spool entry (JSON lines): the object
# after "payload": up to the last "}" followed by a key, as the entry's
# later fields are all scalars.
payload() { sed -n 's/.*"payload":\({.*}\),"[a-z_]*":.*/\1/p'; }

step "driver"
echo "kernel $(uname -r), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi -L || fail "nvidia-smi -L failed"
	nvidia-smi --query-gpu=index,uuid,name,mig.mode.current,memory.total,power.draw --format=csv || true
else
	echo "nvidia-smi not installed"
fi

step "probe: $PROBE"
began=$(date +%s%N)
if "$PROBE" >"$WORK/probe.json" 2>"$WORK/probe.err"; then
	echo "answered in $((($(date +%s%N) - began) / 1000000)) ms"
	pretty <"$WORK/probe.json"
else
	fail "the probe failed (exit $?): $(cat "$WORK/probe.err")"
fi
[ -s "$WORK/probe.err" ] && sed 's/^/probe stderr: /' "$WORK/probe.err"

step "labels a start would write"
if PADDLE_LABELS_FILE="$WORK/labels" "$ENTRYPOINT" labels >"$WORK/labels.out" 2>"$WORK/labels.err"; then
	grep -E '^(gpu_count|gpu_uuids)=' "$WORK/labels.out" || echo "gpu_count=0"
else
	fail "paddle-entrypoint labels failed: $(cat "$WORK/labels.err")"
fi
grep -E 'level=(WARN|ERROR)' "$WORK/labels.err" || true
keys=$(sed -n 's/^gpu_uuids=//p' "$WORK/labels.out" | tr ',' ' ')

step "sampling for ${SAMPLE_SECONDS}s, every second"
if [ -z "$keys" ]; then
	echo "no GPU with a UUID: nothing to sample"
else
	# shellcheck disable=SC2086 # keys are UUIDs, one word each
	(sleep "$SAMPLE_SECONDS") | "$PROBE" sample --interval 1s -- $keys >"$WORK/samples" 2>"$WORK/samples.err"
	status=$?
	cat "$WORK/samples"
	[ -s "$WORK/samples.err" ] && sed 's/^/sampler stderr: /' "$WORK/samples.err"
	[ "$status" -eq 0 ] || fail "the sampling mode exited $status"
	echo "lines: $(wc -l <"$WORK/samples")"
	# Per key: the samples with utilisation, and the energy counter's rise
	# between the first and the last reading (the parent's, for MIG).
	awk '{
		for (i = 2; i <= NF; i++) {
			eq = index($i, "="); key = substr($i, 1, eq - 1)
			split(substr($i, eq + 1), v, "/")
			if (!(key in order)) { order[key] = ++n; names[n] = key }
			if (v[1] != "-") util[key]++
			if (v[3] != "-") { if (!(key in first)) first[key] = v[3]; last[key] = v[3] }
		}
	}
	END {
		for (k = 1; k <= n; k++) {
			key = names[k]
			e = (key in first) ? sprintf("%.3f J", (last[key] - first[key]) / 1000) : "not supported"
			if (key ~ /^MIG-/) e = e " (the parent GPU'"'"'s)"
			printf "%s: %d utilisation readings, energy %s\n", key, util[key], e
		}
	}' "$WORK/samples"
fi

step "supervised task, sampling every second"
cmd=${GPU_CHECK_COMMAND:-"sleep $TASK_SECONDS"}
echo "command: $cmd"
PADDLE_ENTRYPOINT_MODE=supervise PADDLE_GPU_SAMPLE=1s \
	PADDLE_MONITOR_URL=http://127.0.0.1:1 PADDLE_SPOOL_PATH="$WORK/spool.db" \
	PADDLE_LABELS_FILE="$WORK/task.labels" PADDLE_COMPLETE_BUDGET=2s PADDLE_ENTRYPOINT_LOG=info \
	"$ENTRYPOINT" /bin/sh -c "$cmd" 2>"$WORK/task.err"
status=$?
echo "exit status: $status"
grep -E 'level=(WARN|ERROR)' "$WORK/task.err" | grep -v 'registration\|completion\|monitor' || true
echo "-- labels file at the end:"
cat "$WORK/task.labels" 2>/dev/null || fail "no labels file"
echo "-- registration, as it would be sent:"
PADDLE_SPOOL_PATH="$WORK/spool.db" "$ENTRYPOINT" spool list 2>/dev/null | payload | pretty
echo "-- completion, as it would be sent:"
completion=$(PADDLE_SPOOL_PATH="$WORK/spool.db" "$ENTRYPOINT" spool list --completions 2>/dev/null |
	payload)
if [ -z "$completion" ]; then
	fail "no completion in the spool: $(tail -5 "$WORK/task.err")"
else
	echo "$completion" | pretty
fi

step "node agent: paddle-node once, ${SAMPLE_SECONDS}s"
NODE=$BIN/paddle-node
if [ ! -x "$NODE" ]; then
	echo "$NODE not built: skipped"
else
	PADDLE_NODE_PROBE=$PROBE "$NODE" once --interval "${SAMPLE_SECONDS}s" --sample 1s \
		--report-spool "$WORK/node.db" >"$WORK/node.json" 2>"$WORK/node.err"
	status=$?
	cat "$WORK/node.json"
	grep -E 'level=(WARN|ERROR)' "$WORK/node.err" || true
	[ "$status" -eq 0 ] || fail "paddle-node once exited $status: $(tail -5 "$WORK/node.err")"
fi

if [ "$failed" -ne 0 ]; then
	echo "gpu-check: a step failed (above)" >&2
	exit 1
fi
