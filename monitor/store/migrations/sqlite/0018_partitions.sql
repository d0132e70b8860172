-- Partitions are PostgreSQL's (migrations/postgres/0018_partitions.sql):
-- SQLite keeps one table each and its batched deletes. The step keeps the
-- two schemas' versions equal.
SELECT 1;
