-- node_spans: the spans each node's reports covered, as intervals exact to
-- the second (docs/cost.md, "Two bases": the instant rule). uuid '' is the
-- node itself (any report of it covers the span); a GPU UUID the spans in
-- which a report listed the GPU with samples (its ledger state is not
-- unobserved there). A node's reports are clipped to spans not yet
-- covered, so one node's spans never overlap; the write path merges a span
-- with the one that ends where it starts and the one that starts where it
-- ends within one UTC day, so a node reporting without gaps keeps one row
-- per GPU and day.
-- Unlike node_reports, the spans are kept after --raw-retention: a
-- partly covered hour is billed exactly in any month still held.
CREATE TABLE node_spans (
    node       TEXT    NOT NULL,
    uuid       TEXT    NOT NULL,
    span_start INTEGER  NOT NULL,
    span_end   INTEGER  NOT NULL,
    PRIMARY KEY (node, uuid, span_start)
);
-- A span is cut at UTC day boundaries (a raw report's at most
-- interval_seconds, one day, long), so node_spans_end serves the spans
-- reaching into a window [from, to) as those ending in (from, to + 1 day].
CREATE INDEX node_spans_end ON node_spans (span_end);

-- The spans of the reports still held raw, as they are (adjacent spans are
-- not merged: a reader takes their union).
INSERT INTO node_spans (node, uuid, span_start, span_end)
    SELECT node, '', span_start, span_end FROM node_reports WHERE span_end > span_start;
INSERT INTO node_spans (node, uuid, span_start, span_end)
    SELECT DISTINCT r.node, json_extract(i.value, '$.uuid'), r.span_start, r.span_end
    FROM node_reports r, json_each(r.body, '$.instances') i
    WHERE r.span_end > r.span_start AND json_extract(i.value, '$.samples') > 0 AND json_extract(i.value, '$.uuid') IS NOT NULL AND json_extract(i.value, '$.uuid') <> '';
-- Hours older than a node's raw reports have only their covered seconds
-- (node_gpu_hours): a whole covered hour is a span; a partly covered hour
-- is taken as covered from its start (the roll-ups did not keep where in
-- the hour the node's reports were: documented in docs/cost.md).
INSERT INTO node_spans (node, uuid, span_start, span_end)
    SELECT g.node, g.uuid, g.hour, g.hour + CAST(ROUND(g.observed_s) AS INTEGER) FROM node_gpu_hours g
    WHERE g.observed_s >= 1 AND g.hour + 3600 <= COALESCE((SELECT MIN(r.span_start) FROM node_reports r WHERE r.node = g.node), 9000000000000000000);
INSERT INTO node_spans (node, uuid, span_start, span_end)
    SELECT g.node, '', g.hour, g.hour + CAST(ROUND(MAX(g.observed_s)) AS INTEGER) FROM node_gpu_hours g
    WHERE g.observed_s >= 1 AND g.hour + 3600 <= COALESCE((SELECT MIN(r.span_start) FROM node_reports r WHERE r.node = g.node), 9000000000000000000)
    GROUP BY g.node, g.hour;

-- serving_inputs: the inputs that change figures (prices, budgets,
-- namespace mapping, split rule) each serving replica loaded, by their
-- SHA-256 ('' for none), with a heartbeat (recorded_at): a close refuses
-- other inputs than the live replicas' (docs/cost.md, "Closed months").
CREATE TABLE serving_inputs (
    replica            TEXT    PRIMARY KEY,
    prices_sha256      TEXT    NOT NULL DEFAULT '',
    budgets_sha256     TEXT    NOT NULL DEFAULT '',
    namespaces_sha256  TEXT    NOT NULL DEFAULT '',
    split              TEXT    NOT NULL DEFAULT '',
    recorded_at        INTEGER NOT NULL
);
