package register

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/internal/deliver"
)

// HeartbeatWarnEvery is the least time between two warnings about failed
// heartbeats: a monitor outage shows in the task's log while it lasts,
// without a line per heartbeat.
const HeartbeatWarnEvery = time.Minute

// Heartbeats sends a task's heartbeats (never spooled: only the latest
// matters) and logs what became of them: a failed heartbeat at warning,
// at most once per HeartbeatWarnEvery, each warning counting the failures
// since the previous one; the first delivery after failures at info. A
// heartbeat abandoned because ctx was cancelled (the command ended) is no
// failure. A
// Heartbeats is used by one goroutine at a time (supervise mode never
// sends two heartbeats at once).
type Heartbeats struct {
	Client *deliver.Client
	Logger *slog.Logger
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	failing  int       // failures since the last delivery
	unwarned int       // failures not yet counted in a warning
	warnedAt time.Time // the last warning; zero: none since the last delivery
}

// Send makes one attempt to deliver hb within ctx and logs its result as
// the type says; the error is deliver.Client.Post's.
func (h *Heartbeats) Send(ctx context.Context, hb Heartbeat) error {
	err := h.Client.Post(ctx, HeartbeatPath, hb.Key(), hb.Marshal())
	if errors.Is(err, context.Canceled) {
		// Abandoned, not failed: the command ended while it was in
		// flight (its own timeout is DeadlineExceeded, a failure).
		h.logger().Debug("heartbeat abandoned: the command ended", "task_id", hb.TaskID)
		return err
	}
	h.note(hb.TaskID, err)
	return err
}

func (h *Heartbeats) note(taskID string, err error) {
	log := h.logger().With("task_id", taskID)
	if err == nil {
		if h.failing > 0 {
			log.Info("heartbeats delivered again", "failed_before", h.failing)
		}
		h.failing, h.unwarned, h.warnedAt = 0, 0, time.Time{}
		return
	}
	h.failing++
	h.unwarned++
	text := h.Client.Redact(err.Error())
	now := h.now()
	if !h.warnedAt.IsZero() && now.Sub(h.warnedAt) < HeartbeatWarnEvery && now.Sub(h.warnedAt) >= 0 {
		log.Debug("heartbeat not delivered", "err", text)
		return
	}
	log.Warn("heartbeat not delivered: the monitor does not see this task alive while this lasts (at most one such line a minute)",
		"failed", h.unwarned, "failed_in_a_row", h.failing, "err", text)
	h.unwarned, h.warnedAt = 0, now
}

func (h *Heartbeats) now() time.Time {
	if h.Now == nil {
		return time.Now()
	}
	return h.Now()
}

func (h *Heartbeats) logger() *slog.Logger {
	if h.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Logger
}
