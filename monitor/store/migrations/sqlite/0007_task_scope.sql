-- Teams sharing one monitor: a task is identified by its task_id within the
-- scope of the token that sends it, so one task_id may name several tasks
-- (of projects and owners no one token sees together, or seen together by
-- an admin). tasks gains a surrogate key (id) that task_gpus references;
-- (task_id, project, owner) stays unique. token is the name of the token
-- that registered the task ('' without a tokens file), for the bound on a
-- token's open tasks; seen_at is when the server last received the task's
-- registration or a heartbeat (its own clock, never the container's), for
-- --open-ttl and --claim-grace. A pending completion belongs to the scope
-- of the token that sent it: one per task_id and scope.
--
-- SQLite cannot change a primary key in place: the three tables are
-- rebuilt, keeping every column and index of migrations 0001 to 0006.
CREATE TABLE tasks_new (
    id               INTEGER PRIMARY KEY,
    task_id          TEXT    NOT NULL,
    task_name        TEXT    NOT NULL,
    project          TEXT    NOT NULL,
    owner            TEXT    NOT NULL,
    priority         TEXT    NOT NULL DEFAULT '',
    env              TEXT    NOT NULL DEFAULT '',
    pipeline         TEXT    NOT NULL DEFAULT '',
    pipeline_run     TEXT    NOT NULL DEFAULT '',
    step             TEXT    NOT NULL DEFAULT '',
    orchestrator     TEXT    NOT NULL DEFAULT '',
    k8s_namespace    TEXT    NOT NULL DEFAULT '',
    k8s_pod          TEXT    NOT NULL DEFAULT '',
    k8s_node         TEXT    NOT NULL DEFAULT '',
    k8s_pod_uid      TEXT    NOT NULL DEFAULT '',
    k8s_job_index    INTEGER,
    hostname         TEXT    NOT NULL DEFAULT '',
    start_time       INTEGER NOT NULL,
    gpu_count        INTEGER NOT NULL DEFAULT 0,
    duration_est     INTEGER,
    labels           TEXT    NOT NULL DEFAULT '{}',
    registration     TEXT    NOT NULL,
    registered_at    INTEGER NOT NULL,
    last_seen        INTEGER,
    end_time         INTEGER,
    duration_seconds REAL,
    exit_code        INTEGER,
    signal           TEXT    NOT NULL DEFAULT '',
    gate_passed      INTEGER,
    gate_expr        TEXT    NOT NULL DEFAULT '',
    gate_reason      TEXT    NOT NULL DEFAULT '',
    metrics          TEXT,
    completion       TEXT,
    completed_at     INTEGER,
    idle_since       INTEGER,
    gpus_seen        INTEGER,
    heartbeat_interval INTEGER,
    submit_time      INTEGER,
    token            TEXT    NOT NULL DEFAULT '',
    seen_at          INTEGER NOT NULL DEFAULT 0
);
INSERT INTO tasks_new (id, task_id, task_name, project, owner, priority, env, pipeline, pipeline_run, step,
    orchestrator, k8s_namespace, k8s_pod, k8s_node, k8s_pod_uid, k8s_job_index, hostname, start_time, gpu_count,
    duration_est, labels, registration, registered_at, last_seen, end_time, duration_seconds, exit_code, signal,
    gate_passed, gate_expr, gate_reason, metrics, completion, completed_at, idle_since, gpus_seen, heartbeat_interval,
    submit_time, token, seen_at)
SELECT rowid, task_id, task_name, project, owner, priority, env, pipeline, pipeline_run, step,
    orchestrator, k8s_namespace, k8s_pod, k8s_node, k8s_pod_uid, k8s_job_index, hostname, start_time, gpu_count,
    duration_est, labels, registration, registered_at, last_seen, end_time, duration_seconds, exit_code, signal,
    gate_passed, gate_expr, gate_reason, metrics, completion, completed_at, idle_since, gpus_seen, heartbeat_interval, submit_time, '',
    CASE WHEN last_seen > registered_at THEN last_seen ELSE registered_at END
FROM tasks;

CREATE TABLE task_gpus_new (
    task_key               INTEGER NOT NULL REFERENCES tasks_new (id),
    position               INTEGER NOT NULL,
    gpu_index              INTEGER NOT NULL,
    uuid                   TEXT    NOT NULL DEFAULT '',
    model                  TEXT    NOT NULL DEFAULT '',
    memory_total           INTEGER NOT NULL DEFAULT 0,
    samples                INTEGER,
    util_mean              REAL,
    util_p95               REAL,
    memory_used_peak_bytes INTEGER,
    idle_share             REAL,
    claim_ended            INTEGER,
    latest_samples         INTEGER,
    latest_util_mean       REAL,
    task_start             INTEGER NOT NULL DEFAULT 0,
    task_end               INTEGER,
    PRIMARY KEY (task_key, position)
);
INSERT INTO task_gpus_new (task_key, position, gpu_index, uuid, model, memory_total, samples, util_mean, util_p95,
    memory_used_peak_bytes, idle_share, claim_ended, latest_samples, latest_util_mean, task_start, task_end)
SELECT t.id, g.position, g.gpu_index, g.uuid, g.model, g.memory_total, g.samples, g.util_mean, g.util_p95,
    g.memory_used_peak_bytes, g.idle_share, g.claim_ended, g.latest_samples, g.latest_util_mean, g.task_start, g.task_end
FROM task_gpus g JOIN tasks_new t ON t.task_id = g.task_id;

DROP TABLE task_gpus;
DROP TABLE tasks;
-- Renaming rewrites task_gpus_new's reference to tasks_new.
ALTER TABLE tasks_new RENAME TO tasks;
ALTER TABLE task_gpus_new RENAME TO task_gpus;

CREATE UNIQUE INDEX tasks_identity ON tasks (task_id, project, owner);
CREATE INDEX tasks_start_time ON tasks (start_time, task_id);
CREATE INDEX tasks_end_time ON tasks (end_time);
CREATE INDEX tasks_project_owner ON tasks (project, owner);
CREATE INDEX tasks_open ON tasks (start_time) WHERE end_time IS NULL;
CREATE INDEX tasks_end_start ON tasks (end_time, start_time);
CREATE INDEX tasks_open_seen ON tasks (last_seen) WHERE end_time IS NULL;
CREATE INDEX tasks_open_idle ON tasks (idle_since) WHERE end_time IS NULL AND idle_since IS NOT NULL;
CREATE INDEX tasks_open_seen_at ON tasks (seen_at) WHERE end_time IS NULL;
CREATE INDEX tasks_open_token ON tasks (token, seen_at) WHERE end_time IS NULL;
CREATE INDEX task_gpus_uuid_start ON task_gpus (uuid, task_start) WHERE uuid <> '';
CREATE INDEX task_gpus_open_claims ON task_gpus (uuid, task_start)
    WHERE uuid <> '' AND claim_ended IS NULL AND task_end IS NULL;

CREATE TABLE pending_completions_new (
    task_id     TEXT    NOT NULL,
    completion  TEXT    NOT NULL,
    scope       TEXT    NOT NULL DEFAULT '',
    received_at INTEGER NOT NULL,
    token       TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (task_id, scope)
);
INSERT INTO pending_completions_new (task_id, completion, scope, received_at)
SELECT task_id, completion, scope, received_at FROM pending_completions;
DROP TABLE pending_completions;
ALTER TABLE pending_completions_new RENAME TO pending_completions;
CREATE INDEX pending_completions_token ON pending_completions (token);
