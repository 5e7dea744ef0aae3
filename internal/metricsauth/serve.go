package metricsauth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// ServeOptions configures Serve.
type ServeOptions struct {
	// Addr is the bind address, host:port.
	Addr string
	// Client checks every request (HTTPS, TokenReview, SubjectAccessReview);
	// nil serves plain HTTP to anyone who can connect.
	Client kubernetes.Interface
	// CertDir holds tls.crt and tls.key; empty means a self-signed certificate.
	// Only with Client.
	CertDir string
}

// Serve listens on opts.Addr and serves handler there until ctx ends. It
// returns the address it listens on (useful with port 0), or why it cannot.
func Serve(ctx context.Context, opts ServeOptions, handler http.Handler) (net.Addr, error) {
	var tlsConfig *tls.Config
	if opts.Client != nil {
		var err error
		if tlsConfig, err = TLSConfig(opts.CertDir); err != nil {
			return nil, err
		}
		handler = New(Options{Client: opts.Client}).Wrap(handler)
	}
	l, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", opts.Addr, err)
	}
	if tlsConfig != nil {
		l = tls.NewListener(l, tlsConfig)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		// A scraper that never reads must not hold a connection forever.
		WriteTimeout:   30 * time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 16 << 10,
		BaseContext:    func(net.Listener) context.Context { return ctx },
	}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "Serving metrics", "address", opts.Addr)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return l.Addr(), nil
}

// WarnIfExposed logs a warning when metrics served without authentication
// (setting names the configuration field) listen beyond the loopback interface.
func WarnIfExposed(log logr.Logger, setting, addr string) {
	if addr == "0" || Loopback(addr) {
		return
	}
	log.Info("WARNING: metrics are served over plain HTTP without authentication on a non-loopback address; anyone who can reach it can read them "+
		"(set "+setting+": Kubernetes, or bind to 127.0.0.1; see docs/metrics.md)", "address", addr)
}
