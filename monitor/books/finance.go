package books

import (
	"context"

	"github.com/paddle-entrypoint/paddle-entrypoint/monitor/report"
)

// StatementSHA256 is the hash of the statement in force of window w when w
// is a whole closed month, "" otherwise (an open month, any other window):
// what the chargeback file carries on every line.
func StatementSHA256(ctx context.Context, st Store, w report.Window) (string, error) {
	if !w.IsMonth() {
		return "", nil
	}
	c, err := st.Statement(ctx, w.From.Format("2006-01"))
	if err != nil || c == nil {
		return "", err
	}
	return c.SHA256, nil
}
