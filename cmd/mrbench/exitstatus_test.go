package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestUsageErrorKeepsItsStatusWhenInterrupted: a usage error exits 2
// though the context is already cancelled (a signal came first), for
// mrbench and mrbench sim, with its message and without "interrupted";
// before, any status but 0 became the signal's (130). A valid run that the
// cancel stops still exits with the signal's status.
func TestUsageErrorKeepsItsStatusWhenInterrupted(t *testing.T) {
	clearLauncherEnv(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"sim", "loss", "--mtu", "1"}, "MTU 1 bytes"},
		{[]string{"sim"}, "name a scenario"},
	} {
		var out, errs strings.Builder
		code := run(ctx, tc.args, &out, &errs)
		assert.Equal(t, exitUsage, code, "%v: %s", tc.args, errs.String())
		assert.Contains(t, errs.String(), tc.want, "%v", tc.args)
		assert.NotContains(t, errs.String(), "interrupted", "%v", tc.args)
	}
	var out, errs strings.Builder
	assert.Equal(t, 130, run(ctx, []string{"sim", "loss", "--smoke"}, &out, &errs), errs.String())
	assert.Contains(t, errs.String(), "mrbench: interrupted")
}
