package kwok_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"spotter.dev/spotter/internal/cloud/kwok"
)

func TestLoadConfig(t *testing.T) {
	cfg, err := kwok.LoadConfig("testdata/lab.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if errs := cfg.Validate(); len(errs) > 0 {
		t.Fatalf("example config invalid: %v", errs)
	}
	spot := cfg.NodeGroups[1]
	if cfg.Interval.Duration != 2*time.Second || !spot.Spot || *spot.PricePerHour != 0.07 ||
		spot.ProvisioningDelay.Duration != 30*time.Second || spot.Trace.Offset.Duration != 40*time.Minute {
		t.Errorf("decoded %+v", cfg)
	}
	if want := filepath.Join("testdata", "traces"); !strings.HasPrefix(spot.Trace.Path, want) {
		t.Errorf("trace path %q not resolved against the file's directory", spot.Trace.Path)
	}
	p, err := kwok.New(k8sfake.NewClientset(), clocktesting.NewFakeClock(epoch), *cfg)
	if err != nil {
		t.Fatal(err)
	}
	// 40 min into the trace is tick 8: 16 of 16, so the limit of 8 holds.
	if c, limited := p.NodeGroup("spot").Capacity(); c != 8 || !limited {
		t.Errorf("spot capacity %d, %v", c, limited)
	}
	if _, limited := p.NodeGroup("on-demand").Capacity(); limited {
		t.Error("the on-demand group is limited")
	}
}

func TestLoadConfigIsStrict(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("nodeGroups:\n- id: a\n  maxSize: 1\n  spotty: true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kwok.LoadConfig(path); err == nil || !strings.Contains(err.Error(), "spotty") {
		t.Errorf("unknown field: %v", err)
	}
	if _, err := kwok.LoadConfig(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("no error for a missing file")
	}
}

func TestValidate(t *testing.T) {
	valid := func() kwok.NodeGroupConfig { return kwok.NodeGroupConfig{ID: "g", MaxSize: 3} }
	with := func(change func(*kwok.NodeGroupConfig)) kwok.Config {
		g := valid()
		change(&g)
		return kwok.Config{NodeGroups: []kwok.NodeGroupConfig{g}}
	}
	for _, tc := range []struct {
		name string
		cfg  kwok.Config
		want []string // field paths
	}{
		{"valid", with(func(*kwok.NodeGroupConfig) {}), nil},
		{"negative interval", kwok.Config{Interval: metav1.Duration{Duration: -time.Second}}, []string{"interval"}},
		{"bad id", with(func(g *kwok.NodeGroupConfig) { g.ID = "Spot_A" }), []string{"nodeGroups[0].id"}},
		{"long id", with(func(g *kwok.NodeGroupConfig) { g.ID = strings.Repeat("a", 58) }), []string{"nodeGroups[0].id"}},
		{"duplicate id", kwok.Config{NodeGroups: []kwok.NodeGroupConfig{valid(), valid()}}, []string{"nodeGroups[1].id"}},
		{"sizes", with(func(g *kwok.NodeGroupConfig) { g.MinSize, g.MaxSize, g.InitialSize = 2, 1, 3 }),
			[]string{"nodeGroups[0].maxSize", "nodeGroups[0].initialSize"}},
		{"negative initial", with(func(g *kwok.NodeGroupConfig) { g.InitialSize = -1 }), []string{"nodeGroups[0].initialSize"}},
		{"negative min", with(func(g *kwok.NodeGroupConfig) { g.MinSize = -1 }), []string{"nodeGroups[0].minSize"}},
		{"zero max", with(func(g *kwok.NodeGroupConfig) { g.MaxSize = 0 }), []string{"nodeGroups[0].maxSize"}},
		{"quantities", with(func(g *kwok.NodeGroupConfig) { g.CPU, g.Memory, g.Pods = "lots", "0", "-1" }),
			[]string{"nodeGroups[0].cpu", "nodeGroups[0].memory", "nodeGroups[0].pods"}},
		{"label values", with(func(g *kwok.NodeGroupConfig) { g.InstanceType, g.Zone = "a b", "c/d" }),
			[]string{"nodeGroups[0].instanceType", "nodeGroups[0].zone"}},
		{"reserved labels", with(func(g *kwok.NodeGroupConfig) {
			g.Labels = map[string]string{kwok.NodeGroupLabel: "x", "karpenter.sh/capacity-type": "spot"}
		}), []string{"nodeGroups[0].labels[spotter.dev/node-group]", "nodeGroups[0].labels[karpenter.sh/capacity-type]"}},
		{"bad label", with(func(g *kwok.NodeGroupConfig) { g.Labels = map[string]string{"a b": "c"} }), []string{"nodeGroups[0].labels"}},
		{"taint", with(func(g *kwok.NodeGroupConfig) { g.Taints = []corev1.Taint{{Key: "", Effect: "Sometimes"}} }),
			[]string{"nodeGroups[0].taints[0].key", "nodeGroups[0].taints[0].effect"}},
		{"negatives", with(func(g *kwok.NodeGroupConfig) {
			g.PricePerHour, g.CapacityLimit = ptr.To(-1.0), ptr.To(-1)
			g.ProvisioningDelay.Duration = -time.Second
		}), []string{"nodeGroups[0].pricePerHour", "nodeGroups[0].provisioningDelay", "nodeGroups[0].capacityLimit"}},
		{"trace", with(func(g *kwok.NodeGroupConfig) {
			g.Trace = &kwok.TraceConfig{Nodes: -1, ScaleTo: -1, Offset: metav1.Duration{Duration: -time.Second}}
		}), []string{"nodeGroups[0].trace.path", "nodeGroups[0].trace.nodes", "nodeGroups[0].trace.scaleTo", "nodeGroups[0].trace.offset"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.cfg.Validate()
			var got []string
			for _, e := range errs {
				if len(got) == 0 || got[len(got)-1] != e.Field { // one field may have several messages
					got = append(got, e.Field)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("fields %v, want %v (%v)", got, tc.want, errs)
			}
			if len(tc.want) > 0 {
				if _, err := kwok.New(k8sfake.NewClientset(), clocktesting.NewFakeClock(epoch), tc.cfg); err == nil {
					t.Error("New accepted an invalid config")
				}
			}
		})
	}
}

func TestNewReportsABadTrace(t *testing.T) {
	_, err := kwok.New(k8sfake.NewClientset(), clocktesting.NewFakeClock(epoch), kwok.Config{NodeGroups: []kwok.NodeGroupConfig{
		{ID: "g", Spot: true, MaxSize: 1, Trace: &kwok.TraceConfig{Path: "testdata/missing.json"}},
	}})
	if err == nil || !strings.Contains(err.Error(), "nodeGroups[0]") {
		t.Errorf("New with a missing trace: %v", err)
	}
}
