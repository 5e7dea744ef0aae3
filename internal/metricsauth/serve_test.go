package metricsauth_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"spotter.dev/spotter/internal/metricsauth"
	"spotter.dev/spotter/internal/testenv"
)

// TestServeAgainstAPIServer serves a handler through Serve with a real
// apiserver's TokenReview and SubjectAccessReview deciding: a ServiceAccount
// bound to get /metrics reads it, over HTTPS; one without the binding is
// refused, as are a forged token, no token, and plain HTTP.
func TestServeAgainstAPIServer(t *testing.T) {
	env := testenv.StartAPIServer(t)
	ctx := testenv.Context(t, 2*time.Minute)
	reader := env.ServiceAccountToken("prometheus", true)
	other := env.ServiceAccountToken("nosy", false)

	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("spotter_up 1\n")) })
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	addr, err := metricsauth.Serve(sctx, metricsauth.ServeOptions{Addr: "127.0.0.1:0", Client: env.Client}, ok)
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + addr.String() + "/metrics"
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"metrics reader", reader, http.StatusOK},
		{"account without the binding", other, http.StatusForbidden},
		{"forged token", reader[:len(reader)-4] + "AAAA", http.StatusUnauthorized},
		{"no token", "", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, err := testenv.Scrape(ctx, url, tc.token)
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.want {
				t.Fatalf("HTTP %d (%s), want %d", code, body, tc.want)
			}
		})
	}
	if code, _, err := testenv.Scrape(ctx, "http://"+addr.String()+"/metrics", reader); err == nil && code == http.StatusOK {
		t.Fatal("metrics were served over plain HTTP")
	}
}
