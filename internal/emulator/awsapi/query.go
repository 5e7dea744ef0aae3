package awsapi

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// query reads the parameters of a Query API request.
//
// The two APIs encode lists differently, and the SDK follows each model:
// EC2 lists are flat (InstanceId.1, Filter.1.Name, Filter.1.Value.1), Auto
// Scaling lists have a member level (InstanceIds.member.1,
// Filters.member.1.Values.member.1).
type query url.Values

func (q query) get(key string) string { return url.Values(q).Get(key) }

func (q query) has(key string) bool {
	_, ok := q[key]
	return ok
}

// list returns the values of prefix.1, prefix.2, ... in index order.
func (q query) list(prefix string) []string {
	type entry struct {
		i int
		v string
	}
	var entries []entry
	for k, vs := range q {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok || len(vs) == 0 {
			continue
		}
		i, err := strconv.Atoi(rest)
		if err != nil {
			continue
		}
		entries = append(entries, entry{i, vs[0]})
	}
	sort.Slice(entries, func(a, b int) bool { return entries[a].i < entries[b].i })
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.v
	}
	return out
}

// indexes returns the distinct N of keys prefix.N.* in order.
func (q query) indexes(prefix string) []int {
	seen := map[int]bool{}
	for k := range q {
		rest, ok := strings.CutPrefix(k, prefix+".")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ".")
		if i, err := strconv.Atoi(n); err == nil {
			seen[i] = true
		}
	}
	out := make([]int, 0, len(seen))
	for i := range seen {
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

// filter is one Name with its Values; a request's filters are ANDed, the
// values of one filter ORed.
type filter struct {
	name   string
	values []string
}

// ec2Filters reads Filter.N.Name and Filter.N.Value.M.
func (q query) ec2Filters() []filter {
	var out []filter
	for _, i := range q.indexes("Filter") {
		p := fmt.Sprintf("Filter.%d", i)
		out = append(out, filter{q.get(p + ".Name"), q.list(p + ".Value")})
	}
	return out
}

// autoScalingFilters reads Filters.member.N.Name and
// Filters.member.N.Values.member.M.
func (q query) autoScalingFilters() []filter {
	var out []filter
	for _, i := range q.indexes("Filters.member") {
		p := fmt.Sprintf("Filters.member.%d", i)
		out = append(out, filter{q.get(p + ".Name"), q.list(p + ".Values.member")})
	}
	return out
}

// intParam reads an optional integer; ok is false when absent.
func (q query) intParam(key string) (v int, ok bool, err error) {
	s := q.get(key)
	if s == "" {
		return 0, false, nil
	}
	v, err = strconv.Atoi(s)
	return v, true, err
}

// globMatch reports whether value matches an EC2 filter value, where * is
// any run of characters and ? one character.
func globMatch(pattern, value string) bool {
	if !strings.ContainsAny(pattern, "*?") {
		return pattern == value
	}
	var b strings.Builder
	b.WriteString("^")
	for _, r := range pattern {
		switch r {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	return err == nil && re.MatchString(value)
}

func matchAny(patterns []string, value string) bool {
	for _, p := range patterns {
		if globMatch(p, value) {
			return true
		}
	}
	return false
}

// Pagination tokens are opaque to clients; here they carry the offset of
// the next item.
func encodeToken(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("awsapi:" + strconv.Itoa(offset)))
}

func decodeToken(token string) (int, bool) {
	if token == "" {
		return 0, true
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return 0, false
	}
	n, ok := strings.CutPrefix(string(b), "awsapi:")
	if !ok {
		return 0, false
	}
	offset, err := strconv.Atoi(n)
	return offset, err == nil && offset >= 0
}

// page cuts items[offset:offset+limit] and returns the token of the rest
// ("" when none is left).
func page[T any](items []T, offset, limit int) ([]T, string) {
	if offset > len(items) {
		offset = len(items)
	}
	end := len(items)
	if limit > 0 && offset+limit < end {
		end = offset + limit
	}
	next := ""
	if end < len(items) {
		next = encodeToken(end)
	}
	return items[offset:end], next
}

// Namespaces of the response documents.
const (
	ec2Namespace         = "http://ec2.amazonaws.com/doc/2016-11-15/"
	autoScalingNamespace = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
)

// writeEC2 writes <ActionResponse xmlns=...><requestId>...</requestId>
// followed by the fields of body (a struct whose fields carry xml tags).
func writeEC2(w http.ResponseWriter, action, reqID string, body any) {
	var buf bytes.Buffer
	start := xml.StartElement{Name: xml.Name{Local: action + "Response"}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: ec2Namespace}}}
	err := xml.NewEncoder(&buf).EncodeElement(body, start)
	out := buf.Bytes()
	if err == nil {
		// The start tag ends at the first '>': the namespace holds none.
		i := bytes.IndexByte(out, '>') + 1
		out = slices.Concat(out[:i], []byte("<requestId>"+reqID+"</requestId>"), out[i:])
	}
	writeXML(w, http.StatusOK, out, err)
}

// writeAutoScaling writes <ActionResponse xmlns=...><ActionResult>fields
// of body</ActionResult><ResponseMetadata><RequestId>...; a nil body leaves
// the Result element out, as for actions without output.
func writeAutoScaling(w http.ResponseWriter, action, reqID string, body any) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `<%sResponse xmlns="%s">`, action, autoScalingNamespace)
	var err error
	if body != nil {
		err = xml.NewEncoder(&buf).EncodeElement(body, xml.StartElement{Name: xml.Name{Local: action + "Result"}})
	}
	fmt.Fprintf(&buf, "<ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></%sResponse>", reqID, action)
	w.Header().Set("X-Amzn-Requestid", reqID)
	writeXML(w, http.StatusOK, buf.Bytes(), err)
}

// writeEC2Error writes EC2's error envelope.
func writeEC2Error(w http.ResponseWriter, reqID string, e *APIError) {
	type wireError struct {
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	type envelope struct {
		XMLName   xml.Name    `xml:"Response"`
		Errors    []wireError `xml:"Errors>Error"`
		RequestID string      `xml:"RequestID"`
	}
	out, err := xml.Marshal(envelope{Errors: []wireError{{e.Code, e.Message}}, RequestID: reqID})
	writeXML(w, e.Status, out, err)
}

// writeAutoScalingError writes the awsQuery error envelope.
func writeAutoScalingError(w http.ResponseWriter, reqID string, e *APIError) {
	type wireError struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	type envelope struct {
		XMLName   xml.Name  `xml:"ErrorResponse"`
		Xmlns     string    `xml:"xmlns,attr"`
		Error     wireError `xml:"Error"`
		RequestID string    `xml:"RequestId"`
	}
	kind := "Sender"
	if e.Status >= 500 {
		kind = "Receiver"
	}
	out, err := xml.Marshal(envelope{Xmlns: autoScalingNamespace, Error: wireError{kind, e.Code, e.Message}, RequestID: reqID})
	w.Header().Set("X-Amzn-Requestid", reqID)
	writeXML(w, e.Status, out, err)
}

func writeXML(w http.ResponseWriter, status int, body []byte, err error) {
	if err != nil {
		// A bug in the emulator, not an AWS answer.
		http.Error(w, "awsapi: encoding the response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	doc := append([]byte(xml.Header), body...)
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
	w.WriteHeader(status)
	_, _ = w.Write(doc)
}

// Helpers that build the usual errors.

func badRequest(code, format string, args ...any) *APIError {
	return &APIError{http.StatusBadRequest, code, fmt.Sprintf(format, args...)}
}

func validationError(format string, args ...any) *APIError {
	return badRequest("ValidationError", format, args...)
}

// itemList is an EC2 list: <set><item>...</item></set>; an empty list is
// still written as an empty element, as EC2 does.
type itemList[T any] struct {
	Items []T `xml:"item"`
}

// memberList is an Auto Scaling list: <List><member>...</member></List>.
type memberList[T any] struct {
	Members []T `xml:"member"`
}
