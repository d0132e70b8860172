package monitor

func mountStatementPage(a *API, h *statements) {}
