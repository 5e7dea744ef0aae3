package kwok

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
)

// Trace is a measured series of spot node counts, one per tick: how many spot
// instances could be obtained (availability traces) or were still running
// (preemption traces). The file format is the one of the skypilot-org/spot-traces
// data set (NSDI '24, "Can't Be Late"):
//
//	{"metadata": {"gap_seconds": 300}, "data": [0, 0, 5, 16, 16, ...]}
//
// Other fields (some files carry "prices") are ignored.
type Trace struct {
	// Gap is the time between two data points.
	Gap time.Duration
	// Data holds one node count per tick, none negative.
	Data []int
}

type traceFile struct {
	Metadata struct {
		GapSeconds *float64 `json:"gap_seconds"`
	} `json:"metadata"`
	Data []int `json:"data"`
}

// maxTraceGap bounds gap_seconds so that it converts to a time.Duration.
const maxTraceGap = 365 * 24 * time.Hour

// ParseTrace decodes a trace file's content and checks it: a positive gap of at
// most a year, at least one data point, no negative count.
func ParseTrace(data []byte) (*Trace, error) {
	var f traceFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("decoding trace: %w", err)
	}
	gap := f.Metadata.GapSeconds
	switch {
	case gap == nil:
		return nil, errors.New("trace: metadata.gap_seconds is missing")
	case !(*gap > 0) || *gap > maxTraceGap.Seconds():
		return nil, fmt.Errorf("trace: metadata.gap_seconds %v is not in (0, %v]", *gap, maxTraceGap.Seconds())
	case len(f.Data) == 0:
		return nil, errors.New("trace: data is empty")
	}
	if i := slices.IndexFunc(f.Data, func(v int) bool { return v < 0 }); i >= 0 {
		return nil, fmt.Errorf("trace: data[%d] is negative (%d)", i, f.Data[i])
	}
	t := &Trace{Gap: time.Duration(*gap * float64(time.Second)), Data: f.Data}
	if t.Gap <= 0 {
		return nil, fmt.Errorf("trace: metadata.gap_seconds %v is below a nanosecond", *gap)
	}
	return t, nil
}

// LoadTrace reads and parses the trace file at path.
func LoadTrace(path string) (*Trace, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading trace: %w", err)
	}
	t, err := ParseTrace(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// At returns the data point in force at elapsed time into the trace: tick
// elapsed/Gap, wrapping around at the end so that a trace replays forever. A
// negative elapsed time gives the first point.
func (t *Trace) At(elapsed time.Duration) int {
	if elapsed < 0 {
		return t.Data[0]
	}
	return t.Data[int((elapsed/t.Gap)%time.Duration(len(t.Data)))]
}

// Max returns the largest data point.
func (t *Trace) Max() int { return slices.Max(t.Data) }

// Duration is the span of the trace, after which it wraps around.
func (t *Trace) Duration() time.Duration { return t.Gap * time.Duration(len(t.Data)) }
