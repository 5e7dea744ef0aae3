package kwok_test

import (
	"testing"
	"time"

	"spotter.dev/spotter/internal/cloud/kwok"
)

func TestParseTrace(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		gap      time.Duration
		data     []int
		bad      bool
	}{
		{name: "minimal", in: `{"metadata": {"gap_seconds": 300}, "data": [0, 5, 16]}`, gap: 5 * time.Minute, data: []int{0, 5, 16}},
		{name: "extra fields", in: `{"metadata": {"gap_seconds": 34, "zone": "x"}, "data": [1], "prices": [0.1]}`, gap: 34 * time.Second, data: []int{1}},
		{name: "fractional gap", in: `{"metadata": {"gap_seconds": 0.5}, "data": [1]}`, gap: 500 * time.Millisecond, data: []int{1}},
		{name: "no gap", in: `{"metadata": {}, "data": [1]}`, bad: true},
		{name: "zero gap", in: `{"metadata": {"gap_seconds": 0}, "data": [1]}`, bad: true},
		{name: "huge gap", in: `{"metadata": {"gap_seconds": 1e300}, "data": [1]}`, bad: true},
		{name: "tiny gap", in: `{"metadata": {"gap_seconds": 1e-12}, "data": [1]}`, bad: true},
		{name: "no data", in: `{"metadata": {"gap_seconds": 1}, "data": []}`, bad: true},
		{name: "negative", in: `{"metadata": {"gap_seconds": 1}, "data": [1, -1]}`, bad: true},
		{name: "fractional count", in: `{"metadata": {"gap_seconds": 1}, "data": [1.5]}`, bad: true},
		{name: "not json", in: `gap_seconds: 1`, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := kwok.ParseTrace([]byte(tc.in))
			if tc.bad {
				if err == nil {
					t.Errorf("accepted: %+v", tr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tr.Gap != tc.gap || len(tr.Data) != len(tc.data) {
				t.Errorf("got %+v", tr)
			}
		})
	}
}

func TestTraceAt(t *testing.T) {
	tr := &kwok.Trace{Gap: time.Minute, Data: []int{3, 1, 4}}
	for _, tc := range []struct {
		at   time.Duration
		want int
	}{
		{-time.Hour, 3}, {0, 3}, {59 * time.Second, 3}, {time.Minute, 1}, {2 * time.Minute, 4},
		{3 * time.Minute, 3}, // wraps around
		{301 * time.Minute, 1},
	} {
		if got := tr.At(tc.at); got != tc.want {
			t.Errorf("At(%s) = %d, want %d", tc.at, got, tc.want)
		}
	}
	if tr.Max() != 4 || tr.Duration() != 3*time.Minute {
		t.Errorf("Max %d, Duration %s", tr.Max(), tr.Duration())
	}
}

func TestLoadTraceTestdata(t *testing.T) {
	for _, path := range []string{
		availabilityTrace,
		"testdata/traces/preemption/4-node/aws-08-03-2023/us-east-2a_v100_1.json",
	} {
		tr, err := kwok.LoadTrace(path)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Gap != 5*time.Minute || len(tr.Data) < 1000 {
			t.Errorf("%s: gap %s, %d points", path, tr.Gap, len(tr.Data))
		}
	}
}

func FuzzParseTrace(f *testing.F) {
	f.Add([]byte(`{"metadata": {"gap_seconds": 300}, "data": [0, 0, 5, 16]}`))
	f.Add([]byte(`{"metadata": {"gap_seconds": 1e-9}, "data": [1]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := kwok.ParseTrace(in)
		if err != nil {
			return
		}
		if tr.Gap <= 0 || len(tr.Data) == 0 {
			t.Fatalf("accepted an unusable trace: %+v", tr)
		}
		for _, d := range []time.Duration{0, tr.Gap, tr.Duration(), 1<<63 - 1} {
			if v := tr.At(d); v < 0 {
				t.Fatalf("At(%s) = %d", d, v)
			}
		}
	})
}
