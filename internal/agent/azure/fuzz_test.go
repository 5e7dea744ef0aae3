package azure

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"

	"spotter.dev/spotter/internal/agent/notice"
)

// FuzzDocument runs the source's whole handling of a Scheduled Events
// document (parsing, the events of this VM, deadlines, what is sent, what
// ends) on fuzzed documents. It checks that every notice sent is well-formed,
// that a document processed again, or again under a new incarnation, sends
// nothing, that an empty document ends every open notice, and that this VM's
// Preempt among fuzzed events is always reported.
func FuzzDocument(f *testing.F) {
	own := `{"EventId":"fuzz-own-preempt","EventType":"Preempt","ResourceType":"VirtualMachine","Resources":["aks-spot-vmss_3"],` +
		`"EventStatus":"Scheduled","NotBefore":"Wed, 02 Jan 2030 03:04:35 GMT","EventSource":"Platform","DurationInSeconds":-1}`
	for _, s := range []string{
		documented,
		`{"DocumentIncarnation":2,"Events":[` + own + `]}`,
		`{"DocumentIncarnation":0,"Events":[]}`, `{"DocumentIncarnation":1,"Events":null}`, `{"DocumentIncarnation":1}`,
		`{"DocumentIncarnation":1,"Events":[{"EventId":"a","EventType":"Reboot","Resources":["AKS-SPOT-VMSS_3"],"NotBefore":""}]}`,
		// Mixed good and bad events, for this VM and others.
		`{"DocumentIncarnation":3,"Events":[null, 7, "x", [], {"EventType":"Reboot","Resources":["aks-spot-vmss_3"]},
			{"EventId":"r","EventType":"Reboot","Resources":"aks-spot-vmss_3"}, {"EventId":"d","EventType":"Freeze","Resources":["aks-spot-vmss_3"],
			"DurationInSeconds":"5","NotBefore":"tomorrow"}, ` + own + `]}`,
		`{"DocumentIncarnation":4,"Events":[{"EventId":"t","EventType":"Terminate","Resources":["aks-spot-vmss_3"],"NotBefore":"Mon, 32 Apr 2022 22:26:58 GMT"},
			{"EventId":"x","EventType":"Unknown","Resources":["aks-spot-vmss_3","aks-spot-vmss_3"]}]}`,
		// Two events with one EventId.
		`{"DocumentIncarnation":5,"Events":[{"EventId":"a","EventType":"Reboot","Resources":["aks-spot-vmss_3"]},{"EventId":"a","EventType":"Preempt","Resources":["aks-spot-vmss_3"]}]}`,
		``, `[]`, `null`, `{"DocumentIncarnation":1e99}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		clk := testingclock.NewFakeClock(start)
		src, err := New(Config{Clock: clk, ProviderID: providerID})
		if err != nil {
			t.Fatal(err)
		}
		ctx := klog.NewContext(context.Background(), klog.Logger{}) // the zero logger discards
		w := &watcher{Source: src, vmName: src.vmName, incarnation: -1}
		sent, err := w.process(ctx, doc)
		if err != nil {
			if sent != nil {
				t.Errorf("notices %+v with the error %v", sent, err)
			}
		}
		for _, n := range sent {
			if n.Cloud != notice.CloudAzure || n.ID == "" || n.Action == "" || n.Deadline.IsZero() || n.Ended ||
				(n.Kind != notice.Termination && n.Kind != notice.Maintenance) {
				t.Errorf("malformed first notice %+v", n)
			}
		}
		if again, _ := w.process(ctx, doc); len(again) != 0 {
			t.Errorf("the same document again sent %+v", again)
		}

		var raw struct {
			Events []json.RawMessage `json:"Events"`
		}
		if json.Unmarshal(doc, &raw) != nil {
			return
		}
		rebuilt := func(incarnation int, events []json.RawMessage) []byte {
			b, err := json.Marshal(struct {
				DocumentIncarnation int
				Events              []json.RawMessage
			}{incarnation, events})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		// The same events under new incarnations send nothing new; an empty
		// document ends what is open.
		w = &watcher{Source: src, vmName: src.vmName, incarnation: -1}
		first, err := w.process(ctx, rebuilt(1, raw.Events))
		if err != nil {
			t.Fatalf("the events of %s under a new incarnation: %v", doc, err)
		}
		clk.Step(time.Second)
		if again, _ := w.process(ctx, rebuilt(2, raw.Events)); len(again) != 0 {
			t.Errorf("the same events under a new incarnation sent %+v", again)
		}
		open := map[string]bool{}
		for _, n := range first {
			open[n.ID] = true
		}
		ended, _ := w.process(ctx, rebuilt(3, nil))
		for _, n := range ended {
			if !n.Ended || !open[n.ID] {
				t.Errorf("an empty document sent %+v, want only open notices, Ended", n)
			}
			delete(open, n.ID)
		}
		if len(open) != 0 {
			t.Errorf("notices %v still open after an empty document", open)
		}

		// This VM's Preempt among the fuzzed events is reported.
		parsed, err := ParseDocument(rebuilt(1, raw.Events))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range parsed.Events {
			if e.EventID == "fuzz-own-preempt" {
				return // the fuzzer named an event like ours
			}
		}
		w = &watcher{Source: src, vmName: src.vmName, incarnation: -1}
		ns, err := w.process(ctx, rebuilt(1, append(raw.Events, json.RawMessage(own))))
		if err != nil {
			t.Fatalf("events with this VM's Preempt appended: %v", err)
		}
		found := false
		for _, n := range ns {
			found = found || (n.ID == "fuzz-own-preempt" && n.Kind == notice.Termination && !n.Ended &&
				n.Deadline.Equal(time.Date(2030, 1, 2, 3, 4, 35, 0, time.UTC)))
		}
		if !found {
			t.Errorf("this VM's Preempt among %s is not reported: %s", doc, fmt.Sprint(ns))
		}
	})
}
