// Package instancecache is the cache of instance facts the providers that
// list instances a scope at a time (gcp: a project; azure: a scale set or a
// resource group) share. What never changes for an instance (type, zone,
// spot or not, group) is kept for the instance's life; an instance a list of
// its scope did not have is taken as gone, and asked about again only after
// a TTL, so that a Node whose instance is gone costs no call per loop.
//
// The map and its lock stay the provider's (its prices read the same
// facts); these functions are the rules the providers apply to it.
package instancecache

import "time"

// Facts is what a provider keeps of an instance.
type Facts interface {
	// Gone reports whether the instance was taken as gone, and since when.
	Gone() (since time.Time, gone bool)
}

// Stale returns the keys m does not know, or knows as gone since ttl or
// longer before now: those whose scope must be listed again. They come in
// the order of keys, each once.
func Stale[K comparable, F Facts](m map[K]F, keys []K, now time.Time, ttl time.Duration) []K {
	var out []K
	seen := map[K]bool{}
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		f, ok := m[k]
		if !ok {
			out = append(out, k)
			continue
		}
		if since, gone := f.Gone(); gone && now.Sub(since) >= ttl {
			out = append(out, k)
		}
	}
	return out
}

// Settle records in m a list of the instances of a scope (the keys for
// which inScope is true): the list is the scope's truth. What m knows in
// the scope and not as gone is dropped, found (the list) is added, and each
// of asked (the keys the list was made for) in the scope that found lacks is
// set to gone(key).
func Settle[K comparable, F Facts](m map[K]F, inScope func(K) bool, found map[K]F, asked []K, gone func(K) F) {
	for k, f := range m {
		if _, isGone := f.Gone(); inScope(k) && !isGone {
			delete(m, k)
		}
	}
	for k, f := range found {
		m[k] = f
	}
	for _, k := range asked {
		if _, ok := found[k]; !ok && inScope(k) {
			m[k] = gone(k)
		}
	}
}
