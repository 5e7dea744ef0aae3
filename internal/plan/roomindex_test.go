package plan

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// bestFirst must return exactly the nodes with room, in the order of sorting
// them all by score, then index, as nodes fill up between pods.
func TestRoomIndexBestFirstIsSortedOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var rooms []room
		classes := make([][]int, 1+r.IntN(4))
		for i := range 40 + r.IntN(200) {
			alloc := int64(2000 * (1 + r.IntN(4)))
			n := room{allocCPU: alloc, allocMem: alloc << 20, allocPods: 110}
			n.usedCPU, n.usedMem, n.pods = r.Int64N(alloc+alloc/10), r.Int64N(alloc<<20), int64(r.IntN(112))
			rooms = append(rooms, n)
			c := r.IntN(len(classes))
			classes[c] = append(classes[c], i)
		}
		x := newRoomIndex(&rooms, classes)
		for range 30 {
			cpu, mem := r.Int64N(3000), r.Int64N(3000<<20)
			chosen := []int{}
			for c := range classes {
				if r.IntN(3) > 0 {
					chosen = append(chosen, c)
				}
			}
			var want []candidate
			for _, c := range chosen {
				for _, i := range classes[c] {
					if n := &rooms[i]; n.fits(cpu, mem) == "" {
						want = append(want, candidate{i, n.score(cpu, mem)})
					}
				}
			}
			slices.SortFunc(want, better)
			var got []candidate
			it := x.bestFirst(chosen, cpu, mem)
			for c, ok := it.pop(); ok; c, ok = it.pop() {
				got = append(got, c)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: bestFirst gave %v, sorted order is %v", round, got, want)
			}
			if len(want) > 0 {
				// Place the pod on the best node, as the planner does.
				n := &rooms[want[0].i]
				n.usedCPU, n.usedMem, n.pods = n.usedCPU+cpu, n.usedMem+mem, n.pods+1
				x.update(want[0].i)
			}
		}
	}
}
