-- Node identity (docs/node.md, "Identity and trust"; docs/security.md).
--
-- node_gpu_conflicts: a GPU UUID reported by a node while another node
-- holds it (an open life reported within --node-retire). The report is
-- stored, but that GPU's entries stay out of every state and capacity:
-- observed_s sums the seconds of the reports' kept spans, first_time and
-- last_time their times. `node retire` of either node resolves the
-- conflict (resolved_at): of the holder, the GPU moved and the conflicting
-- node's entries count from then on; of the conflicting node, they never
-- do.
CREATE TABLE node_gpu_conflicts (
    node        TEXT    NOT NULL,
    uuid        TEXT    NOT NULL,
    held_by     TEXT    NOT NULL,
    first_time  BIGINT  NOT NULL,
    last_time   BIGINT  NOT NULL,
    observed_s  DOUBLE PRECISION NOT NULL DEFAULT 0,
    resolved_at BIGINT,
    PRIMARY KEY (node, uuid, held_by)
);
CREATE INDEX node_gpu_conflicts_open ON node_gpu_conflicts (held_by) WHERE resolved_at IS NULL;

-- Case (NODE.md 12.4): node names are stored in lower case, GPU and MIG
-- UUIDs in NVML's form ("GPU-" or "MIG-" then lower-case hex). The case
-- twins of earlier monitors (one node reported as Gpu-Node-1 and
-- gpu-node-1, its GPU counted twice) merge into one: only the rows that
-- differ from their canonical form are read and rewritten, each table's
-- twins added into the canonical row.
INSERT INTO node_gpu_hours (hour, node, uuid, model, observed_s, unallocated_s, energy_j)
SELECT hour, lower(node),
    CASE WHEN upper(substr(uuid, 1, 4)) IN ('GPU-', 'MIG-') THEN upper(substr(uuid, 1, 4)) || lower(substr(uuid, 5)) ELSE uuid END,
    MAX(model), SUM(observed_s), SUM(unallocated_s), SUM(energy_j)
FROM node_gpu_hours
WHERE node <> lower(node) OR uuid <> CASE WHEN upper(substr(uuid, 1, 4)) IN ('GPU-', 'MIG-') THEN upper(substr(uuid, 1, 4)) || lower(substr(uuid, 5)) ELSE uuid END
GROUP BY hour, lower(node), CASE WHEN upper(substr(uuid, 1, 4)) IN ('GPU-', 'MIG-') THEN upper(substr(uuid, 1, 4)) || lower(substr(uuid, 5)) ELSE uuid END
ON CONFLICT (hour, node, uuid) DO UPDATE SET observed_s = node_gpu_hours.observed_s + excluded.observed_s,
    unallocated_s = node_gpu_hours.unallocated_s + excluded.unallocated_s, energy_j = node_gpu_hours.energy_j + excluded.energy_j;
DELETE FROM node_gpu_hours
WHERE node <> lower(node) OR uuid <> CASE WHEN upper(substr(uuid, 1, 4)) IN ('GPU-', 'MIG-') THEN upper(substr(uuid, 1, 4)) || lower(substr(uuid, 5)) ELSE uuid END;

INSERT INTO node_user_hours (hour, node, uuid, gpu_instance_id, user_key, model, profile, slices, total_slices, runtime, container_id,
    pod_uid, namespace, pod, container, slurm_job, uid, cgroup, declared, declared_task_id, declared_project, declared_owner, last_time,
    equal_s, util_s, busy_equal_s, busy_util_s, energy_j)
SELECT hour, lower(node),
    CASE WHEN upper(substr(uuid, 1, 4)) IN ('GPU-', 'MIG-') THEN upper(substr(uuid, 1, 4)) || lower(substr(uuid, 5)) ELSE uuid END,
    gpu_instance_id, user_key, MAX(model), MAX(profile), MAX(slices), MAX(total_slices), MAX(runtime), MAX(container_id), MAX(pod_uid),
    MAX(namespace), MAX(pod), MAX(container), MAX(slurm_job), MAX(uid), MAX(cgroup), MAX(declared), MAX(declared_task_id),
    MAX(declared_project), MAX(declared_owner), MAX(last_time), SUM(equal_s), SUM(util_s), SUM(busy_equal_s), SUM(busy_util_s), SUM(energy_j)
FROM node_user_hours
WHERE node <> lower(node) OR uuid <> CASE WHEN upper(substr(uuid, 1, 4)) IN ('GPU-', 'MIG-') THEN upper(substr(uuid, 1, 4)) || lower(substr(uuid, 5)) ELSE uuid END
GROUP BY hour, lower(node), CASE WHEN upper(substr(uuid, 1, 4)) IN ('GPU-', 'MIG-') THEN upper(substr(uuid, 1, 4)) || lower(substr(uuid, 5)) ELSE uuid END,
    gpu_instance_id, user_key
ON CONFLICT (hour, node, uuid, gpu_instance_id, user_key) DO UPDATE SET
    last_time = CASE WHEN node_user_hours.last_time < excluded.last_time THEN excluded.last_time ELSE node_user_hours.last_time END,
    equal_s = node_user_hours.equal_s + excluded.equal_s, util_s = node_user_hours.util_s + excluded.util_s,
    busy_equal_s = node_user_hours.busy_equal_s + excluded.busy_equal_s, busy_util_s = node_user_hours.busy_util_s + excluded.busy_util_s,
    energy_j = node_user_hours.energy_j + excluded.energy_j;
DELETE FROM node_user_hours
WHERE node <> lower(node) OR uuid <> CASE WHEN upper(substr(uuid, 1, 4)) IN ('GPU-', 'MIG-') THEN upper(substr(uuid, 1, 4)) || lower(substr(uuid, 5)) ELSE uuid END;

-- A GPU's lives: twins of one start merge (the later end; open if either
-- is); lives of other starts stay lives of the canonical GPU.
INSERT INTO node_gpus (node, uuid, first_start, last_end, ended_at, model)
SELECT lower(node),
    CASE WHEN upper(substr(uuid, 1, 4)) IN ('GPU-', 'MIG-') THEN upper(substr(uuid, 1, 4)) || lower(substr(uuid, 5)) ELSE uuid END,
    first_start, MAX(last_end), CASE WHEN COUNT(*) > COUNT(ended_at) THEN NULL ELSE MAX(ended_at) END, MAX(model)
FROM node_gpus
WHERE node <> lower(node) OR uuid <> CASE WHEN upper(substr(uuid, 1, 4)) IN ('GPU-', 'MIG-') THEN upper(substr(uuid, 1, 4)) || lower(substr(uuid, 5)) ELSE uuid END
GROUP BY lower(node), CASE WHEN upper(substr(uuid, 1, 4)) IN ('GPU-', 'MIG-') THEN upper(substr(uuid, 1, 4)) || lower(substr(uuid, 5)) ELSE uuid END, first_start
ON CONFLICT (node, uuid, first_start) DO UPDATE SET
    last_end = CASE WHEN node_gpus.last_end < excluded.last_end THEN excluded.last_end ELSE node_gpus.last_end END,
    ended_at = CASE WHEN node_gpus.ended_at IS NULL OR excluded.ended_at IS NULL THEN NULL
        WHEN node_gpus.ended_at < excluded.ended_at THEN excluded.ended_at ELSE node_gpus.ended_at END;
DELETE FROM node_gpus
WHERE node <> lower(node) OR uuid <> CASE WHEN upper(substr(uuid, 1, 4)) IN ('GPU-', 'MIG-') THEN upper(substr(uuid, 1, 4)) || lower(substr(uuid, 5)) ELSE uuid END;

-- Raw reports: a twin of a stored (node, time) is dropped (the first
-- kept, as for any report of a stored node and time).
INSERT INTO node_reports (node, time, interval_seconds, span_start, span_end, final, body, received_at)
SELECT lower(node), time, MIN(interval_seconds), MIN(span_start), MIN(span_end), MIN(final), MIN(body), MIN(received_at)
FROM node_reports WHERE node <> lower(node) GROUP BY lower(node), time
ON CONFLICT (node, time) DO NOTHING;
DELETE FROM node_reports WHERE node <> lower(node);

-- nodes: the twin with the latest report wins.
INSERT INTO nodes (node, last_time, interval_seconds, latest, retired_at)
SELECT lower(n.node), n.last_time, n.interval_seconds, n.latest, n.retired_at FROM nodes n
WHERE n.node <> lower(n.node) AND NOT EXISTS (SELECT 1 FROM nodes m WHERE lower(m.node) = lower(n.node) AND m.node <> n.node
    AND (m.last_time > n.last_time OR (m.last_time = n.last_time AND m.node < n.node)))
ON CONFLICT (node) DO UPDATE SET last_time = excluded.last_time, interval_seconds = excluded.interval_seconds,
    latest = excluded.latest, retired_at = excluded.retired_at WHERE nodes.last_time < excluded.last_time;
DELETE FROM nodes WHERE node <> lower(node);
