package lab

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"sigs.k8s.io/yaml"
)

// podDeleteDelay makes kwok remove a deleted pod when its deletionTimestamp is
// reached, that is when its grace period ends, as a kubelet would. kwok's own
// pod-delete stage removes it about 10 ms after deletion starts, which would make
// every drain look instant. durationMilliseconds is the fallback when the
// expression yields nothing.
var podDeleteDelay = map[string]any{
	"durationMilliseconds": 10000,
	"durationFrom":         map[string]any{"expressionFrom": ".metadata.deletionTimestamp"},
}

// writeKwokStages writes the Stage objects kwok needs into one configuration
// file: the stages copied by hack/kube-bin.sh from the kwok module, with the
// pod-delete stage given the grace-period delay.
func writeKwokStages(binDir, dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(binDir, "kwok-stages", "*.yaml"))
	if err != nil || len(files) == 0 {
		return "", fmt.Errorf("no kwok stages in %s/kwok-stages: run hack/kube-bin.sh", binDir)
	}
	sort.Strings(files)
	var out bytes.Buffer
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		var stage map[string]any
		if err := yaml.Unmarshal(data, &stage); err != nil {
			return "", fmt.Errorf("reading kwok stage %s: %w", f, err)
		}
		if meta, _ := stage["metadata"].(map[string]any); meta["name"] == "pod-delete" {
			spec, _ := stage["spec"].(map[string]any)
			if spec == nil {
				return "", fmt.Errorf("kwok stage %s has no spec", f)
			}
			spec["delay"] = podDeleteDelay
		}
		doc, err := yaml.Marshal(stage)
		if err != nil {
			return "", err
		}
		out.WriteString("---\n")
		out.Write(doc)
	}
	path := filepath.Join(dir, "kwok.yaml")
	return path, os.WriteFile(path, out.Bytes(), 0o644)
}
