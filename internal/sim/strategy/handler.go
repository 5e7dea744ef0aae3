package strategy

import (
	"time"

	"spotter.dev/spotter/internal/sim/report"
	"spotter.dev/spotter/internal/sim/world"
)

// handlerRetry is how long kubectl drain waits before it asks again for an
// eviction a PodDisruptionBudget refused (k8s.io/kubectl/pkg/drain: "will
// retry after 5s").
const handlerRetry = 5 * time.Second

// runTerminationHandler gives the seed rows the termination handler their
// users ran beside them (k8s-spot-termination-handler was published beside
// k8s-spot-rescheduler; kube-spot-termination-notice-handler and the Node
// Termination Handler did the same job): on a node's notice it cordons the
// node and drains it as `kubectl drain --force --ignore-daemonsets
// --delete-emptydir-data` does, every pod evicted through the Eviction API at
// once with its own grace period (no priority tiers, no grace capped to the
// notice), a refusal asked again every 5 s, until no pod is left or the node
// is gone. It runs on the world's clock, between the steps.
//
// Its evictions are not voluntary (the node goes anyway): they are listed
// under its name, like the spotter row's agent's, and not counted.
func runTerminationHandler(w *world.World) {
	w.OnNotice = func(n *world.Node) {
		w.Cordon(n, true)
		w.Clock.Go(func() {
			for world.Alive(w, n) {
				left := 0
				for _, p := range world.Movable(n) {
					if w.Evict(p, report.ComponentHandler) != nil {
						left++
					}
				}
				if left == 0 {
					return
				}
				w.Clock.Sleep(handlerRetry)
			}
		})
	}
}
