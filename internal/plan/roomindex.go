package plan

import (
	"container/heap"
	"math"
	"math/bits"
)

// roomIndex finds the best-fitting spot nodes for a pod without scoring every
// spot node. Within each class of spot nodes (see nodeClasses) the nodes sit in
// buckets by their fill, the requested share of their scarcer resource now.
// A pod's best-fit score on a node (room.score) is at least the node's fill
// and at most its fill plus the pod's share of the node, so the buckets can be
// explored from the fullest down, and a bucket whose bound is below a score
// already found need not be explored before that node is tried. The order in
// which nodes come out is exactly the order of sorting every node with room by
// score, then index (see better); the planner's exhaustive mode checks it.
type roomIndex struct {
	room *[]room
	// buckets[c][b] are the nodes of class c in bucket b; nonEmpty[c] has bit
	// b set when that bucket has nodes.
	buckets  [][][]int32
	nonEmpty [][]uint64
	// at is each node's class, bucket and position in its bucket.
	at []slot
	// minCPU and minMem are the smallest allocatable CPU and memory of each
	// class, which bound a pod's share of its nodes.
	minCPU, minMem []int64
}

type slot struct{ class, bucket, pos int32 }

// fillBuckets is the number of buckets per class; the last holds every node
// at least as full as (fillBuckets-1)/fillBuckets, overcommitted ones too.
const fillBuckets = 512

func newRoomIndex(rooms *[]room, classes [][]int) *roomIndex {
	x := &roomIndex{room: rooms, at: make([]slot, len(*rooms))}
	for c, members := range classes {
		x.buckets = append(x.buckets, make([][]int32, fillBuckets))
		x.nonEmpty = append(x.nonEmpty, make([]uint64, fillBuckets/64))
		minCPU, minMem := int64(math.MaxInt64), int64(math.MaxInt64)
		for _, i := range members {
			n := &(*rooms)[i]
			minCPU, minMem = min(minCPU, n.allocCPU), min(minMem, n.allocMem)
			x.at[i].class = int32(c)
			x.insert(i)
		}
		x.minCPU, x.minMem = append(x.minCPU, minCPU), append(x.minMem, minMem)
	}
	return x
}

// fillBucket is the bucket of a node with room n.
func fillBucket(n *room) int32 {
	f := max(ratio(n.usedCPU, n.allocCPU), ratio(n.usedMem, n.allocMem))
	return int32(min(max(f, 0)*fillBuckets, fillBuckets-1))
}

// upper is a bound on the fill of the nodes in bucket b.
func upper(b int) float64 {
	if b == fillBuckets-1 {
		return math.Inf(1)
	}
	return float64(b+1) / fillBuckets
}

func (x *roomIndex) insert(i int) {
	s := &x.at[i]
	s.bucket = fillBucket(&(*x.room)[i])
	list := &x.buckets[s.class][s.bucket]
	s.pos = int32(len(*list))
	*list = append(*list, int32(i))
	x.nonEmpty[s.class][s.bucket/64] |= 1 << (s.bucket % 64)
}

// update moves node i to the bucket of its room now.
func (x *roomIndex) update(i int) {
	s := x.at[i]
	if fillBucket(&(*x.room)[i]) == s.bucket {
		return
	}
	list := &x.buckets[s.class][s.bucket]
	last := (*list)[len(*list)-1]
	(*list)[s.pos] = last
	x.at[last].pos = s.pos
	*list = (*list)[:len(*list)-1]
	if len(*list) == 0 {
		x.nonEmpty[s.class][s.bucket/64] &^= 1 << (s.bucket % 64)
	}
	x.insert(i)
}

// below returns the highest non-empty bucket of class c below b, or -1.
func (x *roomIndex) below(c, b int) int {
	words := x.nonEmpty[c]
	for b--; b >= 0; {
		w := b / 64
		if m := words[w] & (1<<(b%64+1) - 1); m != 0 {
			return w*64 + bits.Len64(m) - 1
		}
		b = w*64 - 1
	}
	return -1
}

// bestFirst returns the nodes of the given classes with room for a pod
// requesting cpu and mem, best fit first, one at a time.
func (x *roomIndex) bestFirst(classes []int, cpu, mem int64) *bestFirst {
	it := &bestFirst{x: x, cpu: cpu, mem: mem, classes: classes}
	for _, c := range classes {
		// The pod's largest share of a node of the class, and a margin for
		// rounding: the bound must never be below a score.
		share := max(ratio(cpu, x.minCPU[c]), ratio(mem, x.minMem[c]))
		it.share = append(it.share, share+1e-9)
		it.next = append(it.next, x.below(c, fillBuckets))
	}
	return it
}

type bestFirst struct {
	x        *roomIndex
	cpu, mem int64
	classes  []int
	share    []float64
	// next is, per class, the next bucket to explore (-1: none left).
	next  []int
	found candidateHeap
}

// pop returns the next node, or false when every node with room was returned.
func (it *bestFirst) pop() (candidate, bool) {
	for {
		k, bound := -1, math.Inf(-1)
		for j, b := range it.next {
			if b < 0 {
				continue
			}
			if u := upper(b) + it.share[j]; u > bound {
				k, bound = j, u
			}
		}
		if len(it.found) > 0 && (k < 0 || it.found[0].score > bound) {
			return heap.Pop(&it.found).(candidate), true
		}
		if k < 0 {
			return candidate{}, false
		}
		c, b := it.classes[k], it.next[k]
		for _, i := range it.x.buckets[c][b] {
			n := &(*it.x.room)[i]
			if n.fits(it.cpu, it.mem) == "" {
				heap.Push(&it.found, candidate{int(i), n.score(it.cpu, it.mem)})
			}
		}
		it.next[k] = it.x.below(c, b)
	}
}

// candidateHeap pops the best candidate first (see better).
type candidateHeap []candidate

func (h candidateHeap) Len() int           { return len(h) }
func (h candidateHeap) Less(i, j int) bool { return better(h[i], h[j]) < 0 }
func (h candidateHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *candidateHeap) Push(v any)        { *h = append(*h, v.(candidate)) }
func (h *candidateHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}
