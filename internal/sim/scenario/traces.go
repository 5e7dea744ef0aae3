package scenario

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// BuiltinPrefix names an embedded trace in a scenario: "builtin:<path>", the
// path below internal/sim/scenario/traces.
const BuiltinPrefix = "builtin:"

// The embedded traces, with their attribution (traces/README.md).
//
//go:embed traces
var traceFS embed.FS

// Trace is a measured series: one integer per tick, and, in some traces, the
// spot price at each tick.
type Trace struct {
	// Name is how the scenario named it.
	Name string
	Gap  time.Duration
	Data []int
	// Prices, when the file has them, are the spot price at each tick (as
	// many as Data); meanPrice is their mean.
	Prices    []float64
	meanPrice float64
	// Warnings are what the file had that the simulator does not read
	// (unknown fields), ignored.
	Warnings []string
}

// traceFile is the format of the spot-traces repository. Some of its files
// carry more than others (the AWS 1-node preemption traces add "prices"), so
// fields it does not know are reported as warnings, not refused.
type traceFile struct {
	Metadata struct {
		GapSeconds *float64 `json:"gap_seconds"`
	} `json:"metadata"`
	Data   []int     `json:"data"`
	Prices []float64 `json:"prices"`
}

// Fields of a trace file the simulator reads, by level.
var (
	traceFields    = []string{"metadata", "data", "prices"}
	metadataFields = []string{"gap_seconds"}
)

// ParseTrace reads a trace file: {"metadata": {"gap_seconds": N}, "data":
// [...]}, optionally with "prices": [...] (one price per tick). Fields it does
// not know are listed in the trace's Warnings.
func ParseTrace(data []byte) (*Trace, error) {
	var f traceFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("not a trace file ({\"metadata\": {\"gap_seconds\": N}, \"data\": [...]}): %w", err)
	}
	// The same bytes decoded again as maps, only to name the fields that
	// were not read.
	var fields, metadata map[string]json.RawMessage
	_ = json.Unmarshal(data, &fields)
	_ = json.Unmarshal(fields["metadata"], &metadata)
	warnings := append(unknownFields("", fields, traceFields), unknownFields("metadata.", metadata, metadataFields)...)
	if f.Metadata.GapSeconds == nil || *f.Metadata.GapSeconds < 0.001 || *f.Metadata.GapSeconds > 86400 {
		return nil, errors.New("metadata.gap_seconds must be between 0.001 and 86400 seconds")
	}
	if len(f.Data) == 0 {
		return nil, errors.New("data is empty")
	}
	for i, v := range f.Data {
		if v < 0 || v > 100000 {
			return nil, fmt.Errorf("data[%d] is %d: must be between 0 and 100000", i, v)
		}
	}
	t := &Trace{Gap: time.Duration(*f.Metadata.GapSeconds * float64(time.Second)), Data: f.Data, Warnings: warnings}
	if f.Prices != nil {
		if len(f.Prices) != len(f.Data) {
			return nil, fmt.Errorf("prices has %d entries, data %d: one price per tick", len(f.Prices), len(f.Data))
		}
		sum := 0.0
		for i, v := range f.Prices {
			if !(v > 0 && v <= 1e6) { // NaN fails too
				return nil, fmt.Errorf("prices[%d] is %v: must be a price above 0 and at most 1e6", i, v)
			}
			sum += v
		}
		t.Prices, t.meanPrice = f.Prices, sum/float64(len(f.Prices))
	}
	return t, nil
}

// unknownFields lists the keys of fields that are not in known (JSON field
// names match without regard to case, as encoding/json matches them), in
// order.
func unknownFields(prefix string, fields map[string]json.RawMessage, known []string) []string {
	var out []string
	for k := range fields {
		if !slices.ContainsFunc(known, func(n string) bool { return strings.EqualFold(n, k) }) {
			out = append(out, fmt.Sprintf("unknown field %q ignored", prefix+k))
		}
	}
	slices.Sort(out)
	return out
}

// MaxTraceBytes is the largest trace file LoadTrace reads. The traces of the
// spot-traces repository are a few KiB to a few hundred KiB.
const MaxTraceBytes = 16 << 20

var traceCache sync.Map // resolved name -> *Trace

// LoadTrace reads the trace a scenario names: "builtin:<path>" or a file path,
// relative to dir when not absolute. Traces are cached by name: they are
// data, not changed while a process runs.
func LoadTrace(ref, dir string) (*Trace, error) {
	key := ref
	var read func() ([]byte, error)
	if rest, ok := strings.CutPrefix(ref, BuiltinPrefix); ok {
		read = func() ([]byte, error) { return fs.ReadFile(traceFS, path.Join("traces", rest)) }
	} else {
		p := ref
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		key = p
		read = func() ([]byte, error) {
			f, err := os.Open(p)
			if err != nil {
				return nil, err
			}
			defer func() { _ = f.Close() }()
			return v1alpha1.ReadLimited(f, MaxTraceBytes, "the trace file", "is it a trace? ("+BuiltinPrefix+" traces are 4-60 KiB)")
		}
	}
	if t, ok := traceCache.Load(key); ok {
		return t.(*Trace), nil
	}
	data, err := read()
	if err != nil {
		if strings.HasPrefix(ref, BuiltinPrefix) {
			return nil, fmt.Errorf("no such built-in trace; built-in traces: %s", strings.Join(BuiltinTraces(), ", "))
		}
		return nil, fmt.Errorf("reading trace: %w", err)
	}
	t, err := ParseTrace(data)
	if err != nil {
		return nil, err
	}
	t.Name = ref
	traceCache.Store(key, t)
	return t, nil
}

// BuiltinTraces lists the embedded traces as scenarios name them.
func BuiltinTraces() []string {
	var out []string
	_ = fs.WalkDir(traceFS, "traces", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			out = append(out, BuiltinPrefix+strings.TrimPrefix(p, "traces/"))
		}
		return nil
	})
	return out
}

// Index is the tick of the trace at elapsed time d after its start, wrapping
// around at the end (and at the start, for a negative d).
func (t *Trace) Index(d time.Duration) int {
	i := int(d/t.Gap) % len(t.Data)
	if i < 0 {
		i += len(t.Data)
	}
	return i
}

// Period is the length of the trace, or 0 when it does not fit a
// time.Duration.
func (t *Trace) Period() time.Duration {
	if int64(len(t.Data)) > math.MaxInt64/int64(t.Gap) {
		return 0
	}
	return time.Duration(len(t.Data)) * t.Gap
}

// At is the trace's value at elapsed time d.
func (t *Trace) At(d time.Duration) int { return t.Data[t.Index(d)] }

// PriceFactor is the trace's price at elapsed time d relative to its mean
// price: 1 for a trace without prices.
func (t *Trace) PriceFactor(d time.Duration) float64 {
	if t.Prices == nil {
		return 1
	}
	return t.Prices[t.Index(d)] / t.meanPrice
}

// Hazard is the preemption trace's rate per node-hour: its drops (the fall
// from its last tick to its first included, as it repeats) over the
// instance-hours it measured.
func (t *Trace) Hazard() float64 {
	drops, ticks := 0, 0
	for k, cur := range t.Data {
		drops += max(t.Data[(k+len(t.Data)-1)%len(t.Data)]-cur, 0)
		ticks += cur
	}
	if ticks == 0 {
		return 0
	}
	return float64(drops) / (float64(ticks) * t.Gap.Hours())
}
