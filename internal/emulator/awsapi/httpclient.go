package awsapi

import (
	"io"
	"net/http"
)

// HTTPClient is an HTTP client for SDK clients pointed at the emulator: set
// it as aws.Config.HTTPClient (it has the Do method the SDK asks for).
//
// Why it exists: the SDK closes a request's body as soon as the response
// headers arrive, and its closed body answers WriteTo with io.EOF as an
// error. net/http, after sending a body of known length, checks for extra
// bytes with io.Copy, which prefers WriteTo; when an in-process server
// answers before that check runs, the transport takes the io.EOF for a
// failed write and closes the connection under the response being read
// ("use of closed network connection"). Over a real network the answer
// never comes that fast. HTTPClient hides WriteTo, so the check reads a
// closed body as a clean end.
type HTTPClient struct {
	*http.Client
}

// NewHTTPClient returns an HTTPClient on its own transport.
func NewHTTPClient() *HTTPClient {
	return &HTTPClient{&http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}
}

// Do sends r with its body reduced to Read and Close.
func (c *HTTPClient) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = readCloser{r.Body}
	}
	return c.Client.Do(r)
}

// readCloser exposes only Read and Close of a body.
type readCloser struct{ rc io.ReadCloser }

func (b readCloser) Read(p []byte) (int, error) { return b.rc.Read(p) }
func (b readCloser) Close() error               { return b.rc.Close() }
