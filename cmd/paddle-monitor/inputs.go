package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/books"
	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store"
)

// The inputs that change figures (prices, budgets, namespace mapping,
// split rule) are recorded in the store by each serving replica, with a
// heartbeat, so that a close from the command line with other inputs is
// refused instead of freezing other figures than the ones served (a close
// without --namespace-projects dropped undeclared use: MONITOR.md 20.12).
const (
	inputsHeartbeat = 30 * time.Second
	// inputsLive: a replica heard from this recently is serving.
	inputsLive = 3 * inputsHeartbeat
)

func fileSHA256(b []byte) string {
	if b == nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// servingInputs are in's recorded form.
func servingInputs(in books.Inputs, split string) store.ServingInputs {
	if split == "" {
		split = "equal"
	}
	return store.ServingInputs{PricesSHA256: fileSHA256(in.PricesJSON), BudgetsSHA256: fileSHA256(in.BudgetsJSON),
		Namespaces: fileSHA256(in.NamespacesJSON), Split: split}
}

// recordInputs records mine now and every inputsHeartbeat until ctx ends.
func recordInputs(ctx context.Context, st *store.Store, mine store.ServingInputs, log *slog.Logger) {
	host, _ := os.Hostname()
	mine.Replica = fmt.Sprintf("%s:%d", host, os.Getpid())
	every(ctx, inputsHeartbeat, func() {
		mine.RecordedAt = time.Now().Unix()
		// Not cancelled by the stop: a record cut short by a cancel may
		// still commit on PostgreSQL after the forget below, leaving this
		// replica "live" for inputsLive and a CLI close refused.
		rec, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := st.RecordInputs(rec, mine); err != nil {
			log.Error("recording the serving inputs failed", "err", err)
		}
	})
	// Stopped: a close from the command line no longer has to match.
	forget, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := st.ForgetInputs(forget, mine.Replica); err != nil {
		log.Error("forgetting the serving inputs failed", "err", err)
	}
}

// checkServingInputs refuses a close whose inputs differ from those a live
// serving replica recorded, naming the flags that differ.
func checkServingInputs(ctx context.Context, st *store.Store, mine store.ServingInputs) error {
	live, err := st.LiveInputs(ctx, time.Now().Add(-inputsLive).Unix())
	if err != nil {
		return err
	}
	for _, r := range live {
		var diff []string
		for _, d := range []struct{ flag, theirs, ours string }{
			{"--prices", r.PricesSHA256, mine.PricesSHA256},
			{"--budgets", r.BudgetsSHA256, mine.BudgetsSHA256},
			{"--namespace-projects", r.Namespaces, mine.Namespaces},
			{"--split", r.Split, mine.Split},
		} {
			if d.theirs != d.ours {
				diff = append(diff, d.flag)
			}
		}
		if len(diff) > 0 {
			return fmt.Errorf("%w: close: %s differ from the serving monitor's (replica %s): close with the files it serves with, or through it (POST /v1/statements/{month}/close)",
				errUsage, strings.Join(diff, ", "), r.Replica)
		}
	}
	return nil
}
