package health

import "github.com/prometheus/client_golang/prometheus"

// Label names.
const (
	labelCloud = "cloud"
	labelPath  = "path"
)

// Metrics are the agent's metrics of its reads of the metadata service. Each
// agent process makes one set (NewMetrics) and registers it.
type Metrics struct {
	errors      *prometheus.CounterVec
	lastSuccess *prometheus.GaugeVec
}

// NewMetrics returns the metrics, unregistered. Their path label takes the
// few URL paths a source reads (notice.Paths), never a URL with its query.
func NewMetrics() *Metrics {
	return &Metrics{
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "spotter", Subsystem: "agent", Name: "metadata_errors_total",
			Help: "Failed reads of the cloud's metadata service, by cloud and URL path (the notice paths, the AWS IMDSv2 token, the Azure VM name): no answer, an unexpected status, or an answer that could not be read.",
		}, []string{labelCloud, labelPath}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "spotter", Subsystem: "agent", Name: "metadata_last_success_timestamp_seconds",
			Help: "When a notice path of the metadata service was last read well (a long poll that timed out unchanged included), in seconds since the Unix epoch; 0 until the first good read.",
		}, []string{labelCloud, labelPath}),
	}
}

// MustRegister registers the metrics with reg.
func (m *Metrics) MustRegister(reg prometheus.Registerer) {
	reg.MustRegister(m.errors, m.lastSuccess)
}
