package providerkit

import (
	"net/http"
	"strconv"
	"time"
)

// RetryAfter reads the Retry-After header of a throttled answer in its
// delay-seconds form (RFC 9110, section 10.2.3), which is the form Compute
// Engine and Azure Resource Manager send; 0 when it is absent, not a
// positive number of seconds, or an HTTP date.
func RetryAfter(h http.Header) time.Duration {
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 0
}
