package azureimds

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/emulator/internal/emulatortest"
)

func do(t *testing.T, method, url string, metadata bool, body string) (int, string) {
	t.Helper()
	var h map[string]string
	if metadata {
		h = map[string]string{"Metadata": "true"}
	}
	a, b := emulatortest.Do(t, method, url, h, body)
	return a.StatusCode, b
}

type document struct {
	DocumentIncarnation int64
	Events              []map[string]any
}

func TestScheduledEvents(t *testing.T) {
	s := New(Options{VMName: "vmss_3"})
	srv := httptest.NewServer(s)
	defer srv.Close()
	url := srv.URL + ScheduledEventsPath + "?api-version=2020-07-01"

	if code, body := do(t, http.MethodGet, url, false, ""); code != 400 || !strings.Contains(body, "metadata header") {
		t.Errorf("without Metadata: true: %d %s", code, body)
	}
	if code, _ := do(t, http.MethodGet, srv.URL+ScheduledEventsPath, true, ""); code != 400 {
		t.Errorf("without api-version: %d, want 400", code)
	}
	if code, _ := do(t, http.MethodGet, srv.URL+ScheduledEventsPath+"?api-version=2099-01-01", true, ""); code != 400 {
		t.Errorf("unknown api-version: %d, want 400", code)
	}
	read := func() document {
		t.Helper()
		code, body := do(t, http.MethodGet, url, true, "")
		var d document
		if err := json.Unmarshal([]byte(body), &d); code != 200 || err != nil {
			t.Fatalf("document: %d %s (%v)", code, body, err)
		}
		return d
	}
	d := read()
	if d.DocumentIncarnation != 1 || d.Events == nil || len(d.Events) != 0 {
		t.Errorf("empty document: %+v", d)
	}

	s.AddEvent(Event{EventID: "e1", EventType: "Preempt", Resources: []string{"vmss_3"}, NotBefore: time.Date(2016, 9, 19, 18, 29, 47, 0, time.UTC)})
	s.AddEvent(Event{EventID: "e2", EventType: "Reboot", Resources: []string{"vmss_4"}})
	d = read()
	if d.DocumentIncarnation != 3 || len(d.Events) != 2 {
		t.Fatalf("document: %+v", d)
	}
	e1 := d.Events[0]
	for k, v := range map[string]any{"EventId": "e1", "EventType": "Preempt", "ResourceType": "VirtualMachine", "EventStatus": "Scheduled",
		"NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT", "EventSource": "Platform", "DurationInSeconds": float64(-1), "Description": ""} {
		if e1[k] != v {
			t.Errorf("%s = %v, want %v", k, e1[k], v)
		}
	}
	if d.Events[1]["NotBefore"] != "" {
		t.Errorf("zero NotBefore sent as %v", d.Events[1]["NotBefore"])
	}

	// Acknowledgement: malformed or unknown is refused and changes nothing.
	for _, body := range []string{`{}`, `{"StartRequests":[{"EventId":"nope"}]}`, `not json`, `{"StartRequests":[{"EventId":"e1"}],"x":1}`} {
		if code, _ := do(t, http.MethodPost, url, true, body); code != 400 {
			t.Errorf("POST %s: %d, want 400", body, code)
		}
	}
	if code, _ := do(t, http.MethodPost, url, false, `{"StartRequests":[{"EventId":"e1"}]}`); code != 400 {
		t.Errorf("POST without Metadata: true: %d, want 400", code)
	}
	if got := s.Acks(); len(got) != 0 {
		t.Errorf("acks after refusals: %v", got)
	}
	if code, body := do(t, http.MethodPost, url, true, `{"StartRequests":[{"EventId":"e1"}]}`); code != 200 {
		t.Fatalf("POST: %d %s", code, body)
	}
	if got := s.Acks(); !slices.Equal(got, []string{"e1"}) {
		t.Errorf("acks = %v", got)
	}
	d = read()
	if d.DocumentIncarnation != 4 || d.Events[0]["EventStatus"] != "Started" || d.Events[0]["NotBefore"] != "" {
		t.Errorf("after the acknowledgement: %+v", d)
	}

	if !s.RemoveEvent("e1") || s.RemoveEvent("e1") {
		t.Error("RemoveEvent")
	}
	if d = read(); d.DocumentIncarnation != 5 || len(d.Events) != 1 || d.Events[0]["EventId"] != "e2" {
		t.Errorf("after removal: %+v", d)
	}
}

func TestVMName(t *testing.T) {
	s := New(Options{VMName: "worker-1"})
	srv := httptest.NewServer(s)
	defer srv.Close()
	if code, body := do(t, http.MethodGet, srv.URL+VMNamePath+"?api-version=2021-02-01&format=text", true, ""); code != 200 || body != "worker-1" {
		t.Errorf("compute/name: %d %q", code, body)
	}
	if code, _ := do(t, http.MethodGet, srv.URL+VMNamePath+"?api-version=2021-02-01", true, ""); code != 400 {
		t.Errorf("leaf without format=text: %d, want 400", code)
	}
	if code, body := do(t, http.MethodGet, srv.URL+InstancePath+"?api-version=2021-02-01", true, ""); code != 200 || !strings.Contains(body, `"name":"worker-1"`) {
		t.Errorf("instance: %d %s", code, body)
	}
	if code, _ := do(t, http.MethodGet, srv.URL+"/metadata/nope?api-version=2021-02-01", true, ""); code != 404 {
		t.Errorf("unknown path: %d, want 404", code)
	}
}

func TestControlAPI(t *testing.T) {
	s := New(Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	if code, body := do(t, http.MethodPost, srv.URL+"/_emulator/events", false, `{"EventId":"c1","EventType":"Terminate","Resources":["spot-node-1"],"NotBefore":"2030-01-01T00:05:00Z"}`); code != 204 {
		t.Fatalf("add: %d %s", code, body)
	}
	if ev := s.Events(); len(ev) != 1 || !ev[0].NotBefore.Equal(time.Date(2030, 1, 1, 0, 5, 0, 0, time.UTC)) {
		t.Errorf("events: %+v", ev)
	}
	if code, _ := do(t, http.MethodPost, srv.URL+"/_emulator/events/c1/start", false, ""); code != 204 || s.Events()[0].EventStatus != "Started" {
		t.Errorf("start: %d %+v", code, s.Events())
	}
	if code, _ := do(t, http.MethodDelete, srv.URL+"/_emulator/events/c1", false, ""); code != 204 || len(s.Events()) != 0 {
		t.Errorf("delete: %d", code)
	}
	if code, body := do(t, http.MethodGet, srv.URL+"/_emulator/acks", false, ""); code != 200 || body != "[]" {
		t.Errorf("acks: %d %s", code, body)
	}
}

// RefuseReads leaves every request unanswered until it is turned off; the
// control API turns it on and off.
func TestRefuseReads(t *testing.T) {
	s := New(Options{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	header := map[string]string{"Metadata": "true"}
	url := srv.URL + ScheduledEventsPath + "?api-version=2020-07-01"
	s.RefuseReads(true)
	if !emulatortest.Unanswered(t, http.MethodGet, url, header) {
		t.Error("the document was answered")
	}
	if n := s.Refused(); n != 1 {
		t.Errorf("Refused() = %d, want 1", n)
	}
	if resp, _ := emulatortest.Do(t, http.MethodDelete, srv.URL+"/_emulator/refuse-reads", nil, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("control: %s", resp.Status)
	}
	if resp, body := emulatortest.Do(t, http.MethodGet, url, header, ""); resp.StatusCode != http.StatusOK || !strings.Contains(body, "DocumentIncarnation") {
		t.Errorf("once answering again: %s %q", resp.Status, body)
	}
	if resp, _ := emulatortest.Do(t, http.MethodPost, srv.URL+"/_emulator/refuse-reads", nil, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("control: %s", resp.Status)
	}
	if !emulatortest.Unanswered(t, http.MethodGet, url, header) {
		t.Error("the document was answered after POST /_emulator/refuse-reads")
	}
}
