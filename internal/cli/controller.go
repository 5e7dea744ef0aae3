package cli

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"spotter.dev/spotter/internal/controller"
	"spotter.dev/spotter/internal/kubeclient"
	"spotter.dev/spotter/internal/metricsauth"
	"spotter.dev/spotter/internal/snapshot"
	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

func newControllerCommand() *cobra.Command {
	var o configOptions
	var kubeconfig, pprofAddr string
	var logs logOptions
	cmd := &cobra.Command{
		Use: "controller [--config F] [--kubeconfig K] [flags]",
		Example: `  spotter controller --config spotter.yaml
  spotter controller --kubeconfig ~/.kube/config --dry-run   # from a workstation, changing nothing`,
		Short: "Run Spotter's controllers in the cluster",
		Long: `Runs the controllers the configuration enables, as one controller-runtime
manager: leader election on a Lease (on by default), /healthz and /readyz,
Prometheus metrics under the namespace "spotter", Kubernetes Events. SIGTERM or
SIGINT stops it gracefully.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.load()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			logger, err := logs.logger(cmd.Flags().Changed("zap-log-level"))
			if err != nil {
				return err
			}
			return runController(ctx, cfg, kubeconfig, pprofAddr, logger)
		},
	}
	o.addFlags(cmd.Flags())
	logs.addFlags(cmd.Flags())
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	cmd.Flags().StringVar(&pprofAddr, "pprof-bind-address", "", "serve Go's profiles (/debug/pprof/) on this address, for diagnosing memory and CPU use; unauthenticated, so bind it to localhost; off when empty")
	return cmd
}

// logOptions are the logging flags of the ecosystem's controllers:
// controller-runtime's --zap-* flags, and -v as klog has it.
type logOptions struct {
	zap       zap.Options
	verbosity int
}

func (l *logOptions) addFlags(fs *pflag.FlagSet) {
	goFlags := flag.NewFlagSet("zap", flag.ContinueOnError)
	l.zap.BindFlags(goFlags)
	fs.AddGoFlagSet(goFlags)
	fs.IntVarP(&l.verbosity, "v", "v", 0, "log verbosity: 0 logs what an operator reads, 1 and more add detail (the same as --zap-log-level=N; JSON lines by default, --zap-encoder=console for text)")
}

// logger builds the logger: JSON lines on stderr unless --zap-encoder=console
// or --zap-devel; -v N raises the verbosity unless --zap-log-level was given.
func (l *logOptions) logger(levelSet bool) (logr.Logger, error) {
	if l.verbosity < 0 {
		return logr.Logger{}, fmt.Errorf("-v %d: verbosity is 0 or more", l.verbosity)
	}
	if !levelSet && l.verbosity > 0 {
		l.zap.Level = zapcore.Level(-l.verbosity)
	}
	return zap.New(zap.UseFlagOptions(&l.zap)), nil
}

func runController(ctx context.Context, cfg *v1alpha1.SpotterConfiguration, kubeconfig, pprofAddr string, logger logr.Logger) error {
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)

	restConfig, err := restConfigFor(kubeconfig)
	if err != nil {
		return err
	}
	kubeclient.Count(restConfig)
	le := cfg.Manager.LeaderElection
	leaseNamespace := controller.LeaseNamespace(le)
	metricsOpts, err := metricsServerOptions(cfg.Manager)
	if err != nil {
		return err
	}
	if cfg.Manager.MetricsAuthentication == v1alpha1.MetricsAuthNone {
		metricsauth.WarnIfExposed(logger, "manager.metricsAuthentication", cfg.Manager.MetricsBindAddress)
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		// The cache keeps what the controllers read (snapshot.Transform).
		Cache:                         cache.Options{DefaultTransform: snapshot.Transform},
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        cfg.Manager.HealthProbeBindAddress,
		PprofBindAddress:              pprofAddr,
		LeaderElection:                *le.Enabled,
		LeaderElectionID:              le.LeaseName,
		LeaderElectionNamespace:       leaseNamespace,
		LeaderElectionReleaseOnCancel: true,
		// Room for a drain in flight to finish (drain.shutdownGracePeriod) and then
		// for its rollback, whose API calls are bounded at 30s.
		GracefulShutdownTimeout: ptr.To(cfg.Drain.ShutdownGracePeriod.Duration + 45*time.Second),
		LeaseDuration:           &le.LeaseDuration.Duration,
		RenewDeadline:           &le.RenewDeadline.Duration,
		RetryPeriod:             &le.RetryPeriod.Duration,
	})
	if err != nil {
		return fmt.Errorf("creating the controller manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	started, err := controller.Setup(ctx, mgr, cfg)
	if err != nil {
		return err
	}
	logger.Info("Starting Spotter", "controllers", started, "leaderElection", *le.Enabled, "lease", leaseNamespace+"/"+le.LeaseName, "dryRun", cfg.DryRun)
	return mgr.Start(ctx)
}

// metricsServerOptions serves the manager's metrics as the configuration says:
// with Kubernetes authentication, over HTTPS through metricsauth's filter (the
// same code guards the agent's metrics).
func metricsServerOptions(mg v1alpha1.ManagerConfig) (metricsserver.Options, error) {
	opts := metricsserver.Options{BindAddress: mg.MetricsBindAddress}
	if mg.MetricsAuthentication != v1alpha1.MetricsAuthKubernetes || mg.MetricsBindAddress == "0" {
		return opts, nil
	}
	tlsConfig, err := metricsauth.TLSConfig(mg.MetricsCertDir)
	if err != nil {
		return opts, fmt.Errorf("manager.metricsCertDir: %w", err)
	}
	opts.SecureServing = true
	opts.TLSOpts = []func(*tls.Config){func(c *tls.Config) {
		c.MinVersion = tlsConfig.MinVersion
		c.Certificates = tlsConfig.Certificates
		c.GetCertificate = tlsConfig.GetCertificate
		if c.GetCertificate == nil {
			// controller-runtime makes its own self-signed pair when
			// GetCertificate is nil; ours is already in Certificates.
			pair := &tlsConfig.Certificates[0]
			c.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return pair, nil }
		}
	}}
	opts.FilterProvider = func(c *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
		client, err := kubernetes.NewForConfigAndClient(c, hc)
		if err != nil {
			return nil, fmt.Errorf("building the client that checks metrics requests: %w", err)
		}
		f := metricsauth.New(metricsauth.Options{Client: client})
		return func(_ logr.Logger, h http.Handler) (http.Handler, error) { return f.Wrap(h), nil }, nil
	}
	return opts, nil
}

func restConfigFor(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		return ctrl.GetConfig()
	}
	c, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", kubeconfig, err)
	}
	return c, nil
}
