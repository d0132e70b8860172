-- The task facts a statement freezes (MONITOR.md 20.10; docs/cost.md,
-- "Closed months"), written by the close in the transaction that stores the
-- statement, from the same read the statement's reports are computed from:
-- every grouping of a closed month is summed from these rows, never
-- recomputed from tasks stored since.
--
-- One statement version's rows, in order (line): kind says what a row is —
-- 'month' the first (the statement froze its facts, tasks or none),
-- 'task' a task's sums without model, 'model' its sums under one model,
-- 'gpu' its GPU sums of one model and MIG profile (basis 'declared'); and
-- the node reports' observations of the month (basis 'observed'): 'obs'
-- (the month was covered), 'otask' an attributed task, followed by its
-- 'ocov' (the declared GPU sums of its covered part), 'ouse' (its
-- attributed use) and 'ounat' (its claim on unattributed use) rows, and
-- 'undecl' the use tied to no task, by namespace. The task's keys and
-- labels are those the report groups by. day is the UTC day the row's
-- figures start in (the month's first day: a row holds the whole month).
CREATE TABLE statement_task_facts (
    month            TEXT    NOT NULL,
    version          INTEGER NOT NULL,
    line             INTEGER NOT NULL,
    kind             TEXT    NOT NULL,
    task_key         INTEGER NOT NULL DEFAULT 0,
    day              INTEGER NOT NULL,
    model            TEXT    NOT NULL DEFAULT '',
    mig              INTEGER NOT NULL DEFAULT 0,
    profile          TEXT    NOT NULL DEFAULT '',
    basis            TEXT    NOT NULL DEFAULT '',
    task_id          TEXT    NOT NULL DEFAULT '',
    project          TEXT    NOT NULL DEFAULT '',
    owner            TEXT    NOT NULL DEFAULT '',
    priority         TEXT    NOT NULL DEFAULT '',
    env              TEXT    NOT NULL DEFAULT '',
    pipeline         TEXT    NOT NULL DEFAULT '',
    step             TEXT    NOT NULL DEFAULT '',
    task_name        TEXT    NOT NULL DEFAULT '',
    hostname         TEXT    NOT NULL DEFAULT '',
    node             TEXT    NOT NULL DEFAULT '',
    labels           TEXT    NOT NULL DEFAULT '{}',
    namespace        TEXT    NOT NULL DEFAULT '',
    use_node         TEXT    NOT NULL DEFAULT '',
    slices           INTEGER NOT NULL DEFAULT 0,
    total_slices     INTEGER NOT NULL DEFAULT 0,
    failed           INTEGER NOT NULL DEFAULT 0,
    counted_s        REAL NOT NULL DEFAULT 0,
    covered_s        REAL NOT NULL DEFAULT 0,
    covered_unlisted_s REAL NOT NULL DEFAULT 0,
    tasks            INTEGER NOT NULL DEFAULT 0,
    completed        INTEGER NOT NULL DEFAULT 0,
    failed_tasks     INTEGER NOT NULL DEFAULT 0,
    gate_failed      INTEGER NOT NULL DEFAULT 0,
    open_tasks       INTEGER NOT NULL DEFAULT 0,
    est_s            INTEGER NOT NULL DEFAULT 0,
    actual_s         REAL NOT NULL DEFAULT 0,
    queue_wait_s     INTEGER NOT NULL DEFAULT 0,
    queue_wait_tasks INTEGER NOT NULL DEFAULT 0,
    queue_wait_max   INTEGER NOT NULL DEFAULT 0,
    unlisted_gpu_s   INTEGER NOT NULL DEFAULT 0,
    failed_unlisted_gpu_s INTEGER NOT NULL DEFAULT 0,
    instance_s       INTEGER NOT NULL DEFAULT 0,
    gpu_s            REAL NOT NULL DEFAULT 0,
    failed_gpu_s     REAL NOT NULL DEFAULT 0,
    idle_gpu_s       REAL NOT NULL DEFAULT 0,
    idle_ok_gpu_s    REAL NOT NULL DEFAULT 0,
    util_weighted    REAL NOT NULL DEFAULT 0,
    util_s           REAL NOT NULL DEFAULT 0,
    busy_s           REAL NOT NULL DEFAULT 0,
    energy_j         REAL NOT NULL DEFAULT 0,
    energy_gpus      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (month, version, line)
);
