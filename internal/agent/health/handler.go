package health

import (
	"fmt"
	"net/http"
)

// Handler serves the probes: /healthz answers 200 "ok" while the process
// serves; /readyz answers 200 "ok" when ready says nil, else 503 with the
// error. Neither needs authentication: they tell only ok or which metadata
// path fails. Serve it over plain HTTP (metricsauth.Serve without a client):
// the kubelet probes it.
func Handler(ready func() error) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := ready(); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintln(w, err)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	return mux
}
