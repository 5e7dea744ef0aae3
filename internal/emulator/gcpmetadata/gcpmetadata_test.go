package gcpmetadata

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/emulator/internal/emulatortest"
)

// answer is a response read in full.
type answer = emulatortest.Answer

func get(t *testing.T, url string, header bool) (answer, string) {
	t.Helper()
	var h map[string]string
	if header {
		h = map[string]string{"Metadata-Flavor": "Google"}
	}
	return emulatortest.Do(t, http.MethodGet, url, h, "")
}

func start(t *testing.T, opts Options) (*Server, string) {
	s := New(opts)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Cleanup(s.Close)
	return s, srv.URL
}

func TestHeaders(t *testing.T) {
	_, url := start(t, Options{})
	resp, _ := get(t, url+PreemptedPath, false)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Metadata-Flavor") != "Google" {
		t.Errorf("without the header: %s, Metadata-Flavor %q; want 403 and Google", resp.Status, resp.Header.Get("Metadata-Flavor"))
	}
	resp, body := get(t, url+PreemptedPath, true)
	if resp.StatusCode != http.StatusOK || body != "FALSE" || resp.Header.Get("Metadata-Flavor") != "Google" || resp.Header.Get("ETag") != ETag("FALSE") {
		t.Errorf("with the header: %s %q, headers %v", resp.Status, body, resp.Header)
	}
	if resp, _ := get(t, url+Prefix+"instance/nope", true); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown key: %s, want 404", resp.Status)
	}
	if resp, _ := get(t, url+PreemptedPath+"?wait_for_change=true&timeout_sec=0", true); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("timeout_sec=0: %s, want 400", resp.Status)
	}
}

func TestLongPoll(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	s, url := start(t, Options{Clock: clk})
	etag := ETag("FALSE")

	// A different last_etag answers at once.
	if resp, body := get(t, url+PreemptedPath+"?wait_for_change=true&last_etag=0", true); body != "FALSE" || resp.Header.Get("ETag") != etag {
		t.Errorf("stale etag: %q %q", body, resp.Header.Get("ETag"))
	}

	// The current one waits until the value changes.
	type value struct {
		body, etag string
	}
	done := make(chan value, 1)
	go func() {
		resp, body := get(t, url+PreemptedPath+"?wait_for_change=true&timeout_sec=30&last_etag="+etag, true)
		done <- value{body, resp.Header.Get("ETag")}
	}()
	waitUntil(t, func() bool { return s.Waiting(PreemptedPath) == 1 })
	s.SetMaintenanceEvent("MIGRATE_ON_HOST_MAINTENANCE") // another key: still waiting
	s.SetPreempted(false)                                // same value: still waiting
	select {
	case a := <-done:
		t.Fatalf("answered %v before a change", a)
	default:
	}
	s.SetPreempted(true)
	if a := <-done; a.body != "TRUE" || a.etag != ETag("TRUE") {
		t.Errorf("after the change: %+v", a)
	}

	// Or until timeout_sec passes, with the same value.
	go func() {
		resp, body := get(t, url+PreemptedPath+"?wait_for_change=true&timeout_sec=30&last_etag="+ETag("TRUE"), true)
		done <- value{body, resp.Header.Get("ETag")}
	}()
	waitUntil(t, func() bool { return s.Waiting(PreemptedPath) == 1 })
	clk.Step(30 * time.Second)
	if a := <-done; a.body != "TRUE" || a.etag != ETag("TRUE") {
		t.Errorf("after the timeout: %+v", a)
	}
}

func TestControlAPI(t *testing.T) {
	_, url := start(t, Options{})
	resp, err := http.Post(url+"/_emulator"+MaintenanceEventPath, "text/plain", strings.NewReader("TERMINATE_ON_HOST_MAINTENANCE"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("control: %s", resp.Status)
	}
	if _, body := get(t, url+MaintenanceEventPath, true); body != "TERMINATE_ON_HOST_MAINTENANCE" {
		t.Errorf("value %q", body)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// RefuseReads leaves every request unanswered, the long polls waiting when it
// is turned on among them, until it is turned off; the control API turns it
// on and off.
func TestRefuseReads(t *testing.T) {
	s, url := start(t, Options{})
	header := map[string]string{"Metadata-Flavor": "Google"}
	waiting := make(chan bool, 1)
	go func() {
		waiting <- emulatortest.Unanswered(t, http.MethodGet, url+PreemptedPath+"?wait_for_change=true&last_etag="+ETag("FALSE"), header)
	}()
	waitUntil(t, func() bool { return s.Waiting(PreemptedPath) == 1 })
	if resp, _ := emulatortest.Do(t, http.MethodPost, url+"/_emulator/refuse-reads", nil, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("control: %s", resp.Status)
	}
	if !<-waiting {
		t.Error("the long poll in flight was answered")
	}
	if !emulatortest.Unanswered(t, http.MethodGet, url+MaintenanceEventPath, header) {
		t.Error("a read was answered")
	}
	if n := s.Refused(); n != 2 {
		t.Errorf("Refused() = %d, want 2", n)
	}
	s.RefuseReads(false)
	if resp, body := get(t, url+PreemptedPath, true); resp.StatusCode != http.StatusOK || body != "FALSE" {
		t.Errorf("once answering again: %s %q", resp.Status, body)
	}
}
