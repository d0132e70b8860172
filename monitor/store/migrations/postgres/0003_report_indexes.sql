-- Indexes of the report (store/report.go) and of the open tasks on
-- /metrics (store/opentasks.go).
--
-- A report's window [f, t) selects three disjoint sets of tasks:
--   started inside it                     tasks_start_time (start_time)
--   completed, started before, ended after tasks_end_start (end_time, start_time):
--                                         the range end_time > f, filtered
--                                         on start_time < f in the index
--   open, started before, seen after      tasks_open_seen (last_seen), open
--                                         tasks only
-- /metrics reads open tasks seen since now - open-ttl: tasks_open (start)
-- and tasks_open_seen (heartbeats).
CREATE INDEX IF NOT EXISTS tasks_end_start ON tasks (end_time, start_time);
CREATE INDEX IF NOT EXISTS tasks_open_seen ON tasks (last_seen) WHERE end_time IS NULL;
