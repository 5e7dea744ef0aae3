package sim

import (
	"context"
	"testing"
	"time"

	"spotter.dev/spotter/internal/sim/scenario"
	"spotter.dev/spotter/internal/sim/strategy"
)

// BenchmarkSpotterDefault2d runs the spotter strategy (the real controllers
// on the world's clock) over two days of the default scenario.
//
//	go test ./internal/sim -run '^$' -bench SpotterDefault2d -benchtime 1x
func BenchmarkSpotterDefault2d(b *testing.B) {
	sc := scenario.DefaultScenario()
	sc.Duration.Duration = 48 * time.Hour
	for b.Loop() {
		if _, err := Run(context.Background(), sc, Options{Strategies: []string{strategy.Spotter}}); err != nil {
			b.Fatal(err)
		}
	}
}
