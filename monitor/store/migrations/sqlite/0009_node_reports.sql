-- Node reports and the ledger (docs/node.md, docs/cost.md "The ledger").
--
-- tasks.slurm_job is the Slurm job a registration names (a Slurm user of a
-- node report is tied to the registration of its node with the same job);
-- '' when none. tasks_k8s_pod_uid serves the tie of a Kubernetes user by
-- pod UID, tasks_slurm_job that of a Slurm job.
ALTER TABLE tasks ADD COLUMN slurm_job TEXT NOT NULL DEFAULT '';
-- tasks.observed_at is the time of the latest node report in which users
-- were tied to the task: its idleness then follows the node reports (a
-- heartbeat no longer changes idle_since).
ALTER TABLE tasks ADD COLUMN observed_at INTEGER;
CREATE INDEX tasks_k8s_pod_uid ON tasks (k8s_pod_uid, start_time) WHERE k8s_pod_uid <> '';
CREATE INDEX tasks_slurm_job ON tasks (slurm_job, start_time) WHERE slurm_job <> '';
-- A registration made inside a Slurm job without slurm_job names the job
-- in pipeline_run (orchestrator slurm: SLURM_JOB_ID), as entrypoints
-- before slurm_job do: tasks_slurm_run serves that tie.
CREATE INDEX tasks_slurm_run ON tasks (pipeline_run, start_time) WHERE orchestrator = 'slurm' AND pipeline_run <> '';

-- node_reports: the raw reports, kept for --raw-retention. span_start and
-- span_end are the part of [time - interval_seconds, time) kept (a report
-- overlapping spans already covered is clipped; span_start = span_end when
-- nothing was left). body is the report as stored (re-encoded JSON).
CREATE TABLE node_reports (
    node             TEXT    NOT NULL,
    time             INTEGER  NOT NULL,
    interval_seconds INTEGER  NOT NULL,
    span_start       INTEGER  NOT NULL,
    span_end         INTEGER  NOT NULL,
    final            INTEGER  NOT NULL DEFAULT 0,
    body             TEXT    NOT NULL,
    received_at      INTEGER  NOT NULL,
    PRIMARY KEY (node, time)
);
CREATE INDEX node_reports_time ON node_reports (time);

-- nodes: each node's latest report (for /metrics and idleness), and its
-- retirement.
CREATE TABLE nodes (
    node       TEXT    PRIMARY KEY,
    last_time  INTEGER  NOT NULL,
    interval_seconds INTEGER NOT NULL,
    latest     TEXT    NOT NULL,
    retired_at INTEGER
);

-- node_gpus: the lives of each (node, GPU UUID): capacity counts from
-- first_start until the earliest of ended_at (a final report, node
-- retire), last_end + --node-retire, now and the window's end. A GPU
-- reported again after its life ended starts a new one.
CREATE TABLE node_gpus (
    node        TEXT    NOT NULL,
    uuid        TEXT    NOT NULL,
    first_start INTEGER  NOT NULL,
    last_end    INTEGER  NOT NULL,
    ended_at    INTEGER,
    model       TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (node, uuid, first_start)
);
CREATE INDEX node_gpus_uuid ON node_gpus (uuid, last_end) WHERE ended_at IS NULL;
CREATE INDEX node_gpus_open ON node_gpus (node, uuid) WHERE ended_at IS NULL;
CREATE INDEX node_gpus_end ON node_gpus (last_end);

-- node_gpu_hours: per GPU and hour, the seconds its node's reports
-- covered it (observed_s, weight 1), the weighted seconds no user held
-- (unallocated_s) and the GPU's energy.
CREATE TABLE node_gpu_hours (
    hour          INTEGER  NOT NULL,
    node          TEXT    NOT NULL,
    uuid          TEXT    NOT NULL,
    model         TEXT    NOT NULL DEFAULT '',
    observed_s    REAL    NOT NULL DEFAULT 0,
    unallocated_s REAL    NOT NULL DEFAULT 0,
    energy_j      REAL    NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, node, uuid)
);

-- node_user_hours: per GPU instance (gpu_instance_id -1: a whole GPU),
-- user and hour, the user's weighted seconds under both split rules
-- (equal_s, util_s), the busy part of each, the user's share of the
-- instance's energy, and the latest report time of the hour (the
-- registration a user is tied to is the latest that started by then).
-- user_key is the user's identity and declaration, joined.
CREATE TABLE node_user_hours (
    hour            INTEGER  NOT NULL,
    node            TEXT    NOT NULL,
    uuid            TEXT    NOT NULL,
    gpu_instance_id INTEGER  NOT NULL,
    user_key        TEXT    NOT NULL,
    model           TEXT    NOT NULL DEFAULT '',
    profile         TEXT    NOT NULL DEFAULT '',
    slices          INTEGER  NOT NULL DEFAULT 0,
    total_slices    INTEGER  NOT NULL DEFAULT 0,
    runtime         TEXT    NOT NULL DEFAULT '',
    container_id    TEXT    NOT NULL DEFAULT '',
    pod_uid         TEXT    NOT NULL DEFAULT '',
    namespace       TEXT    NOT NULL DEFAULT '',
    pod             TEXT    NOT NULL DEFAULT '',
    container       TEXT    NOT NULL DEFAULT '',
    slurm_job       TEXT    NOT NULL DEFAULT '',
    uid             INTEGER,
    cgroup          TEXT    NOT NULL DEFAULT '',
    declared        INTEGER  NOT NULL DEFAULT 0,
    declared_task_id TEXT   NOT NULL DEFAULT '',
    declared_project TEXT   NOT NULL DEFAULT '',
    declared_owner  TEXT    NOT NULL DEFAULT '',
    last_time       INTEGER  NOT NULL,
    equal_s         REAL    NOT NULL DEFAULT 0,
    util_s          REAL    NOT NULL DEFAULT 0,
    busy_equal_s    REAL    NOT NULL DEFAULT 0,
    busy_util_s     REAL    NOT NULL DEFAULT 0,
    energy_j        REAL    NOT NULL DEFAULT 0,
    PRIMARY KEY (hour, node, uuid, gpu_instance_id, user_key)
);
