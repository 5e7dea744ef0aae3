package notice_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"spotter.dev/spotter/internal/agent/notice"
	"spotter.dev/spotter/internal/emulator/awsimds"
	"spotter.dev/spotter/internal/emulator/azureimds"
	"spotter.dev/spotter/internal/emulator/gcpmetadata"
)

func TestDetect(t *testing.T) {
	gcp := gcpmetadata.New(gcpmetadata.Options{})
	defer gcp.Close()
	for want, h := range map[string]http.Handler{
		notice.CloudAWS:   awsimds.New(awsimds.Options{}),
		notice.CloudGCP:   gcp,
		notice.CloudAzure: azureimds.New(azureimds.Options{}),
	} {
		t.Run(want, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			got, err := notice.Detect(context.Background(), nil, srv.URL+"/", 5*time.Second)
			if err != nil || got != want {
				t.Errorf("Detect = %q, %v; want %q", got, err, want)
			}
		})
	}
}

func TestDetectNone(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	_, err := notice.Detect(context.Background(), nil, srv.URL, 5*time.Second)
	if err == nil {
		t.Fatal("Detect found a cloud behind a server that answers 404 to everything")
	}
	for _, want := range []string{
		"no cloud metadata service answered",
		"aws (PUT " + srv.URL + "/latest/api/token): HTTP status 404",
		"gcp (GET " + srv.URL + "/computeMetadata/v1/instance/id)",
		"azure (GET " + srv.URL + "/metadata/instance/compute/name?api-version=2021-02-01&format=text)",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}

	// Nothing listening: every probe fails, each with its own error.
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	if _, err := notice.Detect(context.Background(), nil, closed.URL, time.Second); err == nil || strings.Count(err.Error(), "connection refused") != 3 {
		t.Errorf("Detect against a closed port: %v", err)
	}
}

func TestDetectCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := notice.Detect(ctx, nil, "http://127.0.0.1:1", time.Second); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("Detect with a canceled context: %v", err)
	}
}
