package azure

import (
	"testing"
	"time"
)

// documented is the example document of the Scheduled Events documentation.
const documented = `{
    "DocumentIncarnation": 1,
    "Events": [
        {
            "EventId": "f020ba2e-3bc0-4c40-a10b-86575a9eabd5",
            "EventType": "Freeze",
            "ResourceType": "VirtualMachine",
            "Resources": ["WestNO_0", "WestNO_1"],
            "EventStatus": "Scheduled",
            "NotBefore": "Mon, 11 Apr 2022 22:26:58 GMT",
            "Description": "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
            "EventSource": "Platform",
            "DurationInSeconds": 5
        }
    ]
}`

func TestParseDocument(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Document
		wantErr bool
		// problems are the indexes of the events reported in
		// Document.Problems, and whether each was skipped.
		problems map[int]bool
	}{
		{name: "documented example", in: documented, want: Document{Incarnation: 1, Events: []Event{{
			EventID: "f020ba2e-3bc0-4c40-a10b-86575a9eabd5", EventType: "Freeze", ResourceType: "VirtualMachine",
			Resources: []string{"WestNO_0", "WestNO_1"}, EventStatus: "Scheduled", NotBefore: time.Date(2022, 4, 11, 22, 26, 58, 0, time.UTC),
			Description: "Virtual machine is being paused because of a memory-preserving Live Migration operation.", EventSource: "Platform", DurationInSeconds: 5,
		}}}},
		{name: "no events", in: `{"DocumentIncarnation":0,"Events":[]}`, want: Document{Incarnation: 0, Events: []Event{}}},
		{name: "started, NotBefore empty", in: `{"DocumentIncarnation":7,"Events":[{"EventId":"a","EventType":"Preempt","Resources":["vm"],"EventStatus":"Started","NotBefore":""}]}`,
			want: Document{Incarnation: 7, Events: []Event{{EventID: "a", EventType: "Preempt", Resources: []string{"vm"}, EventStatus: "Started", DurationInSeconds: -1}}}},
		{name: "no incarnation", in: `{"Events":[]}`, wantErr: true},
		{name: "no EventId: skipped", in: `{"DocumentIncarnation":1,"Events":[{"EventType":"Reboot"}]}`,
			want: Document{Incarnation: 1, Events: []Event{}}, problems: map[int]bool{0: true}},
		{name: "no EventType: skipped", in: `{"DocumentIncarnation":1,"Events":[{"EventId":"a"}]}`,
			want: Document{Incarnation: 1, Events: []Event{}}, problems: map[int]bool{0: true}},
		{name: "NotBefore not RFC 1123: kept without it", in: `{"DocumentIncarnation":1,"Events":[{"EventId":"a","EventType":"Reboot","NotBefore":"2022-04-11T22:26:58Z"}]}`,
			want: Document{Incarnation: 1, Events: []Event{{EventID: "a", EventType: "Reboot", DurationInSeconds: -1}}}, problems: map[int]bool{0: false}},
		{name: "mixed good and bad events", in: `{"DocumentIncarnation":2,"Events":[null, 1, "x", [], {"EventId":7,"EventType":"Reboot"},
			{"EventId":"r","EventType":"Reboot","Resources":"vm"}, {"EventId":"s","EventType":"Reboot","Resources":[1]},
			{"EventId":"d","EventType":"Freeze","Resources":["vm"],"DurationInSeconds":"5","EventStatus":3,"Description":{}},
			{"EventId":"ok","EventType":"Preempt","Resources":["vm"],"NotBefore":"Mon, 11 Apr 2022 22:26:58 GMT"}]}`,
			want: Document{Incarnation: 2, Events: []Event{
				{EventID: "d", EventType: "Freeze", Resources: []string{"vm"}, DurationInSeconds: -1},
				{EventID: "ok", EventType: "Preempt", Resources: []string{"vm"}, NotBefore: time.Date(2022, 4, 11, 22, 26, 58, 0, time.UTC), DurationInSeconds: -1},
			}},
			problems: map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: false}},
		{name: "Events not a list", in: `{"DocumentIncarnation":1,"Events":{"EventId":"a"}}`, wantErr: true},
		{name: "error document", in: `{"error":"Bad request. Required metadata header not specified"}`, wantErr: true},
		{name: "not JSON", in: `<html>`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDocument([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if got.Incarnation != tt.want.Incarnation || len(got.Events) != len(tt.want.Events) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			if len(got.Problems) != len(tt.problems) {
				t.Errorf("problems %+v, want events %v", got.Problems, tt.problems)
			}
			for _, p := range got.Problems {
				if skipped, ok := tt.problems[p.Index]; !ok || skipped != p.Skipped || p.Err == nil {
					t.Errorf("problem %+v, want events %v (true: skipped)", p, tt.problems)
				}
			}
			for i := range got.Events {
				g, w := got.Events[i], tt.want.Events[i]
				if g.EventID != w.EventID || g.EventType != w.EventType || g.ResourceType != w.ResourceType || g.EventStatus != w.EventStatus ||
					!g.NotBefore.Equal(w.NotBefore) || g.Description != w.Description || g.EventSource != w.EventSource ||
					g.DurationInSeconds != w.DurationInSeconds || len(g.Resources) != len(w.Resources) {
					t.Errorf("event %d = %+v\nwant %+v", i, g, w)
				}
			}
		})
	}
}

func TestAffects(t *testing.T) {
	e := Event{Resources: []string{"aks-spot-12345678-vmss_3", "other"}}
	if !e.Affects("AKS-spot-12345678-vmss_3") {
		t.Error("names compare case-insensitively")
	}
	if e.Affects("aks-spot-12345678-vmss_30") || (Event{}).Affects("x") {
		t.Error("affects a VM it does not name")
	}
}

func TestResourceName(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "azure:///subscriptions/0000/resourceGroups/mc_rg/providers/Microsoft.Compute/virtualMachineScaleSets/aks-spot-123-vmss/virtualMachines/3", want: "aks-spot-123-vmss_3"},
		{in: "azure:///subscriptions/0000/resourcegroups/mc_rg/providers/microsoft.compute/virtualmachinescalesets/vmss/virtualmachines/0", want: "vmss_0"},
		{in: "azure:///subscriptions/0000/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/worker-1", want: "worker-1"},
		{in: "", wantErr: true},
		{in: "aws:///us-east-1a/i-0123", wantErr: true},
		{in: "azure:///subscriptions/0000/resourceGroups/rg/providers/Microsoft.Network/virtualMachines/x", wantErr: true},
		{in: "azure:///subscriptions/0000/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/vmss", wantErr: true},
		{in: "azure:///subscriptions/0000/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/", wantErr: true},
		{in: "azure:///subscriptions//resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/x", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ResourceName(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ResourceName(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// The fuzz tests check that the parsers return errors rather than panic; the
// seed corpus runs in every `go test`.

func FuzzParseDocument(f *testing.F) {
	for _, s := range []string{
		documented, `{"DocumentIncarnation":0,"Events":[]}`, `{"DocumentIncarnation":1,"Events":null}`,
		`{"DocumentIncarnation":1,"Events":[null]}`, `{"DocumentIncarnation":-1}`, `{"DocumentIncarnation":1e99}`,
		`{"DocumentIncarnation":1,"Events":[{"EventId":"a","EventType":"Preempt","NotBefore":"Mon, 32 Apr 2022 22:26:58 GMT"}]}`,
		``, `[]`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		doc, err := ParseDocument(b)
		if err != nil {
			return
		}
		for _, e := range doc.Events {
			if e.EventID == "" || e.EventType == "" {
				t.Errorf("accepted an event without EventId or EventType: %+v", e)
			}
		}
	})
}

func FuzzResourceName(f *testing.F) {
	for _, s := range []string{
		"azure:///subscriptions/0000/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/vmss/virtualMachines/3",
		"azure:///subscriptions/0000/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm",
		"", "azure://", "azure:////////////",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, err := ResourceName(s)
		if err == nil && name == "" {
			t.Errorf("ResourceName(%q) accepted an empty name", s)
		}
	})
}
