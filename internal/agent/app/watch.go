package app

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"spotter.dev/spotter/internal/agent/aws"
	"spotter.dev/spotter/internal/agent/azure"
	"spotter.dev/spotter/internal/agent/gcp"
	"spotter.dev/spotter/internal/agent/health"
	"spotter.dev/spotter/internal/agent/interrupt"
	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/metricsauth"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// runWatch runs the agent: the cloud's notice source feeds the interruption
// handler until ctx ends. clk paces the source and the handler.
func runWatch(ctx context.Context, cfg *v1alpha1.SpotterConfiguration, client kubernetes.Interface, node *corev1.Node, dryRun bool, clk clock.Clock) error {
	logger := klog.FromContext(ctx).WithValues("node", node.Name)
	ctx = klog.NewContext(ctx, logger)
	a := cfg.Agent

	cloud, err := resolveCloud(ctx, a)
	if err != nil {
		return err
	}
	metrics := health.NewMetrics()
	monitor := health.NewMonitor(cloud, int(a.ReadinessFailureThreshold), clk, metrics, logger)
	source, err := newSource(cloud, a, node, clk, monitor)
	if err != nil {
		return err
	}
	monitor.Expect(source.Paths())

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	interrupt.MustRegister(reg)
	metrics.MustRegister(reg)
	if err := serveMetrics(ctx, a, client, reg); err != nil {
		return err
	}
	if err := serveHealth(ctx, a, monitor); err != nil {
		return err
	}

	// Events are recorded until the handler is done, after SIGTERM too: a
	// termination drain may still be running then.
	eventsDone := make(chan struct{})
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	broadcaster.StartRecordingToSink(eventsDone)
	defer broadcaster.Shutdown()
	defer close(eventsDone)
	recorder := broadcaster.NewRecorder(scheme.Scheme, "spotter-agent")

	ack, _ := source.(notice.Acknowledger)
	handler := interrupt.FromConfig(client, clk, recorder, ack, cfg, node.Name, dryRun)

	notices := make(chan notice.Notice, 16)
	watchErr := make(chan error, 1)
	go func() { watchErr <- source.Watch(ctx, notices) }()
	logger.Info("Watching for interruption notices", "cloud", cloud, "endpoint", a.MetadataEndpoint, "dryRun", dryRun)
	hctx, stopHandler := context.WithCancel(ctx)
	defer stopHandler()
	handled := make(chan struct{})
	go func() { handler.Run(hctx, notices); close(handled) }()
	select {
	case err = <-watchErr:
	case <-ctx.Done():
	}
	// The handler stops taking notices, and waits for a termination drain in
	// flight (bounded by its deadline) before the agent exits.
	stopHandler()
	<-handled
	if err != nil {
		return fmt.Errorf("watching the %s metadata service: %w", cloud, err)
	}
	return nil
}

// resolveCloud returns the cloud whose metadata service a says to watch:
// agent.cloud, or the one that answers (notice.Detect) for auto.
func resolveCloud(ctx context.Context, a v1alpha1.AgentConfig) (string, error) {
	if a.Cloud != v1alpha1.CloudAuto {
		return string(a.Cloud), nil
	}
	found, err := notice.Detect(ctx, nil, a.MetadataEndpoint, a.RequestTimeout.Duration)
	if err != nil {
		return "", fmt.Errorf("--cloud auto: %w; set --cloud aws, gcp or azure", err)
	}
	return found, nil
}

// newSource builds the notice source of cloud from the agent's
// configuration, on clk, telling observer (nil: nobody) about its reads.
func newSource(cloud string, a v1alpha1.AgentConfig, node *corev1.Node, clk clock.Clock, observer notice.ReadObserver) (notice.Source, error) {
	poll, timeout := a.PollInterval.Duration, a.RequestTimeout.Duration
	var termination time.Duration // 0: the cloud's default
	if a.TerminationPollInterval != nil {
		termination = a.TerminationPollInterval.Duration
	}
	switch cloud {
	case notice.CloudAWS:
		return aws.New(aws.Config{Endpoint: a.MetadataEndpoint, PollInterval: poll, TerminationPollInterval: termination, RequestTimeout: timeout,
			Clock: clk, Observer: observer})
	case notice.CloudGCP:
		return gcp.New(gcp.Config{Endpoint: a.MetadataEndpoint, PollInterval: poll, RequestTimeout: timeout, Clock: clk, Observer: observer})
	case notice.CloudAzure:
		return azure.New(azure.Config{Endpoint: a.MetadataEndpoint, PollInterval: poll, TerminationPollInterval: termination, RequestTimeout: timeout,
			Clock: clk, Observer: observer, ProviderID: node.Spec.ProviderID})
	}
	return nil, fmt.Errorf("unknown cloud %q: want aws, gcp or azure", cloud)
}

// serveHealth serves /healthz and /readyz of monitor on
// agent.healthProbeBindAddress, over plain HTTP: the kubelet probes them.
func serveHealth(ctx context.Context, a v1alpha1.AgentConfig, monitor *health.Monitor) error {
	if a.HealthProbeBindAddress == "0" {
		return nil
	}
	if _, err := metricsauth.Serve(ctx, metricsauth.ServeOptions{Addr: a.HealthProbeBindAddress}, health.Handler(monitor.Ready)); err != nil {
		return fmt.Errorf("serving health probes: %w (set --health-probe-bind-address)", err)
	}
	return nil
}

// serveMetrics serves reg as a's metrics settings say (docs/metrics.md): by
// default HTTPS, each request checked with the apiserver through client.
func serveMetrics(ctx context.Context, a v1alpha1.AgentConfig, client kubernetes.Interface, reg *prometheus.Registry) error {
	if a.MetricsBindAddress == "0" {
		return nil
	}
	opts := metricsauth.ServeOptions{Addr: a.MetricsBindAddress, CertDir: a.MetricsCertDir}
	if a.MetricsAuthentication == v1alpha1.MetricsAuthKubernetes {
		opts.Client = client
	} else {
		metricsauth.WarnIfExposed(klog.FromContext(ctx), "agent.metricsAuthentication", a.MetricsBindAddress)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if _, err := metricsauth.Serve(ctx, opts, mux); err != nil {
		return fmt.Errorf("serving metrics: %w (set --metrics-bind-address)", err)
	}
	return nil
}
