package gcp

import "testing"

func TestParsePreempted(t *testing.T) {
	tests := []struct {
		in      string
		want    bool
		wantErr bool
	}{
		{in: "TRUE", want: true},
		{in: "FALSE"},
		{in: "TRUE\n", want: true},
		{in: "true", wantErr: true},
		{in: "", wantErr: true},
		{in: "<html>", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParsePreempted([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParsePreempted(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseMaintenanceEvent(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "NONE", want: MaintenanceNone},
		{in: "MIGRATE_ON_HOST_MAINTENANCE", want: MaintenanceMigrate},
		{in: "TERMINATE_ON_HOST_MAINTENANCE\n", want: MaintenanceTerminate},
		{in: "SOMETHING_NEW", want: "SOMETHING_NEW"},
		{in: "", wantErr: true},
		{in: "none", wantErr: true},
		{in: "MIGRATE ON HOST", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseMaintenanceEvent([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseMaintenanceEvent(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// The fuzz tests check that the parsers return errors rather than panic; the
// seed corpus runs in every `go test`.

func FuzzParsePreempted(f *testing.F) {
	for _, s := range []string{"TRUE", "FALSE", "TRUE\n", "", "\x00", "TRUEFALSE"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParsePreempted(b)
	})
}

func FuzzParseMaintenanceEvent(f *testing.F) {
	for _, s := range []string{"NONE", "MIGRATE_ON_HOST_MAINTENANCE", "TERMINATE_ON_HOST_MAINTENANCE", "", " ", "\xff\xfe"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseMaintenanceEvent(b)
		if err == nil && v == "" {
			t.Errorf("accepted %q as an empty value", b)
		}
	})
}
