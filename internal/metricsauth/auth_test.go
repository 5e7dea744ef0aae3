package metricsauth

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// reviews answers TokenReviews and SubjectAccessReviews from two maps and
// counts them: the cache logic is pure, so a fake clientset serves here; the
// real apiserver's answers are tested in serve_test.go.
type reviews struct {
	users                       map[string]string // token -> user
	allowed                     map[string]bool   // user -> may get /metrics
	tokenReviews, accessReviews int
}

func (r *reviews) client() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r.tokenReviews++
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		if u, ok := r.users[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: u}}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r.accessReviews++
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		na := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = r.allowed[sar.Spec.User] && na != nil && na.Path == "/metrics" && na.Verb == "get"
		return true, sar, nil
	})
	return c
}

func get(t *testing.T, h http.Handler, path, token string) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func TestFilterDecisions(t *testing.T) {
	r := &reviews{users: map[string]string{"good": "prometheus", "weak": "someone"}, allowed: map[string]bool{"prometheus": true}}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) })
	h := New(Options{Client: r.client()}).Wrap(ok)
	for _, tc := range []struct {
		name, path, token string
		want              int
	}{
		{"no token", "/metrics", "", http.StatusUnauthorized},
		{"unknown token", "/metrics", "forged", http.StatusUnauthorized},
		{"token without permission", "/metrics", "weak", http.StatusForbidden},
		{"allowed", "/metrics", "good", http.StatusOK},
		{"allowed identity, other path", "/debug", "good", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := get(t, h, tc.path, tc.token); got != tc.want {
				t.Errorf("GET %s with token %q: %d, want %d", tc.path, tc.token, got, tc.want)
			}
		})
	}
}

func TestFilterCachesWithinTTL(t *testing.T) {
	r := &reviews{users: map[string]string{"good": "prometheus", "weak": "someone"}, allowed: map[string]bool{"prometheus": true}}
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	h := New(Options{Client: r.client(), Clock: clk}).Wrap(http.NotFoundHandler())
	for range 10 {
		get(t, h, "/metrics", "good")
		get(t, h, "/metrics", "weak")
	}
	if r.tokenReviews != 2 || r.accessReviews != 2 {
		t.Fatalf("20 requests of two tokens sent %d TokenReviews and %d SubjectAccessReviews, want 2 and 2", r.tokenReviews, r.accessReviews)
	}
	// A refusal is reconsidered sooner than an allowance: a new RoleBinding takes
	// effect within DefaultDenyTTL, a removed one within DefaultAllowTTL.
	clk.SetTime(clk.Now().Add(DefaultDenyTTL))
	get(t, h, "/metrics", "good")
	get(t, h, "/metrics", "weak")
	if r.tokenReviews != 3 {
		t.Errorf("after the deny TTL, %d TokenReviews, want 3 (only the refused token asked again)", r.tokenReviews)
	}
	r.allowed["prometheus"] = false
	clk.SetTime(clk.Now().Add(DefaultAllowTTL))
	if got := get(t, h, "/metrics", "good"); got != http.StatusForbidden {
		t.Errorf("after the allow TTL, a revoked identity got %d, want 403", got)
	}
}

func TestFilterCacheIsBounded(t *testing.T) {
	r := &reviews{users: map[string]string{}, allowed: map[string]bool{}}
	f := New(Options{Client: r.client(), MaxEntries: 8})
	h := f.Wrap(http.NotFoundHandler())
	for i := range 1000 {
		get(t, h, "/metrics", string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	if n := len(f.cache); n > 8 {
		t.Fatalf("cache holds %d decisions after 1,000 distinct tokens, want at most 8", n)
	}
}

func TestFilterDoesNotCacheErrors(t *testing.T) {
	r := &reviews{}
	c := r.client()
	fail := true
	c.PrependReactor("create", "tokenreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail {
			return true, nil, http.ErrHandlerTimeout
		}
		return false, nil, nil
	})
	r.users = map[string]string{"good": "prometheus"}
	r.allowed = map[string]bool{"prometheus": true}
	h := New(Options{Client: c}).Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if got := get(t, h, "/metrics", "good"); got != http.StatusInternalServerError {
		t.Fatalf("apiserver down: %d, want 500", got)
	}
	fail = false
	if got := get(t, h, "/metrics", "good"); got != http.StatusOK {
		t.Fatalf("apiserver back: %d, want 200 (the error must not be cached)", got)
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:1": true, "[::1]:9": true,
		":8080": false, "0.0.0.0:8080": false, "10.0.0.1:8080": false, "nonsense": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
