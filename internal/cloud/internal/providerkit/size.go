package providerkit

import (
	"fmt"

	"spotter.dev/spotter/internal/cloud"
)

// The checks below name the group in their messages as group says it: the
// kind of group and its name or ID ("managed instance group
// europe-west1-b/pool"), as the provider's other errors do.

// CheckIncrease refuses an increase by delta below 1, with
// cloud.ErrInvalidDelta: the first check of NodeGroup.IncreaseSize, before
// the group is read.
func CheckIncrease(delta int) error {
	if delta <= 0 {
		return fmt.Errorf("increase of %d: %w", delta, cloud.ErrInvalidDelta)
	}
	return nil
}

// CheckDecrease refuses a decrease by delta below 1, with
// cloud.ErrInvalidDelta: the first check of NodeGroup.DecreaseTargetSize,
// before the group is read.
func CheckDecrease(delta int) error {
	if delta <= 0 {
		return fmt.Errorf("decrease of %d: %w", delta, cloud.ErrInvalidDelta)
	}
	return nil
}

// CheckMax refuses, with cloud.ErrAboveMaxSize, the target size want (delta
// more than the group's) when it is above max.
func CheckMax(group string, delta, want, max int) error {
	if want > max {
		return fmt.Errorf("%s: %d more would make %d, above its maximum %d: %w", group, delta, want, max, cloud.ErrAboveMaxSize)
	}
	return nil
}

// CheckCancel refuses a decrease of the target size by delta: with
// cloud.ErrNotUnfulfilled when the group has fewer than delta requests not
// yet fulfilled (pending of them, "pending what" in the message: "request(s)
// not yet fulfilled"), with cloud.ErrBelowMinSize when target less delta is
// below min.
func CheckCancel(group string, delta, pending int, what string, target, min int) error {
	switch {
	case delta > pending:
		return fmt.Errorf("%s has %d %s, asked to cancel %d: %w", group, pending, what, delta, cloud.ErrNotUnfulfilled)
	case target-delta < min:
		return fmt.Errorf("%s: %d fewer would make %d, below its minimum %d: %w", group, delta, target-delta, min, cloud.ErrBelowMinSize)
	}
	return nil
}

// CheckDelete refuses, with cloud.ErrBelowMinSize, to delete n nodes of a
// group of target size target when that would leave it below min.
func CheckDelete(group string, n, target, min int) error {
	if left := target - n; left < min {
		return fmt.Errorf("%s: deleting %d node(s) would leave %d, below its minimum %d: %w", group, n, left, min, cloud.ErrBelowMinSize)
	}
	return nil
}

// TieredCPUReserve is the CPU, in millicores, that GKE and the EKS node
// images reserve for the kubelet and the system on a node of cores cores:
// 6 % of the first core, 1 % of the second, 0.5 % of the third and fourth
// and 0.25 % of each further one (GKE's "Node allocatable resources" and the
// EKS AMIs' bootstrap use the same tiers).
func TieredCPUReserve(cores int64) int64 {
	var m float64
	for c := int64(1); c <= cores; c++ {
		switch {
		case c == 1:
			m += 60
		case c == 2:
			m += 10
		case c <= 4:
			m += 5
		default:
			m += 2.5
		}
	}
	return int64(m)
}
