-- Idle GPUs seen while they are idle (heartbeats with gpus): the task's
-- idle_since (start of the current run of idle heartbeats; NULL while busy
-- or before any sampled heartbeat), the time and interval_seconds of the
-- newest heartbeat that carried gpus (a spooled or late heartbeat older
-- than it changes no GPU data), and each GPU's latest sampled interval.
ALTER TABLE tasks ADD COLUMN idle_since BIGINT;
ALTER TABLE tasks ADD COLUMN gpus_seen BIGINT;
ALTER TABLE tasks ADD COLUMN heartbeat_interval BIGINT;
ALTER TABLE task_gpus ADD COLUMN latest_samples BIGINT;
ALTER TABLE task_gpus ADD COLUMN latest_util_mean DOUBLE PRECISION;
-- GET /v1/tasks?state=idle reads the open idle tasks.
CREATE INDEX tasks_open_idle ON tasks (idle_since) WHERE end_time IS NULL AND idle_since IS NOT NULL;
