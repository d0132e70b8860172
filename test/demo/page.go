package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// keepVariable keeps the demo's monitor serving after the last step, until
// Ctrl-C, so the page can be looked at.
const keepVariable = "DEMO_KEEP"

// page says where the monitor's page is and how to sign in (a browser asks:
// any user name, the admin token as the password); with DEMO_KEEP=1 it
// then waits for Ctrl-C (SIGINT) or SIGTERM while the monitor serves.
func (d *demo) page() error {
	step("The page: open it in a browser")
	fmt.Printf("page:     %s/\n", d.url)
	fmt.Printf("user:     any name\npassword: %s   (the finance token: an admin token, it sees every project)\n", d.admin)
	fmt.Printf("$ curl -u ':%s' '%s/v1/report?by=project'\n", d.admin, d.url)
	if os.Getenv(keepVariable) != "1" {
		fmt.Printf("(the demo ends here and removes everything; %s=1 make demo keeps the monitor serving until Ctrl-C)\n", keepVariable)
		return nil
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	fmt.Printf("(%s=1: serving until Ctrl-C)\n", keepVariable)
	s := <-sig
	fmt.Printf("\n(%v: stopping the monitor and removing %s)\n", s, d.dir)
	return nil
}
