-- A year of data: closed months, late data, retention (docs/monitor.md,
-- "Operating it for a year").
--
-- statements: one row per version of a closed month's statement. body is
-- the statement's canonical JSON and sha256 its hash (hex); by_project and
-- by_project_owner are its two reports as the report serves them (JSON),
-- so that serving one reads neither the other nor the body; a version in
-- force has reopened_at NULL, a reopened one keeps its row and body for
-- ever. task_cut is the largest tasks.id the statement (or a later one
-- that took its late data in) had seen: a task with a larger id was
-- registered later. Statements are never deleted, by retention or
-- anything else.
CREATE TABLE statements (
    month       TEXT    NOT NULL,
    version     BIGINT  NOT NULL,
    closed_at   BIGINT  NOT NULL,
    closed_by   TEXT    NOT NULL DEFAULT '',
    reopened_at BIGINT ,
    reopened_by TEXT    NOT NULL DEFAULT '',
    task_cut    BIGINT  NOT NULL,
    body        TEXT    NOT NULL,
    sha256      TEXT    NOT NULL,
    by_project       TEXT NOT NULL,
    by_project_owner TEXT NOT NULL,
    PRIMARY KEY (month, version)
);
-- The tasks whose part of a closed month could still change when it was
-- closed (or when its late data last went into a statement): open tasks
-- that started before the month's end and were not yet seen past it, with
-- the last_seen they had then. A completion or a heartbeat of one of them
-- is late data of that month.
CREATE TABLE statement_open (
    month     TEXT    NOT NULL,
    task_key  BIGINT  NOT NULL,
    last_seen BIGINT ,
    PRIMARY KEY (month, task_key)
);
-- Late registrations: a task registered after a month was closed and that
-- started before its end was registered at least (closed_at - month end)
-- after its start; tasks normally register within seconds of their start,
-- so this range of the index holds the spooled few.
CREATE INDEX tasks_registration_lag ON tasks ((registered_at - start_time));
-- What retention deleted: tasks whose counted end was before trimmed_before
-- are gone; reports over those days are served from statements only.
CREATE TABLE retention (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    trimmed_before BIGINT  NOT NULL,
    tasks_deleted  BIGINT  NOT NULL DEFAULT 0
);
