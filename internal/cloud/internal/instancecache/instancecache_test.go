package instancecache

import (
	"maps"
	"slices"
	"testing"
	"time"
)

// facts of a test instance: its zone and scope ("a/1": scope a), or when it
// was taken as gone.
type facts struct {
	zone string
	gone bool
	at   time.Time
}

func (f facts) Gone() (time.Time, bool) { return f.at, f.gone }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestStale(t *testing.T) {
	m := map[string]facts{
		"a/1": {zone: "z"},
		"a/2": {gone: true, at: t0},
		"a/3": {gone: true, at: t0.Add(-5 * time.Minute)},
	}
	keys := []string{"a/4", "a/1", "a/2", "a/3", "a/4"}
	got := Stale(m, keys, t0.Add(time.Minute), 5*time.Minute)
	// Unknown a/4 once; known a/1 not; a/2 gone for 1m of 5m not; a/3 gone
	// for 6m.
	if want := []string{"a/4", "a/3"}; !slices.Equal(got, want) {
		t.Errorf("Stale: %v, want %v", got, want)
	}
	if got := Stale(m, keys, t0.Add(5*time.Minute), 5*time.Minute); !slices.Equal(got, []string{"a/4", "a/2", "a/3"}) {
		t.Errorf("Stale at the TTL: %v", got)
	}
}

func TestSettle(t *testing.T) {
	now := t0.Add(time.Hour)
	m := map[string]facts{
		"a/1": {zone: "old"},        // in the list: replaced
		"a/2": {zone: "z"},          // not in the list: dropped
		"a/3": {gone: true, at: t0}, // gone, not asked: kept as it was
		"a/5": {gone: true, at: t0}, // gone, asked, not in the list: gone now
		"b/1": {zone: "z"},          // another scope: kept
		"b/2": {gone: true, at: t0}, // another scope, asked: kept
		"a/6": {gone: true, at: t0}, // gone, in the list again: back
		"a/7": {gone: true, at: t0}, // gone, asked, in the list
		"a/8": {zone: "z", at: now}, // not asked, in the list
	}
	found := map[string]facts{"a/1": {zone: "new"}, "a/4": {zone: "z4"}, "a/6": {zone: "z6"}, "a/7": {zone: "z7"}, "a/8": {zone: "z"}}
	asked := []string{"a/5", "a/7", "a/9", "b/2", "b/3"}
	inA := func(k string) bool { return k[0] == 'a' }
	Settle(m, inA, found, asked, func(string) facts { return facts{gone: true, at: now} })
	want := map[string]facts{
		"a/1": {zone: "new"},
		"a/3": {gone: true, at: t0},
		"a/4": {zone: "z4"},
		"a/5": {gone: true, at: now},
		"a/6": {zone: "z6"},
		"a/7": {zone: "z7"},
		"a/8": {zone: "z"},
		"a/9": {gone: true, at: now},
		"b/1": {zone: "z"},
		"b/2": {gone: true, at: t0},
	}
	if !maps.Equal(m, want) {
		t.Errorf("after Settle:\n%v\nwant\n%v", m, want)
	}
}
