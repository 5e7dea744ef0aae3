package gencluster

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// source is splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom
// number generators", OOPSLA 2014): a few lines whose sequence is fixed for
// good, unlike math/rand's, so the output never changes with the Go release.
type source struct{ state uint64 }

func (s *source) uint64() uint64 {
	s.state += 0x9e3779b97f4a7c15
	z := s.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// below returns a number in [0, n).
func (s *source) below(n int) int { return int(s.uint64() % uint64(n)) }

// unit returns a number in [0, 1) from the top 53 bits of one draw.
func (s *source) unit() float64 { return float64(s.uint64()>>11) / (1 << 53) }

// bernoulli returns true with probability p.
func (s *source) bernoulli(p float64) bool { return s.unit() < p }

// uid returns a random version 4 UUID from two draws.
func (s *source) uid() types.UID {
	hi, lo := s.uint64(), s.uint64()
	return types.UID(fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x",
		hi>>32, (hi>>16)&0xffff, hi&0xfff, (lo>>48)&0xfff, lo&(1<<48-1)))
}

// nameAlphabet is the alphabet of the random suffixes of ReplicaSet and pod
// names: the controllers' (apimachinery's rand.String), without vowels and
// easily confused characters.
const nameAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// suffix returns n random characters of nameAlphabet.
func (s *source) suffix(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = nameAlphabet[s.below(len(nameAlphabet))]
	}
	return string(b)
}
