-- The "one GPU, one task" claim served by indexes (store/statements.go).
--
-- A registration asks two things of every GPU UUID it lists: which open
-- tasks that started earlier still claim it (their claim ends), and when
-- the first task that started later on it began (a late registration's own
-- claim ends then). Both were answered by joining tasks, which read every
-- open task. task_gpus now carries its task's start and end (copied at
-- registration and completion; a task's start never changes), so both are
-- a range of one index:
--   task_gpus_open_claims  the claims still open: GPUs with a UUID, of a
--                          task without a completion, not taken over
--   task_gpus_uuid_start   every GPU with a UUID by start, for the later one
-- task_gpus_uuid (uuid alone) is a prefix of the second and goes.
ALTER TABLE task_gpus ADD COLUMN task_start BIGINT NOT NULL DEFAULT 0;
ALTER TABLE task_gpus ADD COLUMN task_end BIGINT;
UPDATE task_gpus SET task_start = t.start_time, task_end = t.end_time
    FROM tasks t WHERE t.task_id = task_gpus.task_id;
DROP INDEX IF EXISTS task_gpus_uuid;
CREATE INDEX task_gpus_uuid_start ON task_gpus (uuid, task_start) WHERE uuid <> '';
CREATE INDEX task_gpus_open_claims ON task_gpus (uuid, task_start)
    WHERE uuid <> '' AND claim_ended IS NULL AND task_end IS NULL;
