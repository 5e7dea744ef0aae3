package gcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	compute "cloud.google.com/go/compute/apiv1"
	"cloud.google.com/go/compute/apiv1/computepb"
	"google.golang.org/api/googleapi"

	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/internal/providerkit"
)

// Reasons (of a call's error items) and codes (of an operation's or a
// managed instance's errors) Compute Engine uses.
var (
	// throttleReasons: the caller sent too many requests.
	throttleReasons = map[string]bool{"rateLimitExceeded": true, "userRateLimitExceeded": true, "RATE_LIMIT_EXCEEDED": true}
	// capacityCodes: the cloud has no capacity, or the project no quota,
	// for the instances asked for.
	capacityCodes = map[string]bool{
		"ZONE_RESOURCE_POOL_EXHAUSTED": true, "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS": true,
		"QUOTA_EXCEEDED": true, "quotaExceeded": true,
	}
)

// mapError turns a Compute Engine error into the seam's typed errors: 429
// or a rate-limit reason *cloud.ThrottledError (with the Retry-After the
// answer carried), a capacity or quota reason
// *cloud.CapacityUnavailableError for group (the group's ID, "" for none),
// 404 *cloud.NotFoundError. Other errors come back unchanged.
func mapError(group string, err error) error {
	var ge *googleapi.Error
	if !errors.As(err, &ge) {
		return err
	}
	reasons := make([]string, 0, len(ge.Errors))
	for _, e := range ge.Errors {
		reasons = append(reasons, e.Reason)
	}
	switch {
	case ge.Code == http.StatusTooManyRequests || anyIn(reasons, throttleReasons):
		return cloud.NewThrottledError(err, providerkit.RetryAfter(ge.Header))
	case anyIn(reasons, capacityCodes):
		return cloud.NewCapacityUnavailableError(group, err)
	case ge.Code == http.StatusNotFound:
		return cloud.NewNotFoundError(err)
	}
	return err
}

func anyIn(values []string, set map[string]bool) bool {
	for _, v := range values {
		if set[v] {
			return true
		}
	}
	return false
}

// codedError is an error of an operation or of a managed instance's last
// attempt: Compute Engine's code and message.
type codedError struct {
	Code, Message string
}

func (e *codedError) Error() string { return e.Code + ": " + e.Message }

// errorsOf returns the typed error of a list of operation or attempt errors
// (the first one's code decides: a capacity code is a
// *cloud.CapacityUnavailableError for group), or nil for none.
func errorsOf(group string, errs []*computepb.Errors) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.GetMessage())
	}
	err := &codedError{Code: errs[0].GetCode(), Message: strings.Join(msgs, "; ")}
	switch {
	case capacityCodes[err.Code]:
		return cloud.NewCapacityUnavailableError(group, err)
	case throttleReasons[err.Code]:
		return cloud.NewThrottledError(err, 0)
	}
	return err
}

// wait polls op until it is DONE, with backoff (OperationPoll doubling up
// to OperationPollMax, on the provider's clock), and returns its error,
// typed. Polls the cloud throttles are retried: the write was accepted, it
// is only its outcome that is not known yet. After OperationTimeout, wait
// gives up with an error that says the operation may still complete.
func (p *Provider) wait(ctx context.Context, op *compute.Operation, what, group string) error {
	b := backoff.Backoff{Initial: p.opts.OperationPoll, Max: p.opts.OperationPollMax, Jitter: 0.2}
	deadline := p.clock.Now().Add(p.opts.OperationTimeout)
	for !op.Done() {
		if !p.clock.Now().Before(deadline) {
			return fmt.Errorf("%s: operation %s still not done after %s; it may still complete", what, op.Name(), p.opts.OperationTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: waiting for operation %s: %w", what, op.Name(), ctx.Err())
		case <-p.clock.After(b.Next()):
		}
		if err := op.Poll(ctx); err != nil {
			// An operation that ended in error makes Poll fail: its errors
			// say why, below.
			if op.Done() {
				break
			}
			if err := mapError(group, err); cloud.IsThrottled(err) {
				continue
			}
			return fmt.Errorf("%s: polling operation %s: %w", what, op.Name(), mapError(group, err))
		}
	}
	if err := errorsOf(group, op.Proto().GetError().GetErrors()); err != nil {
		return fmt.Errorf("%s: operation %s failed: %w", what, op.Name(), err)
	}
	return nil
}
