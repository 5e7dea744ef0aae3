// Package notice defines what the node agent's interruption-notice sources
// report (Notice), the interface they implement (Source), and Detect, which
// finds the cloud whose metadata service answers on this machine.
//
// The sources live next to it, one package per cloud: internal/agent/aws,
// internal/agent/gcp and internal/agent/azure.
package notice

import (
	"context"
	"net"
	"net/http"
	"time"
)

// Names of the clouds, as in Notice.Cloud and Source.Cloud. They match the
// agent's configuration values (v1alpha1.CloudAWS, ...).
const (
	CloudAWS   = "aws"
	CloudGCP   = "gcp"
	CloudAzure = "azure"
)

// Kind classifies a notice by what it means for the node.
type Kind string

// Kinds of notices.
const (
	// Termination: the instance goes away (AWS spot instance-action terminate,
	// stop or hibernate, AWS Auto Scaling target-lifecycle-state Terminated, GCP
	// preempted=TRUE, Azure Preempt and Terminate).
	Termination Kind = "termination"
	// Rebalance: the instance is at elevated risk of interruption (AWS rebalance
	// recommendation). Advisory; no deadline.
	Rebalance Kind = "rebalance"
	// Maintenance: the platform will reboot, pause, migrate or retire the
	// instance (AWS scheduled events, GCP maintenance-event other than NONE,
	// Azure Reboot, Redeploy and Freeze).
	Maintenance Kind = "maintenance"
)

// Notice is one interruption notice as a source saw it. A source sends a
// Notice when it first sees an event and again whenever one of its fields
// changes (for example when the event ends); the pair (Cloud, ID) names the
// event across those sends.
type Notice struct {
	// Cloud is the cloud that issued the notice: aws, gcp or azure.
	Cloud string
	// Kind says what the notice means for the node.
	Kind Kind
	// ID is stable for one event; use it to dedupe and to acknowledge. AWS:
	// "spot/instance-action", "rebalance", "autoscaling/target-lifecycle-state"
	// or the scheduled event's EventId. GCP: "gcp/preempted" or
	// "gcp/maintenance-event". Azure: the EventId.
	ID string
	// Action is the cloud's own word for what will happen: terminate, stop,
	// hibernate, Terminated, system-reboot (AWS); preempted,
	// TERMINATE_ON_HOST_MAINTENANCE, MIGRATE_ON_HOST_MAINTENANCE (GCP);
	// Preempt, Terminate, Reboot, Redeploy, Freeze (Azure).
	Action string
	// Deadline is when the instance goes away or the event starts. Zero when the
	// cloud gives none (AWS rebalance recommendation). See each source for how it
	// is derived when the cloud only says "soon".
	Deadline time.Time
	// Ended says that the event was canceled, completed or withdrawn: an AWS
	// scheduled event canceled or completed, an AWS item gone from the metadata,
	// an Azure event gone from the document, GCP maintenance back to NONE.
	Ended bool
	// Detail is a human-readable description for Events and logs.
	Detail string
}

// Source watches one cloud's metadata service for interruption notices.
type Source interface {
	// Cloud returns the cloud this source watches: aws, gcp or azure.
	Cloud() string
	// Watch polls (or long-polls) the metadata service until ctx ends. It sends
	// a notice on out when it first sees an event and again when the notice
	// changes (for example Ended); an unchanged, repeated observation is not
	// resent. Transient errors are logged with the logger from ctx and retried
	// with backoff, and so are wrong answers (an answer that is not the
	// metadata service's, a malformed document): exiting would make the
	// DaemonSet restart the agent over and over, through the notice. Watch
	// returns nil when ctx ends, or an error on a permanent misconfiguration
	// only. It never closes out.
	Watch(ctx context.Context, out chan<- Notice) error
	// Probe reads each of the source's paths once, with the requests Watch
	// makes, and returns nil when every answer was understood, else an error
	// that names the URL of each read that failed (`spotter-agent --check`).
	// It sends no notice.
	Probe(ctx context.Context) error
	// Paths returns the metadata paths the source reads.
	Paths() Paths
}

// Paths are the URL paths, without the query, that a Source reads: a few
// constants per cloud, so that they can label metrics.
type Paths struct {
	// Notices carry the notices: each is read every poll, or long-polled.
	Notices []string
	// Others are read now and then, to be able to read the notices: the AWS
	// session token (every few hours), the Azure VM's name (at start, when the
	// node's provider ID does not give it).
	Others []string
}

// ReadObserver learns the outcome of every read a Source makes of the
// metadata service, so that the agent can tell whether it sees its notices
// (internal/agent/health). path is one of the source's
// Paths; err is nil when the answer was understood (an AWS 404 for an item
// that is absent among them), else why the read failed: no answer, an
// unexpected status, an answer that is not the metadata service's or that
// cannot be parsed. A read cut short because the watch ends is not observed.
// ObserveRead must be safe for concurrent use (GCP reads its keys
// concurrently) and must not block.
type ReadObserver interface {
	ObserveRead(path string, err error)
}

// Acknowledger is implemented by sources whose cloud lets the node approve an
// event so that it may start early (Azure Scheduled Events).
type Acknowledger interface {
	// Acknowledge approves the event n names. n must come from the same source.
	Acknowledge(ctx context.Context, n Notice) error
}

// NewHTTPClient returns an HTTP client for link-local metadata services. It
// never uses a proxy (HTTP_PROXY must not capture 169.254.169.254, and the
// AWS and Azure services refuse proxied requests) and does not follow
// redirects: a metadata service does not send any.
func NewHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:          4,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       90 * time.Second,
			ResponseHeaderTimeout: 0, // long-polls (GCP) wait for headers; requests carry their own deadline
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
