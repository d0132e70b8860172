-- Finance's own tools (docs/cost.md, "For finance"): who closed and
-- reopened a month and why, and the FOCUS exports of each statement.
--
-- close_reason and reopen_reason are what --reason (or the API body's
-- "reason") said; closed_by and reopened_by already hold who.
ALTER TABLE statements ADD COLUMN close_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE statements ADD COLUMN reopen_reason TEXT NOT NULL DEFAULT '';
-- statement_exports: a closed month's FOCUS export, generated once when
-- the month closed (or at its first export, for months closed before this
-- table existed), with its SHA-256, so that every later export is the
-- same bytes. Never deleted, like the statements.
CREATE TABLE statement_exports (
    month   TEXT    NOT NULL,
    version BIGINT  NOT NULL,
    format  TEXT    NOT NULL,
    body    TEXT    NOT NULL,
    sha256  TEXT    NOT NULL,
    PRIMARY KEY (month, version, format)
);
