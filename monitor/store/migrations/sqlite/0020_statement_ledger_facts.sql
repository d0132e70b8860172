-- The ledger facts a statement freezes (MONITOR.md 17 invariant 3, 20.10;
-- docs/cost.md, "Closed months"), written by the close in the transaction
-- that stores the statement, computed with the close's inputs (prices,
-- namespace mapping, split rule, --node-retire): the closed month's ledger
-- by every --by and scope is grouped from these rows, never recomputed
-- from node reports stored since.
--
-- One statement version's rows, in order (line): kind 'month' the first
-- (the statement froze its ledger, node reports or none; split, currency
-- and priced are the ledger's), then 'part' rows: the GPU-hours of one
-- state on one (node, GPU, instance) for one (project, owner, namespace),
-- with their cost at the close's prices (unpriced: a part had no price);
-- an unobserved row carries its GPU's capacity (capacity_gpu_hours). day
-- is the UTC day the row's figures start in (the month's first day: a
-- row holds the whole month).
CREATE TABLE statement_ledger_facts (
    month              TEXT    NOT NULL,
    version            INTEGER NOT NULL,
    line               INTEGER NOT NULL,
    kind               TEXT    NOT NULL,
    day                INTEGER NOT NULL,
    node               TEXT    NOT NULL DEFAULT '',
    uuid               TEXT    NOT NULL DEFAULT '',
    gpu_instance       INTEGER NOT NULL DEFAULT -1,
    model              TEXT    NOT NULL DEFAULT '',
    state              TEXT    NOT NULL DEFAULT '',
    project            TEXT    NOT NULL DEFAULT '',
    owner              TEXT    NOT NULL DEFAULT '',
    namespace          TEXT    NOT NULL DEFAULT '',
    gpu_hours          REAL    NOT NULL DEFAULT 0,
    cost               REAL    NOT NULL DEFAULT 0,
    unpriced           INTEGER NOT NULL DEFAULT 0,
    capacity_gpu_hours REAL    NOT NULL DEFAULT 0,
    split              TEXT    NOT NULL DEFAULT '',
    currency           TEXT    NOT NULL DEFAULT '',
    priced             INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (month, version, line)
);
