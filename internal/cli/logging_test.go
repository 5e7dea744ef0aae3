package cli

import (
	"testing"

	"github.com/spf13/pflag"
)

// The controller's logging flags: -v raises the verbosity unless
// --zap-log-level says otherwise; negative verbosities are refused.
func TestControllerLogFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		v2, failed bool
	}{
		{nil, false, false},
		{[]string{"-v", "2"}, true, false},
		{[]string{"--v=1"}, false, false},
		{[]string{"-v", "2", "--zap-log-level", "info"}, false, false},
		{[]string{"--zap-log-level", "3"}, true, false},
		{[]string{"-v", "-1"}, false, true},
	} {
		var l logOptions
		fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
		l.addFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		logger, err := l.logger(fs.Changed("zap-log-level"))
		if (err != nil) != tc.failed {
			t.Errorf("%v: error %v", tc.args, err)
			continue
		}
		if err == nil && logger.V(2).Enabled() != tc.v2 {
			t.Errorf("%v: V(2) enabled %v, want %v", tc.args, logger.V(2).Enabled(), tc.v2)
		}
	}
}
