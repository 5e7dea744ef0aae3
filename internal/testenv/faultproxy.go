package testenv

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"spotter.dev/spotter/internal/kubeclient"
)

// FaultProxy is a reverse proxy in front of a lab's kube-apiserver that
// injects faults into what passes through it: answers 429 with Retry-After,
// 500 and 503, requests held past a timeout, watch streams cut. A process
// given its Kubeconfig reaches the apiserver only through it; the test's own
// client (Env.Client) goes direct, so it sees the cluster as it is.
//
// It serves HTTPS (HTTP/2, as the apiserver) with a self-signed certificate
// that its kubeconfig trusts, and forwards with the lab's admin credentials.
// Which request gets which fault is drawn from a random source seeded by the
// test, in arrival order; a schedule (FailNext) takes precedence over the
// draws. It counts requests by verb (kubeclient.Verb) in every one-second
// window, so that a test can bound the rate a client sends at: a tight retry
// loop shows as hundreds per second.
type FaultProxy struct {
	// Kubeconfig reaches the apiserver through the proxy.
	Kubeconfig string
	// URL is the proxy's address.
	URL string

	srv   *httptest.Server
	proxy *httputil.ReverseProxy

	mu       sync.Mutex
	faults   Faults
	rng      *rand.Rand
	next     []Fault                // scheduled faults, first next
	recent   map[string][]time.Time // arrival times of the last second, by verb
	peak     map[string]int         // most requests in one second, by verb
	peakAt   map[string]time.Time
	total    map[string]int
	injected map[Fault]int
	// injectedOn counts the faults injected by request (see RequestOf), and
	// nextOn holds the faults scheduled for a request.
	injectedOn map[string]int
	nextOn     map[string][]Fault
}

// Fault is what the proxy does to one request.
type Fault string

// Faults the proxy injects.
const (
	// Pass forwards the request.
	Pass Fault = ""
	// TooManyRequests answers 429 with a Retry-After of Faults.RetryAfter, as
	// the apiserver's priority and fairness does when a level is full.
	TooManyRequests Fault = "429"
	// InternalError answers 500, as an apiserver whose etcd call failed.
	InternalError Fault = "500"
	// Unavailable answers 503 with Retry-After, as an apiserver shutting down
	// or a load balancer without a backend.
	Unavailable Fault = "503"
	// Hold holds the request for Faults.HoldFor (or until the client gives up)
	// and then answers 504 Timeout, as the apiserver does when a request
	// outlives its --request-timeout. Every other held request is forwarded
	// before it is held: its effect happens, and the client is not told.
	Hold Fault = "hold"
	// CutWatch is counted each time a watch stream is cut (Faults.WatchLifetime).
	CutWatch Fault = "cut-watch"
)

// Faults says which faults the proxy injects, and how often. The zero value
// injects none.
type Faults struct {
	// TooManyRequests, InternalError, Unavailable and Hold are the fractions
	// (0 to 1, summed at most 1) of requests that get each fault.
	TooManyRequests, InternalError, Unavailable, Hold float64
	// RetryAfter is the Retry-After of 429 and 503 answers. Default 1s.
	RetryAfter time.Duration
	// HoldFor is how long a held request is held. Default 10s.
	HoldFor time.Duration
	// WatchLifetime, when set, cuts every watch stream that long after it
	// began: the connection's stream is reset mid-response, as when a load
	// balancer or the apiserver goes away.
	WatchLifetime time.Duration
	// Verbs, when set, limits the fractions to these verbs (get, list, watch,
	// create, update, patch, delete; see kubeclient.Verb). Evictions are
	// creates.
	Verbs []string
}

// StartFaultProxy starts a fault proxy in front of the lab's apiserver,
// injecting no faults until SetFaults, with its draws seeded by seed. It stops
// with the test.
func (e *Env) StartFaultProxy(seed uint64) *FaultProxy {
	e.t.Helper()
	upstream, err := url.Parse(e.Server)
	if err != nil {
		e.t.Fatal(err)
	}
	transport, err := rest.TransportFor(rest.CopyConfig(e.Config))
	if err != nil {
		e.t.Fatalf("fault proxy transport: %v", err)
	}
	p := &FaultProxy{
		rng:        rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		recent:     map[string][]time.Time{},
		peak:       map[string]int{},
		peakAt:     map[string]time.Time{},
		total:      map[string]int{},
		injected:   map[Fault]int{},
		injectedOn: map[string]int{},
		nextOn:     map[string][]Fault{},
	}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(upstream)
			r.Out.Host = upstream.Host
		},
		Transport:     transport,
		FlushInterval: -1, // watches stream
		// A cut watch aborts its copy; that is the point, not news.
		ErrorLog: log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// The apiserver is unreachable (restarting): the client sees
			// its connection fail, as it would without the proxy.
			panic(http.ErrAbortHandler)
		},
	}
	p.srv = httptest.NewUnstartedServer(http.HandlerFunc(p.serve))
	p.srv.EnableHTTP2 = true
	p.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	p.srv.StartTLS()
	e.t.Cleanup(p.srv.Close)
	p.URL = p.srv.URL

	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw})
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.URL, CertificateAuthorityData: ca}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	p.Kubeconfig = filepath.Join(e.t.TempDir(), "faultproxy.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p.Kubeconfig); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// SetFaults replaces the faults injected from now on. Requests already held
// or watches already running keep the faults they were given.
func (p *FaultProxy) SetFaults(f Faults) {
	if f.RetryAfter == 0 {
		f.RetryAfter = time.Second
	}
	if f.HoldFor == 0 {
		f.HoldFor = 10 * time.Second
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
}

// FailNext schedules faults for the next requests of the verbs of the
// current Faults (all verbs when it names none), one each, in order, before
// any drawn fault.
func (p *FaultProxy) FailNext(faults ...Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = append(p.next, faults...)
}

// FailNextOn schedules faults for the next requests of one kind, named as
// RequestOf names it ("create pods/eviction", "update nodes"), one each, in
// order, before any other fault and whatever the current Faults say: a test
// makes sure a fault meets the request it is about.
func (p *FaultProxy) FailNextOn(request string, faults ...Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextOn[request] = append(p.nextOn[request], faults...)
}

// InjectedOn returns how many faults were injected, by request (see
// RequestOf): which requests the faults met.
func (p *FaultProxy) InjectedOn() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.injectedOn)
}

// RequestOf names an API request by its verb (kubeclient.Verb) and resource,
// with its subresource: "create pods/eviction", "update nodes", "watch
// pods", "create events".
func RequestOf(r *http.Request) string {
	return kubeclient.Verb(r) + " " + kubeclient.Resource(r.URL.Path)
}

// Injected returns how many times each fault was injected.
func (p *FaultProxy) Injected() map[Fault]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[Fault]int, len(p.injected))
	for k, v := range p.injected {
		out[k] = v
	}
	return out
}

// Rate is what the proxy saw of one verb.
type Rate struct {
	// Total is the number of requests.
	Total int
	// Peak is the most requests that arrived within one second, and PeakAt
	// when the last of them arrived.
	Peak   int
	PeakAt time.Time
}

// Rates returns what the proxy saw, by verb.
func (p *FaultProxy) Rates() map[string]Rate {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]Rate{}
	for verb, n := range p.total {
		out[verb] = Rate{Total: n, Peak: p.peak[verb], PeakAt: p.peakAt[verb]}
	}
	return out
}

// ResetRates forgets the requests counted so far (the start-up's LISTs, say).
func (p *FaultProxy) ResetRates() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.recent)
	clear(p.peak)
	clear(p.peakAt)
	clear(p.total)
}

// AllVerbs is the key of Rates and AssertRate that counts every request.
const AllVerbs = "all"

// count counts an arrival of key at now. It keeps the arrivals of the last
// second, this one included: the count of every window that ends at an
// arrival, hence the most of any one-second window.
func (p *FaultProxy) count(key string, now time.Time) {
	p.total[key]++
	recent := p.recent[key]
	i := 0
	for i < len(recent) && now.Sub(recent[i]) >= time.Second {
		i++
	}
	recent = append(recent[i:], now)
	p.recent[key] = recent
	if len(recent) > p.peak[key] {
		p.peak[key], p.peakAt[key] = len(recent), now
	}
}

// admit counts a request of verb, named request (see RequestOf), and draws
// its fault.
func (p *FaultProxy) admit(verb, request string, now time.Time) (Fault, Faults, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.count(verb, now)
	p.count(AllVerbs, now)

	f := p.faults
	fault := Pass
	switch scheduled := p.nextOn[request]; {
	case len(scheduled) > 0:
		fault, p.nextOn[request] = scheduled[0], scheduled[1:]
	case len(f.Verbs) > 0 && !slices.Contains(f.Verbs, verb):
		return Pass, f, false
	case len(p.next) > 0:
		fault, p.next = p.next[0], p.next[1:]
	default:
		x := p.rng.Float64()
		for _, c := range []struct {
			fault Fault
			share float64
		}{{TooManyRequests, f.TooManyRequests}, {InternalError, f.InternalError}, {Unavailable, f.Unavailable}, {Hold, f.Hold}} {
			if x < c.share {
				fault = c.fault
				break
			}
			x -= c.share
		}
	}
	forward := false
	if fault == Hold {
		forward = p.rng.IntN(2) == 0
	}
	if fault != Pass {
		p.injected[fault]++
		p.injectedOn[request]++
	}
	return fault, f, forward
}

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request) {
	verb, request := kubeclient.Verb(r), RequestOf(r)
	fault, f, forward := p.admit(verb, request, time.Now())
	switch fault {
	case TooManyRequests:
		writeStatus(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "the fault proxy's injected 429", f.RetryAfter)
		return
	case InternalError:
		writeStatus(w, http.StatusInternalServerError, metav1.StatusReasonInternalError, "the fault proxy's injected 500", 0)
		return
	case Unavailable:
		writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the fault proxy's injected 503", f.RetryAfter)
		return
	case Hold:
		if forward && verb != "watch" {
			p.forwardAndDrop(r, f.HoldFor)
		}
		select {
		case <-time.After(f.HoldFor):
		case <-r.Context().Done():
			return
		}
		writeStatus(w, http.StatusGatewayTimeout, metav1.StatusReasonTimeout, "Timeout: request did not complete within the allotted timeout (the fault proxy held it)", 0)
		return
	}
	if verb == "watch" && f.WatchLifetime > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), f.WatchLifetime)
		defer cancel()
		r = r.WithContext(ctx)
		defer func() {
			if ctx.Err() == context.DeadlineExceeded {
				p.mu.Lock()
				p.injected[CutWatch]++
				p.injectedOn[request]++
				p.mu.Unlock()
				// The stream ends without its closing chunk: the client sees
				// its connection reset, not a clean end of the watch.
				panic(http.ErrAbortHandler)
			}
		}()
	}
	p.proxy.ServeHTTP(w, r)
}

// forwardAndDrop sends r to the apiserver and drops the answer: the
// request's effect happens, and its client is not told.
func (p *FaultProxy) forwardAndDrop(r *http.Request, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), timeout)
	defer cancel()
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler { //nolint:errorlint // ErrAbortHandler is a sentinel value
			panic(v)
		}
	}()
	p.proxy.ServeHTTP(discard{header: http.Header{}}, r.Clone(ctx))
}

// writeStatus answers as the apiserver does: a Status object, and
// Retry-After in whole seconds when retryAfter is set.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string, retryAfter time.Duration) {
	status := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: message,
	}
	if retryAfter > 0 {
		secs := max(int(retryAfter/time.Second), 1)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		status.Details = &metav1.StatusDetails{RetryAfterSeconds: int32(secs)}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(status)
}

// discard is a ResponseWriter that drops what it is given.
type discard struct{ header http.Header }

func (d discard) Header() http.Header         { return d.header }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}

// AssertRate fails the test if more than limit requests of verb arrived
// within one second (all verbs together when verb is ""), and logs what the
// proxy saw.
func (p *FaultProxy) AssertRate(t testing.TB, verb string, limit int) {
	t.Helper()
	rates := p.Rates()
	verbs := slices.Sorted(maps.Keys(rates))
	var line string
	for _, v := range verbs {
		line += fmt.Sprintf(" %s %d (peak %d/s)", v, rates[v].Total, rates[v].Peak)
	}
	t.Logf("requests through the fault proxy:%s; faults injected %v", line, p.Injected())
	if r := rates[verb]; r.Peak > limit {
		t.Errorf("%d %s requests within one second (at %s): more than %d, a retry loop without a wait", r.Peak, verb, r.PeakAt.Format("15:04:05.000"), limit)
	}
}
