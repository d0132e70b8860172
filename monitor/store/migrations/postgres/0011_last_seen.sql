-- A task's counted end is max(end_time, last_seen): a task the monitor
-- heard from (a heartbeat, by its time as received) after the end it
-- claims counts until then, and a heartbeat of a completed task still
-- moves last_seen (never its GPU data). The report's fourth span branch,
-- completed tasks that ended before the window but were seen inside it,
-- reads this index: it holds only tasks seen after their end, so the
-- ordinary month reads none.
CREATE INDEX tasks_done_seen ON tasks (last_seen) WHERE end_time IS NOT NULL AND last_seen > end_time;
