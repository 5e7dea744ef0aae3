package azure

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"spotter.dev/spotter/internal/backoff"
	"spotter.dev/spotter/internal/cloud"
	"spotter.dev/spotter/internal/cloud/internal/providerkit"
)

// Error codes of ARM and the compute resource provider that Spotter reads.
var (
	// throttleCodes: the caller sent too many requests.
	throttleCodes = map[string]bool{"TooManyRequests": true, "SubscriptionRequestsThrottled": true}
	// capacityCodes: Azure has no capacity (or the subscription no quota)
	// for the VMs asked for.
	capacityCodes = map[string]bool{
		"AllocationFailed": true, "ZonalAllocationFailed": true,
		"OverconstrainedAllocationRequest": true, "OverconstrainedZonalAllocationRequest": true,
		"SkuNotAvailable": true, "QuotaExceeded": true,
	}
)

// isCapacity reports whether an ARM error code (and its message) says
// capacity or quota is short: a capacity code, or OperationNotAllowed about
// a quota (ARM's answer when a change would exceed a cores quota).
func isCapacity(code, message string) bool {
	return capacityCodes[code] || (code == "OperationNotAllowed" && strings.Contains(strings.ToLower(message), "quota"))
}

// mapError turns an ARM error into the seam's typed errors: 429 or a
// throttling code *cloud.ThrottledError (with the Retry-After of the
// answer), a capacity or quota code *cloud.CapacityUnavailableError for
// group (a scale set's ID, "" for none), 404 *cloud.NotFoundError. Other
// errors come back unchanged.
func mapError(group string, err error) error {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return err
	}
	switch {
	case re.StatusCode == http.StatusTooManyRequests || throttleCodes[re.ErrorCode]:
		return cloud.NewThrottledError(err, retryAfter(re.RawResponse))
	case isCapacity(re.ErrorCode, err.Error()):
		return cloud.NewCapacityUnavailableError(group, err)
	case re.StatusCode == http.StatusNotFound:
		return cloud.NewNotFoundError(err)
	}
	return err
}

// retryAfter reads Retry-After (seconds) of a response; 0 when absent.
func retryAfter(resp *http.Response) time.Duration {
	if resp == nil {
		return 0
	}
	return providerkit.RetryAfter(resp.Header)
}

// statusError is a VM's failed provisioning, from its instance view:
// ProvisioningState/failed/<code> and the status's message.
type statusError struct{ Code, Message string }

func (e *statusError) Error() string { return e.Code + ": " + e.Message }

// typed returns e as the seam's error: a capacity code is a
// *cloud.CapacityUnavailableError for group.
func (e *statusError) typed(group string) error {
	if isCapacity(e.Code, e.Message) {
		return cloud.NewCapacityUnavailableError(group, e)
	}
	return e
}

// wait follows a long-running operation through the SDK's poller: it polls
// at once, then with backoff (OperationPoll doubling up to
// OperationPollMax, on the provider's clock), until the operation is done,
// and returns its outcome, typed. A throttled poll is retried: the write
// was accepted, only its outcome is not known yet. After OperationTimeout
// wait gives up with an error that says the operation may still complete.
func wait[T any](ctx context.Context, p *Provider, poller *runtime.Poller[T], what, group string) error {
	b := backoff.Backoff{Initial: p.opts.OperationPoll, Max: p.opts.OperationPollMax, Jitter: 0.2}
	deadline := p.clock.Now().Add(p.opts.OperationTimeout)
	for {
		resp, err := poller.Poll(ctx)
		if resp != nil {
			_ = resp.Body.Close() // the SDK has read it
		}
		if poller.Done() {
			if _, err := poller.Result(ctx); err != nil {
				return fmt.Errorf("%s: the operation failed: %w", what, mapError(group, err))
			}
			return nil
		}
		if err != nil && !cloud.IsThrottled(mapError(group, err)) {
			return fmt.Errorf("%s: polling the operation: %w", what, mapError(group, err))
		}
		if !p.clock.Now().Before(deadline) {
			return fmt.Errorf("%s: the operation is still running after %s; it may still complete", what, p.opts.OperationTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: waiting for the operation: %w", what, ctx.Err())
		case <-p.clock.After(b.Next()):
		}
	}
}
