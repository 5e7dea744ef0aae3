package notice

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// DefaultEndpoint is the link-local address of the AWS, GCP
// (metadata.google.internal) and Azure metadata services.
const DefaultEndpoint = "http://169.254.169.254"

// DefaultDetectTimeout bounds each probe of Detect when its timeout is zero.
const DefaultDetectTimeout = 2 * time.Second

// probe is one cloud's "are you there" request.
type probe struct {
	cloud  string
	method string
	path   string
	header http.Header
	// ok says whether the answer comes from this cloud's metadata service.
	ok func(*http.Response) error
}

// probes are tried concurrently; when more than one answers, the first in this
// order wins.
var probes = []probe{
	{
		// IMDSv2 session token: only the AWS service answers a PUT with a TTL header.
		cloud:  CloudAWS,
		method: http.MethodPut,
		path:   "/latest/api/token",
		header: http.Header{"X-Aws-Ec2-Metadata-Token-Ttl-Seconds": {"60"}},
		ok:     statusOK,
	},
	{
		// The GCP server sends Metadata-Flavor: Google back on every response.
		cloud:  CloudGCP,
		method: http.MethodGet,
		path:   "/computeMetadata/v1/instance/id",
		header: http.Header{"Metadata-Flavor": {"Google"}},
		ok: func(r *http.Response) error {
			if err := statusOK(r); err != nil {
				return err
			}
			if r.Header.Get("Metadata-Flavor") != "Google" {
				return fmt.Errorf("response lacks the header Metadata-Flavor: Google")
			}
			return nil
		},
	},
	{
		// Azure IMDS: needs Metadata: true and an api-version.
		cloud:  CloudAzure,
		method: http.MethodGet,
		path:   "/metadata/instance/compute/name?api-version=2021-02-01&format=text",
		header: http.Header{"Metadata": {"true"}},
		ok:     statusOK,
	},
}

func statusOK(r *http.Response) error {
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP status %s", r.Status)
	}
	return nil
}

// Detect finds the cloud whose metadata service answers, for --cloud auto. It
// probes the AWS, GCP and Azure services concurrently, each with its own
// protocol and at most timeout (DefaultDetectTimeout when zero), at endpoint
// (a base URL such as an emulator's; DefaultEndpoint when empty). It returns
// CloudAWS, CloudGCP or CloudAzure, or an error naming every request tried
// and why it failed. client nil means NewHTTPClient().
func Detect(ctx context.Context, client *http.Client, endpoint string, timeout time.Duration) (string, error) {
	if client == nil {
		client = NewHTTPClient()
	}
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	endpoint = strings.TrimSuffix(endpoint, "/")
	if timeout <= 0 {
		timeout = DefaultDetectTimeout
	}
	errs := make([]error, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Go(func() {
			errs[i] = p.run(ctx, client, endpoint, timeout)
		})
	}
	wg.Wait()
	for i, p := range probes {
		if errs[i] == nil {
			return p.cloud, nil
		}
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("detecting the cloud: %w", err)
	}
	parts := make([]string, len(probes))
	args := make([]any, len(probes))
	for i, p := range probes {
		parts[i] = fmt.Sprintf("%s (%s %s%s): %%w", p.cloud, p.method, endpoint, p.path)
		args[i] = errs[i]
	}
	return "", fmt.Errorf("no cloud metadata service answered; tried "+strings.Join(parts, "; "), args...)
}

func (p probe) run(ctx context.Context, client *http.Client, endpoint string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, p.method, endpoint+p.path, nil)
	if err != nil {
		return err
	}
	for k, v := range p.header {
		req.Header.Set(k, v[0])
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return p.ok(resp)
}
