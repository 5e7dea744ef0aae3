package lab

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinDirEnv names the environment variable that points at the Kubernetes
// binaries; `make` sets it after running hack/kube-bin.sh.
const BinDirEnv = "SPOTTER_KUBE_BIN_DIR"

// OldestBinDirEnv names the environment variable that points at the binaries
// of the oldest Kubernetes minor the chart supports (hack/kube-bin.sh --oldest).
const OldestBinDirEnv = "SPOTTER_KUBE_OLDEST_BIN_DIR"

// FindBinaries returns the directory of the Kubernetes binaries: $SPOTTER_KUBE_BIN_DIR
// when set, else the cache of hack/kube-bin.sh in the Spotter checkout that holds
// the working directory, building what is missing (progress goes to progress).
func FindBinaries(progress io.Writer) (string, error) {
	return findBinaries(progress, BinDirEnv)
}

// FindOldestBinaries is FindBinaries for the oldest Kubernetes minor the chart
// supports: $SPOTTER_KUBE_OLDEST_BIN_DIR, else hack/kube-bin.sh --oldest.
func FindOldestBinaries(progress io.Writer) (string, error) {
	return findBinaries(progress, OldestBinDirEnv, "--oldest")
}

func findBinaries(progress io.Writer, env string, args ...string) (string, error) {
	if dir := os.Getenv(env); dir != "" {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		script := filepath.Join(dir, "hack", "kube-bin.sh")
		if _, err := os.Stat(script); err == nil {
			var out bytes.Buffer
			cmd := exec.Command("bash", append([]string{script}, args...)...)
			cmd.Stdout = &out
			if progress != nil {
				cmd.Stderr = progress
			}
			if err := cmd.Run(); err != nil {
				return "", fmt.Errorf("%w: %s failed: %w", ErrNoBinaries, script, err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			return lines[len(lines)-1], nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("%w: set %s, or run from a Spotter checkout (hack/kube-bin.sh builds them)", ErrNoBinaries, env)
		}
	}
}

// insecureTLS reaches the health endpoints of the scheduler and the
// controller-manager, which serve self-signed certificates on loopback.
var insecureTLS = &http.Client{Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback health checks of self-signed lab components
}}
