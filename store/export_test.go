package store

import "database/sql"

// DBForTest exposes the connection pool to this package's tests.
func DBForTest(s *Store) *sql.DB { return s.r }
