package cloud

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// FromAPIError maps an error of the Kubernetes API, for providers whose cloud
// is (or goes through) the API server: NotFound becomes a *NotFoundError,
// TooManyRequests a *ThrottledError with the server's Retry-After. Other errors,
// and nil, come back unchanged.
func FromAPIError(err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return NewNotFoundError(err)
	case apierrors.IsTooManyRequests(err):
		var wait time.Duration
		if s, ok := apierrors.SuggestsClientDelay(err); ok {
			wait = time.Duration(s) * time.Second
		}
		return NewThrottledError(err, wait)
	}
	return err
}
