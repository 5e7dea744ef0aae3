package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// ServiceAccountToken creates the ServiceAccount default/name (if missing) and
// returns a token of it from the TokenRequest API, valid for an hour (the same
// token on later calls). With metricsReader, the account is also bound to a
// ClusterRole that may get the non-resource URL /metrics, as a Prometheus
// server's would be.
func (e *Env) ServiceAccountToken(name string, metricsReader bool) string {
	e.t.Helper()
	e.tokensMu.Lock()
	defer e.tokensMu.Unlock()
	if tok, ok := e.tokens[name]; ok {
		return tok
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	if _, err := e.Client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatalf("creating ServiceAccount %s: %v", name, err)
	}
	if metricsReader {
		role := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader"},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
		}
		if _, err := e.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			e.t.Fatalf("creating ClusterRole: %v", err)
		}
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "test-metrics-reader-" + name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "default"}},
		}
		if _, err := e.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			e.t.Fatalf("creating ClusterRoleBinding: %v", err)
		}
	}
	tr, err := e.Client.CoreV1().ServiceAccounts("default").CreateToken(ctx, name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("requesting a token of %s: %v", name, err)
	}
	if e.tokens == nil {
		e.tokens = map[string]string{}
	}
	e.tokens[name] = tr.Status.Token
	return tr.Status.Token
}

// Scrape GETs url with the bearer token (none when empty) and returns the status
// code and body. HTTPS certificates are not verified: Spotter's metrics
// endpoints serve a self-signed certificate by default.
func Scrape(ctx context.Context, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test endpoints
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, string(body), err
}

// ScrapeContains waits up to timeout until url, read with token, answers 200
// with a body containing want.
func ScrapeContains(t testing.TB, url, token, want string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, fmt.Sprintf("%s to show %q", url, want), func(ctx context.Context) (bool, string, error) {
		code, body, err := Scrape(ctx, url, token)
		if err != nil {
			return false, "", err
		}
		return code == http.StatusOK && strings.Contains(body, want), fmt.Sprintf("HTTP %d", code), nil
	})
}
