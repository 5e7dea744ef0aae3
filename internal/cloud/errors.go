package cloud

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors of node group operations. Implementations wrap them with
// context (fmt.Errorf("...: %w", ErrAboveMaxSize)); callers test with
// errors.Is.
var (
	// ErrAboveMaxSize: the target size would exceed the group's MaxSize.
	ErrAboveMaxSize = errors.New("node group would exceed its maximum size")
	// ErrBelowMinSize: the target size would fall below the group's MinSize.
	ErrBelowMinSize = errors.New("node group would fall below its minimum size")
	// ErrNotUnfulfilled: DecreaseTargetSize was asked to cancel more requests
	// than are unfulfilled; it never deletes existing instances.
	ErrNotUnfulfilled = errors.New("fewer unfulfilled requests than asked to cancel")
	// ErrNotInNodeGroup: a node given to a node group is not one of its nodes.
	ErrNotInNodeGroup = errors.New("node is not in the node group")
	// ErrInvalidDelta: a size change that is not a positive number.
	ErrInvalidDelta = errors.New("size change must be positive")
	// ErrProtected: the instance is one Spotter must not delete (its
	// Instance.Protected says why); DeleteInstance and DeleteNodes refuse
	// it and change nothing.
	ErrProtected = errors.New("instance is protected from deletion")
)

// NotFoundError is returned when the instance, node or node group asked about
// does not exist (any more).
type NotFoundError struct{ err error }

// NewNotFoundError wraps err as a *NotFoundError.
func NewNotFoundError(err error) *NotFoundError { return &NotFoundError{err: err} }

// Error implements error.
func (e *NotFoundError) Error() string { return "not found: " + errString(e.err) }

// Unwrap returns the wrapped error.
func (e *NotFoundError) Unwrap() error { return e.err }

// IsNotFound reports whether err is or wraps a *NotFoundError.
func IsNotFound(err error) bool {
	var e *NotFoundError
	return errors.As(err, &e)
}

// IgnoreNotFound returns nil for a *NotFoundError and err otherwise, for callers
// to whom "already gone" is success.
func IgnoreNotFound(err error) error {
	if IsNotFound(err) {
		return nil
	}
	return err
}

// ThrottledError is returned when the cloud refused a call because of its rate
// limits. RetryAfter is how long the cloud asked to wait, 0 when it did not say.
type ThrottledError struct {
	err error
	// RetryAfter is the wait the cloud asked for; 0 when unknown.
	RetryAfter time.Duration
}

// NewThrottledError wraps err as a *ThrottledError with the wait the cloud
// asked for (0 when unknown).
func NewThrottledError(err error, retryAfter time.Duration) *ThrottledError {
	return &ThrottledError{err: err, RetryAfter: retryAfter}
}

// Error implements error.
func (e *ThrottledError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("throttled (retry after %s): %s", e.RetryAfter, errString(e.err))
	}
	return "throttled: " + errString(e.err)
}

// Unwrap returns the wrapped error.
func (e *ThrottledError) Unwrap() error { return e.err }

// IsThrottled reports whether err is or wraps a *ThrottledError.
func IsThrottled(err error) bool {
	var e *ThrottledError
	return errors.As(err, &e)
}

// RetryAfter returns the wait asked for by a *ThrottledError in err, and
// whether err is one.
func RetryAfter(err error) (time.Duration, bool) {
	var e *ThrottledError
	if !errors.As(err, &e) {
		return 0, false
	}
	return e.RetryAfter, true
}

// CapacityUnavailableError is returned (or set on unfulfilled instances) when
// the cloud has no capacity for a node group's instances: a spot market without
// spot capacity, an insufficient-capacity answer, a stock-out.
type CapacityUnavailableError struct {
	err error
	// NodeGroup is the ID of the group that cannot grow; empty when unknown.
	NodeGroup string
}

// NewCapacityUnavailableError wraps err as a *CapacityUnavailableError for the
// node group with the given ID.
func NewCapacityUnavailableError(nodeGroup string, err error) *CapacityUnavailableError {
	return &CapacityUnavailableError{err: err, NodeGroup: nodeGroup}
}

// Error implements error.
func (e *CapacityUnavailableError) Error() string {
	if e.NodeGroup != "" {
		return fmt.Sprintf("capacity unavailable for node group %s: %s", e.NodeGroup, errString(e.err))
	}
	return "capacity unavailable: " + errString(e.err)
}

// Unwrap returns the wrapped error.
func (e *CapacityUnavailableError) Unwrap() error { return e.err }

// IsCapacityUnavailable reports whether err is or wraps a
// *CapacityUnavailableError.
func IsCapacityUnavailable(err error) bool {
	var e *CapacityUnavailableError
	return errors.As(err, &e)
}

// ControlPlaneError is returned when Spotter refuses a node or node group
// because it is part of the control plane: a spot node group whose nodes would
// be control-plane nodes, a control-plane node on spot, or a request to delete
// a control-plane node.
type ControlPlaneError struct {
	// Kind is "node", "node group" or KindControlPlane.
	Kind string
	// Name is the node's name or the node group's ID.
	Name string
	// Reason says what makes it control plane, and spot where that matters.
	Reason string
}

// KindControlPlane is the ControlPlaneError.Kind of a control plane object
// (such as a Cluster API KubeadmControlPlane) that would run on spot.
const KindControlPlane = "control plane"

// Error implements error.
func (e *ControlPlaneError) Error() string {
	return fmt.Sprintf("refusing control-plane %s %s: %s", e.Kind, e.Name, e.Reason)
}

// IsControlPlane reports whether err is or wraps a *ControlPlaneError.
func IsControlPlane(err error) bool {
	var e *ControlPlaneError
	return errors.As(err, &e)
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
