package monitor_test

import (
	"testing"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }
