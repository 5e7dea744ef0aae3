package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// HelmBinDirEnv names the directory holding the helm command the chart tests
// run (hack/helm-bin.sh builds it from Helm's Go module); without it,
// hack/helm-bin.sh of the Spotter checkout that holds the working directory
// builds it (once, into its cache).
const HelmBinDirEnv = "SPOTTER_HELM_BIN_DIR"

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// Helm returns the path of the helm command, building it if needed.
func Helm(t testing.TB) string {
	t.Helper()
	helmOnce.Do(func() {
		dir := os.Getenv(HelmBinDirEnv)
		if dir == "" {
			dir, helmErr = runCheckoutScript("helm-bin.sh", HelmBinDirEnv)
		}
		helmPath = filepath.Join(dir, "helm")
	})
	if helmErr != nil {
		t.Fatalf("helm: %v", helmErr)
	}
	return helmPath
}

// runCheckoutScript runs hack/<script> of the Spotter checkout that holds the
// working directory and returns the last line it prints (a directory).
func runCheckoutScript(script, env string) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		path := filepath.Join(dir, "hack", script)
		if _, err := os.Stat(path); err == nil {
			var out bytes.Buffer
			cmd := exec.Command("bash", path)
			cmd.Stdout, cmd.Stderr = &out, os.Stderr
			if err := cmd.Run(); err != nil {
				return "", fmt.Errorf("%s failed: %w", path, err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			return lines[len(lines)-1], nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("set %s, or run from a Spotter checkout (hack/%s builds it)", env, script)
		}
	}
}

// TokenKubeconfig writes a kubeconfig for the lab's apiserver that
// authenticates with token (a ServiceAccount's, say) and returns its path.
func (e *Env) TokenKubeconfig(name, token string) string {
	e.t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["lab"] = &clientcmdapi.Cluster{Server: e.Config.Host, CertificateAuthorityData: e.Config.CAData, CertificateAuthority: e.Config.CAFile}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "lab", AuthInfo: name}
	cfg.CurrentContext = name
	path := filepath.Join(e.t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		e.t.Fatalf("writing kubeconfig %s: %v", path, err)
	}
	return path
}
