-- When a task was submitted (the registration's submit_time, Unix seconds;
-- NULL without one): the report's queue wait is start_time - submit_time.
ALTER TABLE tasks ADD COLUMN submit_time BIGINT;
