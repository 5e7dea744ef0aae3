package awsimds

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/emulator/internal/emulatortest"
)

// answer is a response read in full.
type answer = emulatortest.Answer

func do(t *testing.T, method, url string, header map[string]string, body string) (answer, string) {
	t.Helper()
	return emulatortest.Do(t, method, url, header, body)
}

func TestTokenFlow(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	s := New(Options{Clock: clk})
	srv := httptest.NewServer(s)
	defer srv.Close()

	for _, ttl := range []string{"", "0", "21601", "abc"} {
		if resp, _ := do(t, http.MethodPut, srv.URL+TokenPath, map[string]string{TokenTTLHeader: ttl}, ""); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("PUT with TTL %q: %s, want 400", ttl, resp.Status)
		}
	}
	if resp, _ := do(t, http.MethodPut, srv.URL+TokenPath, map[string]string{TokenTTLHeader: "60", "X-Forwarded-For": "10.0.0.1"}, ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("PUT through a proxy: %s, want 403", resp.Status)
	}
	if resp, _ := do(t, http.MethodGet, srv.URL+TokenPath, nil, ""); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET of the token: %s, want 405", resp.Status)
	}
	resp, token := do(t, http.MethodPut, srv.URL+TokenPath, map[string]string{TokenTTLHeader: "60"}, "")
	if resp.StatusCode != http.StatusOK || token == "" || resp.Header.Get(TokenTTLHeader) != "60" {
		t.Fatalf("PUT: %s %q, TTL header %q", resp.Status, token, resp.Header.Get(TokenTTLHeader))
	}

	if resp, _ := do(t, http.MethodGet, srv.URL+InstanceIDPath, nil, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET without a token: %s, want 401", resp.Status)
	}
	if resp, body := do(t, http.MethodGet, srv.URL+InstanceIDPath, map[string]string{TokenHeader: token}, ""); resp.StatusCode != http.StatusOK || body != "i-0123456789abcdef0" {
		t.Errorf("GET with the token: %s %q", resp.Status, body)
	}
	if resp, _ := do(t, http.MethodGet, srv.URL+InstanceActionPath, map[string]string{TokenHeader: token}, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("no instance-action: %s, want 404", resp.Status)
	}
	clk.Step(60 * time.Second)
	if resp, _ := do(t, http.MethodGet, srv.URL+InstanceIDPath, map[string]string{TokenHeader: token}, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET with an expired token: %s, want 401", resp.Status)
	}
	_, token = do(t, http.MethodPut, srv.URL+TokenPath, map[string]string{TokenTTLHeader: "60"}, "")
	s.ExpireTokens()
	if resp, _ := do(t, http.MethodGet, srv.URL+InstanceIDPath, map[string]string{TokenHeader: token}, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET after ExpireTokens: %s, want 401", resp.Status)
	}
	if s.Unauthorized() != 3 || s.Requests(TokenPath) != 8 {
		t.Errorf("counters: %d unauthorized, %d token requests", s.Unauthorized(), s.Requests(TokenPath))
	}
}

func TestDocuments(t *testing.T) {
	s := New(Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	_, token := do(t, http.MethodPut, srv.URL+TokenPath, map[string]string{TokenTTLHeader: "21600"}, "")
	get := func(path string) (int, string) {
		resp, body := do(t, http.MethodGet, srv.URL+path, map[string]string{TokenHeader: token}, "")
		return resp.StatusCode, body
	}

	at := time.Date(2017, 9, 18, 8, 22, 0, 0, time.UTC)
	s.SetInstanceAction("terminate", at)
	if code, body := get(InstanceActionPath); code != 200 || body != `{"action":"terminate","time":"2017-09-18T08:22:00Z"}` {
		t.Errorf("instance-action: %d %s", code, body)
	}
	s.SetRebalance(at)
	if code, body := get(RebalancePath); code != 200 || body != `{"noticeTime":"2017-09-18T08:22:00Z"}` {
		t.Errorf("rebalance: %d %s", code, body)
	}
	if code, _ := get(ScheduledEventsPath); code != 404 {
		t.Errorf("scheduled events before any: %d, want 404", code)
	}
	s.SetScheduledEvents()
	if code, body := get(ScheduledEventsPath); code != 200 || body != "[]" {
		t.Errorf("no scheduled events: %d %s", code, body)
	}
	s.SetScheduledEvents(ScheduledEvent{Code: "system-reboot", Description: "scheduled reboot", EventID: "instance-event-0d59937288b749b32",
		NotBefore: time.Date(2019, 1, 21, 9, 0, 43, 0, time.UTC), NotAfter: time.Date(2019, 1, 21, 9, 17, 23, 0, time.UTC), State: "active"})
	code, body := get(ScheduledEventsPath)
	var events []map[string]string
	if err := json.Unmarshal([]byte(body), &events); err != nil || code != 200 || len(events) != 1 {
		t.Fatalf("scheduled events: %d %s (%v)", code, body, err)
	}
	want := map[string]string{"Code": "system-reboot", "Description": "scheduled reboot", "EventId": "instance-event-0d59937288b749b32",
		"NotBefore": "21 Jan 2019 09:00:43 GMT", "NotAfter": "21 Jan 2019 09:17:23 GMT", "State": "active"}
	for k, v := range want {
		if events[0][k] != v {
			t.Errorf("%s = %q, want %q", k, events[0][k], v)
		}
	}
	if _, ok := events[0]["NotBeforeDeadline"]; ok {
		t.Error("a zero NotBeforeDeadline is sent")
	}
	if code, _ := get(TargetLifecycleStatePath); code != 404 {
		t.Errorf("target-lifecycle-state outside a group: %d, want 404", code)
	}
	s.SetTargetLifecycleState("InService")
	if code, body := get(TargetLifecycleStatePath); code != 200 || body != "InService" {
		t.Errorf("target-lifecycle-state: %d %s", code, body)
	}
}

func TestControlAPI(t *testing.T) {
	s := New(Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	if resp, _ := do(t, http.MethodPost, srv.URL+"/_emulator/instance-action", nil, `{"action":"stop","time":"2030-01-01T00:02:00Z"}`); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("control: %s", resp.Status)
	}
	_, token := do(t, http.MethodPut, srv.URL+TokenPath, map[string]string{TokenTTLHeader: "60"}, "")
	if _, body := do(t, http.MethodGet, srv.URL+InstanceActionPath, map[string]string{TokenHeader: token}, ""); body != `{"action":"stop","time":"2030-01-01T00:02:00Z"}` {
		t.Errorf("instance-action %s", body)
	}
	do(t, http.MethodDelete, srv.URL+"/_emulator/instance-action", nil, "")
	if resp, _ := do(t, http.MethodGet, srv.URL+InstanceActionPath, map[string]string{TokenHeader: token}, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("after DELETE: %s", resp.Status)
	}
	do(t, http.MethodPost, srv.URL+"/_emulator/expire-tokens", nil, "")
	if resp, _ := do(t, http.MethodGet, srv.URL+InstanceIDPath, map[string]string{TokenHeader: token}, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("after expire-tokens: %s", resp.Status)
	}
}

// RefuseReads leaves every request unanswered, the token's too, until it is
// turned off; the control API turns it on and off.
func TestRefuseReads(t *testing.T) {
	s := New(Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	_, token := do(t, http.MethodPut, srv.URL+TokenPath, map[string]string{TokenTTLHeader: "60"}, "")
	if resp, _ := do(t, http.MethodPost, srv.URL+"/_emulator/refuse-reads", nil, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("control: %s", resp.Status)
	}
	if !emulatortest.Unanswered(t, http.MethodPut, srv.URL+TokenPath, map[string]string{TokenTTLHeader: "60"}) {
		t.Error("the token was answered")
	}
	if !emulatortest.Unanswered(t, http.MethodGet, srv.URL+InstanceIDPath, map[string]string{TokenHeader: token}) {
		t.Error("a read with a valid token was answered")
	}
	if n := s.Refused(); n != 2 {
		t.Errorf("Refused() = %d, want 2", n)
	}
	if resp, _ := do(t, http.MethodDelete, srv.URL+"/_emulator/refuse-reads", nil, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("control: %s", resp.Status)
	}
	if resp, body := do(t, http.MethodGet, srv.URL+InstanceIDPath, map[string]string{TokenHeader: token}, ""); resp.StatusCode != http.StatusOK || body == "" {
		t.Errorf("once answering again: %s %q", resp.Status, body)
	}
}
