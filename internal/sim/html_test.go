package sim

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/sim/simtest"
)

// chromium finds the browser hack/chromium.sh installs.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	t.Skip("chromium not found: run hack/chromium.sh (make test does)")
	return ""
}

func headless(ctx context.Context, t *testing.T, bin string, args ...string) (string, string) {
	t.Helper()
	// The closed network refuses connections: no background traffic, no QUIC.
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0"}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, stderr.String())
	}
	return stdout.String(), stderr.String()
}

// The report opens in a real browser, offline: it renders, every chart is
// there with its series (node counts and pending pods as one panel per run),
// the summary has the packing's and the bound's rows and every run's shares of their savings, and
// the console has no errors. The screenshot is
// kept in $SPOTTER_ARTIFACTS (default: <temp>/spotter-artifacts).
func TestReportRendersInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("opens a browser; skipped with -short")
	}
	bin := chromium(t)
	rep := run(t, simtest.Short(t, 12*time.Hour))
	dir := t.TempDir()
	if _, err := rep.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	page := "file://" + filepath.Join(dir, "report.html")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	dom, logs := headless(ctx, t, bin, "--virtual-time-budget=2000", "--dump-dom", page)
	attr := func(name string) string {
		m := regexp.MustCompile(`<body[^>]*\s` + name + `="([^"]*)"`).FindStringSubmatch(dom)
		if m == nil {
			return ""
		}
		return m[1]
	}
	if attr("data-rendered") != "true" {
		t.Fatalf("the page's script did not run; DOM starts:\n%.500s\n%s", dom, logs)
	}
	if got := attr("data-errors"); got != "0" {
		t.Errorf("%s errors on the console:\n%s", got, logs)
	}
	if strings.Contains(logs, "Uncaught") {
		t.Errorf("uncaught error:\n%s", logs)
	}
	if got := attr("data-charts"); got != "6" {
		t.Errorf("%s charts rendered, want 6", got)
	}
	scatter := regexp.MustCompile(`<svg[^>]*id="saving-evictions"[\s\S]*?</svg>`).FindString(dom)
	if got := strings.Count(scatter, `<circle class="point"`); got != 4 {
		t.Errorf("saving against evictions: %d points, want 4 (the strategies)", got)
	}
	for _, id := range []string{"cost", "spot-share", "capacity", "nodes", "pending"} {
		if !regexp.MustCompile(`<svg[^>]*id="` + id + `"[\s\S]*?<polyline`).MatchString(dom) {
			t.Errorf("chart %s missing or without a series", id)
		}
	}
	// The summary table has the budget and zone spread columns and the
	// shares of the bound's and the packing's saving, a figure for every
	// run, and the packing's and the bound's rows.
	for _, th := range []string{"PDB below budget, pod-minutes</th>", "Zone spread short, zone-minutes</th>", "Evictions refused</th>", "Share of bound</th>", "Share of packing</th>"} {
		if !strings.Contains(dom, th) {
			t.Errorf("the summary lacks the column %q", th)
		}
	}
	for _, class := range []string{"pdb-below", "spread-short"} {
		if got := strings.Count(dom, `<td class="`+class+`">`); got != 7 {
			t.Errorf("%d %s cells, want 7 (baseline, 4 strategies, packing, bound)", got, class)
		}
	}
	shares := regexp.MustCompile(`<td class="packing-share">(\d+)%</td>`).FindAllStringSubmatch(dom, -1)
	if len(shares) != 5 || shares[4][1] != "100" {
		t.Errorf("share of packing cells %v: want the 4 strategies' and the packing's 100%%", shares)
	}
	for i, res := range rep.Results {
		if want := fmt.Sprintf("%.0f", 100**res.PackingShare); i < len(shares) && shares[i][1] != want {
			t.Errorf("%s: share %s%% in the page, %s%% in the report", res.Strategy, shares[i][1], want)
		}
	}
	boundShares := regexp.MustCompile(`<td class="bound-share">(\d+)%</td>`).FindAllStringSubmatch(dom, -1)
	for i, res := range rep.Results {
		if want := fmt.Sprintf("%.0f", 100**res.BoundShare); len(boundShares) != 5 || boundShares[i][1] != want {
			t.Errorf("%s: share of bound %v in the page, %s%% in the report", res.Strategy, boundShares, want)
		}
	}
	for _, row := range []string{"packing", "bound"} {
		if !regexp.MustCompile(`<tr class="hindsight"><td>` + row + `</td>`).MatchString(dom) {
			t.Errorf("no %s row in the summary", row)
		}
	}
	// Node counts and pending pods: one panel per run (baseline, 4
	// strategies, packing), on-demand and spot in each node panel.
	for _, id := range []string{"nodes", "pending"} {
		m := regexp.MustCompile(`<svg[^>]*id="` + id + `"[\s\S]*?</svg>`).FindString(dom)
		if got := strings.Count(m, `<g class="panel"`); got != 6 {
			t.Errorf("%s: %d panels, want 6", id, got)
		}
	}
	// cost: baseline, 4 strategies, the packing and the bound; share: 4
	// and the packing; capacity: 3 zones; nodes: 6 panels of 2; pending: 6.
	if got := attr("data-series"); got != "33" {
		t.Errorf("%s series drawn, want 33", got)
	}

	artifacts := os.Getenv("SPOTTER_ARTIFACTS")
	if artifacts == "" {
		artifacts = filepath.Join(os.TempDir(), "spotter-artifacts")
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(artifacts, "simulate-report.png")
	headless(ctx, t, bin, "--window-size=1000,2000", "--screenshot="+shot, page)
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10000 {
		t.Errorf("screenshot %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)
}
