-- A statement's report_cut (MONITOR.md 20.14) is the latest report time
-- of any node at the close: an index on nodes' last report time answers
-- it from the index's end, not by reading every node.
CREATE INDEX nodes_last_time ON nodes (last_time);
