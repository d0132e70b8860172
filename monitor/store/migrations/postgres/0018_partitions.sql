-- Partitions (docs/monitor.md, "Partitions on PostgreSQL"): node_reports by
-- the UTC day of time, node_gpu_hours and node_user_hours by the UTC month
-- of hour, each with a DEFAULT partition. This step's work is done by
-- partitionEmptyTables (monitor/store/partition.go) in this step's
-- transaction, after this file: each of the three tables still empty (a new
-- store) is made again, partitioned, with the same columns, keys and index
-- names; a table holding rows is moved by `paddle-monitor migrate
-- --partition`. It needs PostgreSQL 14 or later.
SELECT 1;
