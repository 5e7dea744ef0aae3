// Package emulatortest is the test scaffolding the emulators' tests share:
// a request sent over HTTP and its answer read in full. Only tests import
// it.
package emulatortest

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// Answer is a response read in full (its body is returned beside it).
type Answer struct {
	StatusCode int
	Status     string
	Header     http.Header
}

// Do sends method url with header and body through the default client and
// returns the answer and its body, failing t when the request cannot be
// made or the body read.
func Do(t testing.TB, method, url string, header map[string]string, body string) (Answer, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return Answer{resp.StatusCode, resp.Status, resp.Header}, string(b)
}

// Unanswered sends method url with header on a connection of its own and
// reports whether it got no answer at all (the connection closed first), as
// a refused read of a metadata emulator is.
func Unanswered(t testing.TB, method, url string, header map[string]string) bool {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return true
	}
	_ = resp.Body.Close()
	return false
}
