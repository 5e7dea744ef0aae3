package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The chart lints (strict) and renders, with helm built from Helm's Go module,
// to the golden manifests of testdata/chart/render for the default values, each
// cloud and the monitoring objects; UPDATE_GOLDEN=1 rewrites them.
func TestChartRender(t *testing.T) {
	if testing.Short() {
		t.Skip("builds helm; skipped with -short")
	}
	cases, err := filepath.Glob("testdata/chart/render/*.yaml")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no values in testdata/chart/render: %v", err)
	}
	for _, values := range cases {
		name := strings.TrimSuffix(filepath.Base(values), ".yaml")
		t.Run(name, func(t *testing.T) {
			if out, err := runHelm(t, nil, "lint", "--strict", chartDir, "--values", values); err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
			got, err := runHelm(t, nil, "template", chartRelease, chartDir, "--namespace", chartNS, "--values", values)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, got)
			}
			golden := filepath.Join("testdata/chart/render", name+".golden")
			if os.Getenv("UPDATE_GOLDEN") != "" {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (UPDATE_GOLDEN=1 writes it)", err)
			}
			if got != string(want) {
				t.Errorf("helm template with %s differs from %s (UPDATE_GOLDEN=1 rewrites it):\n%s", values, golden, firstDiff(string(want), got))
			}
		})
	}
}

// Bad values are refused by helm itself, through the chart's schema, with a
// message that names the value.
func TestChartRefusesBadValues(t *testing.T) {
	if testing.Short() {
		t.Skip("builds helm; skipped with -short")
	}
	for _, tc := range []struct {
		set, want string
		kube      string // --kube-version; empty: helm's own
	}{
		{set: "image.repository=", want: "image/repository"},
		{set: "controller.replicas=two", want: "controller/replicas"},
		{set: "controler.replicas=2", want: "controler"},
		{set: "agent.cloud=aliyun", want: "agent/cloud"},
		{set: "agent.hostNetwork=yes", want: "agent/hostNetwork"},
		{set: "config.rescheduler.intervall=1m", want: "intervall"},
		{set: "controller.serviceAccount.name=spotter,agent.serviceAccount.name=spotter", want: `the controller and the agent would both run as the ServiceAccount "spotter"`},
		{set: "controller.serviceAccount.create=false,agent.serviceAccount.create=false", want: `both run as the ServiceAccount "default"`},
		{set: "agent.enabled=true", kube: "1.31.9", want: "Spotter needs Kubernetes 1.32 or later, this cluster is v1.31.9: the agent's admission policies"},
		{set: "config.spotFirst.enabled=true", kube: "1.35.2", want: "config.spotFirst.enabled needs Kubernetes 1.36 or later, this cluster is v1.35.2: the scheduling gate"},
	} {
		t.Run(tc.set+tc.kube, func(t *testing.T) {
			set := tc.set
			if !strings.HasPrefix(set, "image.repository") {
				set += ",image.repository=spotter"
			}
			args := []string{"template", chartRelease, chartDir, "--set", set}
			if tc.kube != "" {
				args = append(args, "--kube-version", tc.kube)
			}
			out, err := runHelm(t, nil, args...)
			if err == nil {
				t.Fatalf("helm template --set %s succeeded, want refused", tc.set)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("helm template --set %s: the message does not name %q:\n%s", tc.set, tc.want, out)
			}
		})
	}
}

// firstDiff shows the first line where got differs from want, with context.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + wl + "\n  got:  " + gl
		}
	}
	return "(same lines, different endings)"
}
