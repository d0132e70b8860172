package monitor

// mountFinance mounts finance's own pages and files beside the statements.
func mountFinance(a *API, h *statements) {}
