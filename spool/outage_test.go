package spool

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"
)

func TestOutageRecord(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/spool.db"
	s := New(Options{Path: path})
	const url = "http://user:s3cret@monitor:8080/api"
	if _, found, err := s.Outage(ctx, url); found || err != nil {
		t.Fatalf("missing file: found %v, err %v", found, err)
	}
	if err := s.ClearOutage(ctx, url); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("reading or clearing created the file: %v", err)
	}
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := s.RecordOutage(ctx, url, at); err != nil {
		t.Fatal(err)
	}
	if got, found, err := s.Outage(ctx, url); !found || err != nil || !got.Equal(at) {
		t.Errorf("Outage = %v, %v, %v; want %v", got, found, err, at)
	}
	if _, found, _ := s.Outage(ctx, "http://monitor:8080/api"); found {
		t.Error("record found under another URL")
	}
	raw, _ := os.ReadFile(path)
	if bytes.Contains(raw, []byte("s3cret")) || bytes.Contains(raw, []byte("monitor:8080")) {
		t.Error("the spool file holds the monitor URL")
	}
	if st, _ := s.Registrations().Stats(ctx); st != (Stats{}) {
		t.Errorf("an outage record counts as an entry: %+v", st)
	}
	if err := s.ClearOutage(ctx, url); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := s.Outage(ctx, url); found {
		t.Error("record still there after ClearOutage")
	}
}
