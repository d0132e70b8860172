-- Tasks as the entrypoint registers them, with their completion.
-- Times are Unix seconds. A label the task did not set is '' (never NULL),
-- so GROUP BY answers the same on both stores; numbers that may be absent
-- (duration_est, k8s_job_index, the completion's fields) are NULL when absent.
CREATE TABLE tasks (
    task_id          TEXT    PRIMARY KEY,
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
    completed_at     INTEGER
);
CREATE INDEX tasks_start_time ON tasks (start_time, task_id);
CREATE INDEX tasks_end_time ON tasks (end_time);
CREATE INDEX tasks_project_owner ON tasks (project, owner);
CREATE INDEX tasks_open ON tasks (start_time) WHERE end_time IS NULL;

-- One row per GPU a task registered, in the order of its gpus list, with
-- the completion's per-GPU summary and the end of its claim (one GPU runs
-- one task: a newer task on the same UUID ends an open task's claim).
CREATE TABLE task_gpus (
    task_id                TEXT    NOT NULL REFERENCES tasks (task_id),
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
    PRIMARY KEY (task_id, position)
);
CREATE INDEX task_gpus_uuid ON task_gpus (uuid) WHERE uuid <> '';

-- Completions that arrived before their registration. scope is the JSON of
-- the sending token's patterns ('' when unrestricted): the completion joins
-- the registration only if the registration falls within it.
CREATE TABLE pending_completions (
    task_id     TEXT    PRIMARY KEY,
    completion  TEXT    NOT NULL,
    scope       TEXT    NOT NULL DEFAULT '',
    received_at INTEGER NOT NULL
);
