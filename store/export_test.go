package store

import (
	"context"
	"database/sql"
)

// DBForTest exposes the connection pool to this package's tests.
func DBForTest(s *Store) *sql.DB { return s.r }

// OpenAtVersionForTest opens dsn migrated to version v only: a database of
// an older release, for the upgrade tests. Only raw SQL may write to it.
func OpenAtVersionForTest(ctx context.Context, dsn string, v int) (*Store, error) {
	return open(ctx, dsn, Options{}, v)
}
