package v1alpha1

import (
	"strings"
	"testing"
)

func TestCloudProviders(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string // "" means valid
	}{
		{"aws by cluster name", "cloud:\n  provider: aws\n  aws:\n    clusterName: prod\n", ""},
		{"aws by group names", "cloud:\n  provider: aws\n  aws:\n    region: eu-west-1\n    autoScalingGroups: [od, spot]\n", ""},
		{"aws with neither", "cloud:\n  provider: aws\n",
			"cloud.aws.clusterName: Required value: the aws provider needs the cluster's name"},
		{"an empty group name", "cloud:\n  provider: aws\n  aws:\n    autoScalingGroups: [\"\"]\n",
			`cloud.aws.autoScalingGroups[0]: Invalid value: "": an Auto Scaling group name has 1 to 255 characters`},
		{"unknown provider", "cloud:\n  provider: openstack\n", `cloud.provider: Unsupported value: "openstack": supported values: "kubernetes", "aws", "kwok"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, errs := Parse([]byte(header + tc.body))
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatalf("want valid, got %v", errs.ToAggregate())
				}
				return
			}
			if c != nil || len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("got %v, want one problem containing %s", errs.ToAggregate(), tc.want)
			}
		})
	}
}

// A migrator with no node groups behind it is valid (the simulator brings its
// own) but can never act in MakeBeforeBreak mode, and in DrainFirst mode only
// onto the spot nodes already there: a warning says which.
func TestMigratorWithoutNodeGroupsWarns(t *testing.T) {
	c, errs := Parse([]byte(header + "migrator:\n  enabled: true\n"))
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	if w := Warnings(c); len(w) != 1 || !strings.Contains(w[0], "cloud.provider is kubernetes, which has no node groups") ||
		!strings.Contains(w[0], "MakeBeforeBreak mode the migrator can never replace a node") {
		t.Errorf("warnings %q", w)
	}
	c, _ = Parse([]byte(header + "migrator:\n  enabled: true\n  mode: DrainFirst\n"))
	if w := Warnings(c); len(w) != 1 || !strings.Contains(w[0], "drains on-demand nodes onto the spot nodes already there") {
		t.Errorf("DrainFirst warnings %q", w)
	}
	c, _ = Parse([]byte(header + "migrator:\n  enabled: true\ncloud:\n  provider: aws\n  aws:\n    clusterName: prod\n"))
	if w := Warnings(c); len(w) != 0 {
		t.Errorf("warnings with a provider that has node groups: %q", w)
	}
}
