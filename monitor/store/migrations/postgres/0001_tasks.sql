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
    k8s_job_index    BIGINT,
    hostname         TEXT    NOT NULL DEFAULT '',
    start_time       BIGINT  NOT NULL,
    gpu_count        BIGINT  NOT NULL DEFAULT 0,
    duration_est     BIGINT ,
    labels           TEXT    NOT NULL DEFAULT '{}',
    registration     TEXT    NOT NULL,
    registered_at    BIGINT  NOT NULL,
    last_seen        BIGINT ,
    end_time         BIGINT ,
    duration_seconds DOUBLE PRECISION,
    exit_code        BIGINT ,
    signal           TEXT    NOT NULL DEFAULT '',
    gate_passed      BIGINT ,
    gate_expr        TEXT    NOT NULL DEFAULT '',
    gate_reason      TEXT    NOT NULL DEFAULT '',
    metrics          TEXT,
    completion       TEXT,
    completed_at     BIGINT 
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
    position               BIGINT  NOT NULL,
    gpu_index              BIGINT  NOT NULL,
    uuid                   TEXT    NOT NULL DEFAULT '',
    model                  TEXT    NOT NULL DEFAULT '',
    memory_total           BIGINT  NOT NULL DEFAULT 0,
    samples                BIGINT ,
    util_mean              DOUBLE PRECISION,
    util_p95               DOUBLE PRECISION,
    memory_used_peak_bytes BIGINT ,
    idle_share             DOUBLE PRECISION,
    claim_ended            BIGINT ,
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
    received_at BIGINT  NOT NULL
);
