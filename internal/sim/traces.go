package sim

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"spotter.dev/spotter/pkg/apis/config/v1alpha1"
)

// BuiltinPrefix names an embedded trace in a scenario: "builtin:<path>", the
// path below internal/sim/traces.
const BuiltinPrefix = "builtin:"

// The embedded traces, with their attribution (traces/README.md).
//
//go:embed traces
var traceFS embed.FS

// Trace is a measured series: one integer per tick.
type Trace struct {
	// Name is how the scenario named it.
	Name string
	Gap  time.Duration
	Data []int
}

// traceFile is the format of the spot-traces repository.
type traceFile struct {
	Metadata struct {
		GapSeconds *float64 `json:"gap_seconds"`
	} `json:"metadata"`
	Data []int `json:"data"`
}

// ParseTrace reads a trace file: {"metadata": {"gap_seconds": N}, "data": [...]}.
func ParseTrace(data []byte) (*Trace, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f traceFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("not a trace file ({\"metadata\": {\"gap_seconds\": N}, \"data\": [...]}): %w", err)
	}
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
	return &Trace{Gap: time.Duration(*f.Metadata.GapSeconds * float64(time.Second)), Data: f.Data}, nil
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

// period is the length of the trace, or 0 when it does not fit a
// time.Duration.
func (t *Trace) period() time.Duration {
	if int64(len(t.Data)) > math.MaxInt64/int64(t.Gap) {
		return 0
	}
	return time.Duration(len(t.Data)) * t.Gap
}

// At is the trace's value at elapsed time d.
func (t *Trace) At(d time.Duration) int { return t.Data[t.Index(d)] }
