package gcp

import (
	"fmt"
	"strings"
)

// Values of instance/maintenance-event.
const (
	MaintenanceNone      = "NONE"
	MaintenanceMigrate   = "MIGRATE_ON_HOST_MAINTENANCE"
	MaintenanceTerminate = "TERMINATE_ON_HOST_MAINTENANCE"
)

// ParsePreempted parses the value of instance/preempted: TRUE or FALSE.
func ParsePreempted(b []byte) (bool, error) {
	switch s := strings.TrimSpace(string(b)); s {
	case "TRUE":
		return true, nil
	case "FALSE":
		return false, nil
	default:
		return false, fmt.Errorf("instance/preempted: want TRUE or FALSE, got %q", truncate(s))
	}
}

// ParseMaintenanceEvent parses the value of instance/maintenance-event: NONE,
// MIGRATE_ON_HOST_MAINTENANCE, TERMINATE_ON_HOST_MAINTENANCE, or another
// upper-case word the service may add (kept as is: it still announces
// maintenance).
func ParseMaintenanceEvent(b []byte) (string, error) {
	s := strings.TrimSpace(string(b))
	if s == "" || len(s) > 128 {
		return "", fmt.Errorf("instance/maintenance-event: want one value such as NONE, got %q", truncate(s))
	}
	if strings.ContainsFunc(s, func(r rune) bool { return (r < 'A' || r > 'Z') && (r < '0' || r > '9') && r != '_' }) {
		return "", fmt.Errorf("instance/maintenance-event: want an upper-case word such as NONE, got %q", truncate(s))
	}
	return s, nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
