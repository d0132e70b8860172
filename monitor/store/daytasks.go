package store

import (
	"context"
	"fmt"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/facts"
)

// ReportTasksByDay is ReportTasks of each UTC day of w (whole days, at
// most a month's 31), in the days' order, from one read of w's tasks: the
// same tasks, in the same order, with the same seconds as a read of that
// day gives, where a month's export read its tasks day by day (30 reads
// of span: half the export's CPU at 1,000 GPUs with a year stored).
//
// A task of the day [f, t) is one of span's sets for that window:
// started in it, or started before f with its counted end ce (countedEnd)
// after f; span's other three sets (an end after f, an open task seen
// after f, a task seen after its end and after f) are exactly the tasks
// started before f whose ce is after f. Every such task is one of w's
// (the day is inside w), and its seconds in the day are span's, max(0,
// min(ce, t) − max(start, f)). Its other columns do not depend on the
// window, and the order (start, task_id, id) is the days' too.
func (s *Store) ReportTasksByDay(ctx context.Context, w facts.Window) ([][]facts.TaskUsage, error) {
	if err := w.Check(); err != nil {
		return nil, err
	}
	from, to := w.From.Unix(), w.To.Unix()
	if from%86400 != 0 || to%86400 != 0 || to-from > 31*86400 {
		return nil, fmt.Errorf("store: tasks by day: %s to %s is not whole UTC days of at most a month", w.From, w.To)
	}
	tasks, ends, err := s.reportTaskList(ctx, w)
	if err != nil {
		return nil, err
	}
	out := make([][]facts.TaskUsage, (to-from)/86400)
	for i := range out {
		f, t := from+int64(i)*86400, from+int64(i+1)*86400
		for j, task := range tasks {
			ce := ends[j]
			if !(task.Start >= f && task.Start < t) && !(task.Start < f && ce > f) {
				continue
			}
			task.Seconds = max(0, min(ce, t)-max(task.Start, f))
			out[i] = append(out[i], task)
		}
	}
	return out, nil
}
