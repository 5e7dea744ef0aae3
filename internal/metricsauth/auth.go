// Package metricsauth guards Spotter's metrics endpoints, in the controller and
// in the node agent alike: HTTPS (tls.go), and every request authenticated with
// a TokenReview and authorized with a SubjectAccessReview against the
// apiserver, as controller-runtime's metrics filters and kube-rbac-proxy do. A
// scraper needs a bearer token of an identity allowed to `get` the non-resource
// URL /metrics; the process serving needs `create` on tokenreviews
// (authentication.k8s.io) and subjectaccessreviews (authorization.k8s.io).
//
// It uses client-go only, so the agent stays lean. Decisions are cached
// (allowed for a minute, refused for ten seconds, at most MaxEntries of them),
// so a scraper every 15 s costs the apiserver two reviews a minute at most.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	DefaultAllowTTL   = time.Minute
	DefaultDenyTTL    = 10 * time.Second
	DefaultMaxEntries = 1024
	// reviewTimeout bounds one TokenReview or SubjectAccessReview.
	reviewTimeout = 10 * time.Second
)

// Options configures a Filter.
type Options struct {
	// Client sends the TokenReviews and SubjectAccessReviews.
	Client kubernetes.Interface
	// AllowTTL is how long an allowed decision is reused. Default DefaultAllowTTL.
	AllowTTL time.Duration
	// DenyTTL is how long a refusal (unknown token, no permission) is reused.
	// Default DefaultDenyTTL.
	DenyTTL time.Duration
	// MaxEntries bounds the decision cache. Default DefaultMaxEntries.
	MaxEntries int
	// Clock dates the cached decisions; nil means the real clock.
	Clock clock.PassiveClock
}

// Filter authenticates and authorizes requests before they reach a handler.
type Filter struct {
	opts  Options
	mu    sync.Mutex
	cache map[[sha256.Size]byte]decision
}

type decision struct {
	status int // http.StatusOK, StatusUnauthorized or StatusForbidden
	user   string
	until  time.Time
}

// New returns a Filter with opts' defaults filled in.
func New(opts Options) *Filter {
	if opts.AllowTTL <= 0 {
		opts.AllowTTL = DefaultAllowTTL
	}
	if opts.DenyTTL <= 0 {
		opts.DenyTTL = DefaultDenyTTL
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Filter{opts: opts, cache: map[[sha256.Size]byte]decision{}}
}

// Wrap returns a handler that serves next only to callers whose bearer token
// the apiserver accepts and who may `get` (the request's method, lower case)
// the request's path: 401 without a valid token, 403 without the permission,
// 500 when the apiserver cannot be asked (not cached).
func (f *Filter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="spotter metrics"`)
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		d, err := f.decide(r.Context(), token, strings.ToLower(r.Method), r.URL.Path)
		if err != nil {
			klog.FromContext(r.Context()).Error(err, "Cannot check a metrics request with the apiserver", "path", r.URL.Path)
			http.Error(w, "Internal error: cannot check the request with the Kubernetes apiserver", http.StatusInternalServerError)
			return
		}
		switch d.status {
		case http.StatusOK:
			next.ServeHTTP(w, r)
		case http.StatusUnauthorized:
			w.Header().Set("WWW-Authenticate", `Bearer realm="spotter metrics"`)
			http.Error(w, "Unauthorized: the token is not valid", http.StatusUnauthorized)
		default:
			http.Error(w, fmt.Sprintf("Forbidden: %s may not %s %s (grant the verb on the non-resource URL)", d.user, strings.ToLower(r.Method), r.URL.Path), http.StatusForbidden)
		}
	})
}

// bearer returns the token of an "Authorization: Bearer" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func (f *Filter) decide(ctx context.Context, token, verb, path string) (decision, error) {
	// The key holds a hash, never the token itself.
	key := sha256.Sum256([]byte(verb + "\x00" + path + "\x00" + token))
	now := f.opts.Clock.Now()
	f.mu.Lock()
	d, ok := f.cache[key]
	f.mu.Unlock()
	if ok && now.Before(d.until) {
		return d, nil
	}
	d, err := f.review(ctx, token, verb, path)
	if err != nil {
		return decision{}, err
	}
	ttl := f.opts.DenyTTL
	if d.status == http.StatusOK {
		ttl = f.opts.AllowTTL
	}
	d.until = now.Add(ttl)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.cache) >= f.opts.MaxEntries {
		for k, old := range f.cache {
			if !now.Before(old.until) {
				delete(f.cache, k)
			}
		}
		if len(f.cache) >= f.opts.MaxEntries {
			clear(f.cache) // many live tokens at once: start over rather than grow
		}
	}
	f.cache[key] = d
	return d, nil
}

func (f *Filter) review(ctx context.Context, token, verb, path string) (decision, error) {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	tr, err := f.opts.Client.AuthenticationV1().TokenReviews().Create(ctx,
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("creating a TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return decision{status: http.StatusUnauthorized}, nil
	}
	u := tr.Status.User
	extra := make(map[string]authzv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := f.opts.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("creating a SubjectAccessReview for %s: %w", u.Username, err)
	}
	if !sar.Status.Allowed {
		return decision{status: http.StatusForbidden, user: u.Username}, nil
	}
	return decision{status: http.StatusOK, user: u.Username}, nil
}
