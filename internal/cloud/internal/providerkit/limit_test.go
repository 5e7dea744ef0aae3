package providerkit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// A Limiter of 20 requests a second lets a burst of 40 through, then one
// each 50 ms: 50 requests take at least 450 ms. A request whose context ends
// while it waits fails without reaching the server.
func TestLimiterPacesRequests(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) }))
	defer srv.Close()
	client := NewLimiter(20).Doer(&http.Client{})
	get := func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	start := time.Now()
	for range 50 {
		if err := get(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// A lower bound only: a limiter can be slower on a busy machine, never faster.
	if took := time.Since(start); took < 450*time.Millisecond {
		t.Errorf("50 requests at 20 a second (burst 40) took %s, want at least 450ms", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	for range 3 {
		_ = get(ctx)
	}
	if n := served.Load(); n != 50 {
		t.Errorf("the server saw %d requests, want 50: a request whose context ended while it waited went through", n)
	}
}
